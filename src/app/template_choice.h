// `--chat-template FILE|NAME` (run, serve, decide): a Jinja file's text, or one of the built-in
// templates by name (chat/builtin_templates.h). A path that exists is always read as a file.
#pragma once

#include <string>

namespace jitllm::app {

struct TemplateChoice {
  std::string source;       // Jinja
  std::string end_of_turn;  // a built-in's turn end, a stop string; "" for a file
};

// Throws jitllm::Error naming the argument and the built-in names when it is neither.
TemplateChoice choose_chat_template(const std::string& file_or_name);

}  // namespace jitllm::app
