// ChatTemplate (see chat_template.h): the variables a chat template expects, the
// raise_exception/strftime_now functions, the GGUF metadata lookup and llama.cpp's system-message
// merge for templates that reject the system role.
#include "chat/chat_template.h"

#include "chat/parser.h"
#include "core/error.h"
#include "io/metadata.h"

namespace jitllm::chat {
namespace {

std::string format_time(std::time_t t, const std::string& format) {
  std::tm tm{};
  localtime_r(&t, &tm);
  if (format.empty()) return "";
  std::string out(256, '\0');
  size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
  if (n == 0 && format.size() < 200) {
    out.assign(4096, '\0');
    n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
  }
  out.resize(n);
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token,
                           RenderLimits limits)
    : source_(source),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      limits_(limits),
      ast_(std::make_shared<TemplateAst>(parse_template(source))),
      clock_([] { return std::time(nullptr); }) {}

ChatTemplate ChatTemplate::from_metadata(const Metadata& metadata, const std::string& name) {
  std::string key = name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
  auto source = metadata.get_string_opt(key);
  if (!source) throw_error("metadata key '{}' is missing: the model ships no chat template", key);
  auto token_text = [&](const char* id_key) -> std::string {
    const jitllm::Value* id = metadata.find(id_key);
    const jitllm::Value* tokens = metadata.find("tokenizer.ggml.tokens");
    if (!id || !tokens) return "";
    int64_t i = id->as_i64();
    const auto& items = tokens->as_array().items;
    if (i < 0 || size_t(i) >= items.size())
      throw_error("metadata '{}' = {} is outside tokenizer.ggml.tokens ({} tokens)", id_key, i, items.size());
    return items[size_t(i)].as_string();
  };
  return ChatTemplate(*source, token_text("tokenizer.ggml.bos_token_id"), token_text("tokenizer.ggml.eos_token_id"));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const {
  if (!messages.is_array()) throw_error("chat messages must be a JSON array, got {}", messages.type_name());
  try {
    return render_once(messages, options);
  } catch (const TemplateRaised&) {
    bool leading_system = !messages.empty() && messages[0].is_object() && messages[0].value("role", "") == "system";
    if (!options.merge_system_if_rejected || !leading_system) throw;
    return render_once(merge_system_into_first_user(messages), options);
  }
}

std::string ChatTemplate::render_once(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const {
  std::time_t now = clock_();
  std::map<std::string, Value> globals;
  globals["messages"] = Value::from_json(messages);
  globals["add_generation_prompt"] = Value::boolean(options.add_generation_prompt);
  globals["bos_token"] = Value::string(bos_);
  globals["eos_token"] = Value::string(eos_);
  // llama.cpp's defaults (common_chat_templates_apply): thinking on, today's date.
  globals["enable_thinking"] = Value::boolean(true);
  globals["date_string"] = Value::string(format_time(now, "%d %b %Y"));
  globals["datetime"] = Value::string(format_time(now, "%b %d %Y"));
  globals["raise_exception"] = Value::callable("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
    std::string message = args.positional.empty() ? std::string() : args.positional[0].str();
    throw TemplateRaised(message);
  });
  globals["strftime_now"] = Value::callable("strftime_now", [now](Interpreter&, CallArgs& args) {
    if (args.positional.size() != 1 || !args.positional[0].is_string())
      throw_error("strftime_now() takes one format string");
    return Value::string(format_time(now, args.positional[0].as_string()));
  });
  if (!options.extra_globals.is_object()) throw_error("extra template variables must be a JSON object");
  for (auto it = options.extra_globals.begin(); it != options.extra_globals.end(); ++it)
    globals[it.key()] = Value::from_json(it.value());
  Interpreter interpreter(limits_);
  return interpreter.render(*ast_, globals);
}

nlohmann::ordered_json merge_system_into_first_user(const nlohmann::ordered_json& messages) {
  if (messages.empty() || !messages[0].is_object() || messages[0].value("role", "") != "system") return messages;
  std::string system = messages[0].contains("content") && messages[0]["content"].is_string()
                           ? messages[0]["content"].get<std::string>()
                           : std::string();
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  bool merged = false;
  for (size_t i = 1; i < messages.size(); ++i) {
    nlohmann::ordered_json m = messages[i];
    if (!merged && m.is_object() && m.value("role", "") == "user" && m.contains("content") && m["content"].is_string()) {
      m["content"] = system + "\n" + m["content"].get<std::string>();
      merged = true;
    }
    out.push_back(std::move(m));
  }
  if (!merged) out.insert(out.begin(), nlohmann::ordered_json{{"role", "user"}, {"content", system}});
  return out;
}

}  // namespace jitllm::chat
