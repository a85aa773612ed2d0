// Chat templates shipped in the binary, chosen by name (`--chat-template chatml` on run and
// serve) for a model whose own template is missing or wrong. Each writes the conversation format
// its family's models were trained on (the Jinja text here is ours; the formats are the models').
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jitllm::chat {

struct BuiltinTemplate {
  const char* name;
  const char* source;       // Jinja
  const char* end_of_turn;  // the text that ends an assistant turn: a stop string
  const char* format_of;    // which models write this format
};

// nullptr if `name` is not one.
const BuiltinTemplate* find_builtin_template(std::string_view name);
std::vector<std::string> builtin_template_names();

}  // namespace jitllm::chat
