// Resolution of --chat-template (see template_choice.h).
#include "app/template_choice.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/builtin_templates.h"
#include "core/error.h"

namespace jitllm::app {

TemplateChoice choose_chat_template(const std::string& file_or_name) {
  std::error_code ec;
  if (std::filesystem::exists(file_or_name, ec)) {
    std::ifstream in(file_or_name, std::ios::binary);
    std::stringstream text;
    if (!in || !(text << in.rdbuf()))
      throw_error("{}: cannot read the chat template file", file_or_name);
    return {text.str(), ""};
  }
  if (const chat::BuiltinTemplate* t = chat::find_builtin_template(file_or_name))
    return {t->source, t->end_of_turn};
  std::string names;
  for (const std::string& n : chat::builtin_template_names()) names += (names.empty() ? "" : ", ") + n;
  throw_error("--chat-template {}: no such file, and not a built-in template ({})", file_or_name,
              names);
}

}  // namespace jitllm::app
