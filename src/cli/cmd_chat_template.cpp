// `jitllm chat-template`: renders a conversation with a model's chat template and prints the
// prompt exactly (no newline added). SOURCE is a .gguf/.jlm (tokenizer.chat_template, bos/eos
// from the vocabulary), a Hugging Face folder (chat_template.jinja or tokenizer_config.json), or
// a template file (.jinja, with --bos/--eos). The messages file is a JSON array of messages, or
// an object {"messages": [...], "tools": [...], ...} whose other keys become template variables.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "core/error.h"
#include "io/model_file.h"

namespace jitllm::cli {
namespace {

struct ChatTemplateOptions {
  std::string source;
  std::string messages_file;
  std::string bos, eos;
  std::string vars;
  std::string template_name;
  bool no_generation_prompt = false;
  bool strict = false;
  int64_t now = -1;  // Unix time for strftime_now/date_string; -1: the system clock
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_error("{}: invalid JSON: {}", what, e.what());
  }
}

// tokenizer_config.json's bos_token/eos_token: a string or {"content": ...}.
std::string hf_token(const nlohmann::ordered_json& config, const char* key) {
  if (!config.contains(key)) return "";
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

chat::ChatTemplate load_hf_folder(const std::string& dir, const ChatTemplateOptions& opt) {
  std::string config_path = dir + "/tokenizer_config.json";
  nlohmann::ordered_json config = std::filesystem::exists(config_path)
                                      ? parse_json(read_file(config_path), config_path)
                                      : nlohmann::ordered_json::object();
  std::string bos = opt.bos.empty() ? hf_token(config, "bos_token") : opt.bos;
  std::string eos = opt.eos.empty() ? hf_token(config, "eos_token") : opt.eos;
  if (std::filesystem::exists(dir + "/chat_template.jinja") && opt.template_name.empty())
    return chat::ChatTemplate(read_file(dir + "/chat_template.jinja"), bos, eos);
  if (!config.contains("chat_template")) throw_error("{}: no chat_template.jinja and no chat_template in tokenizer_config.json", dir);
  const auto& t = config["chat_template"];
  if (t.is_string() && opt.template_name.empty()) return chat::ChatTemplate(t.get<std::string>(), bos, eos);
  // A list of {"name": ..., "template": ...}: "default" unless --template-name says otherwise.
  std::string want = opt.template_name.empty() ? "default" : opt.template_name;
  if (t.is_array())
    for (const auto& entry : t)
      if (entry.value("name", "") == want && entry.contains("template")) return chat::ChatTemplate(entry["template"].get<std::string>(), bos, eos);
  throw_error("{}: tokenizer_config.json has no chat template named '{}'", config_path, want);
}

chat::ChatTemplate load_template(const ChatTemplateOptions& opt) {
  const std::string& path = opt.source;
  if (std::filesystem::is_directory(path)) return load_hf_folder(path, opt);
  std::string head = read_file(path).substr(0, 4);
  bool model = head == "GGUF" || std::filesystem::path(path).extension() == ".jlm";
  if (model) {
    chat::ChatTemplate t = chat::ChatTemplate::from_metadata(open_model_file(path).metadata, opt.template_name);
    if (opt.bos.empty() && opt.eos.empty()) return t;
    return chat::ChatTemplate(t.source(), opt.bos.empty() ? t.bos_token() : opt.bos, opt.eos.empty() ? t.eos_token() : opt.eos);
  }
  try {
    return chat::ChatTemplate(read_file(path), opt.bos, opt.eos);
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
}

int run_chat_template(const ChatTemplateOptions& opt) {
  chat::ChatTemplate tmpl = load_template(opt);
  if (opt.now >= 0) tmpl.set_clock([t = std::time_t(opt.now)] { return t; });
  nlohmann::ordered_json input = parse_json(read_file(opt.messages_file), opt.messages_file);
  chat::ChatRenderOptions options;
  options.add_generation_prompt = !opt.no_generation_prompt;
  nlohmann::ordered_json messages;
  if (input.is_array()) {
    messages = input;
  } else if (input.is_object() && input.contains("messages")) {
    messages = input["messages"];
    for (auto it = input.begin(); it != input.end(); ++it)
      if (it.key() != "messages") options.extra_globals[it.key()] = it.value();
  } else {
    throw_error("{}: expected a JSON array of messages or an object with \"messages\"", opt.messages_file);
  }
  if (!opt.vars.empty()) {
    nlohmann::ordered_json vars = parse_json(opt.vars, "--vars");
    if (!vars.is_object()) throw_error("--vars: expected a JSON object");
    for (auto it = vars.begin(); it != vars.end(); ++it) options.extra_globals[it.key()] = it.value();
  }
  std::string prompt;
  try {
    prompt = tmpl.render(messages, options);
  } catch (const chat::TemplateRaised& e) {
    bool leading_system = !messages.empty() && messages[0].is_object() && messages[0].value("role", "") == "system";
    if (opt.strict || !leading_system) throw;
    // llama.cpp's behaviour for templates without a system role.
    fmt::print(stderr, "note: the template raised '{}'; rendering with the system message merged into the first user message\n",
               e.message());
    prompt = tmpl.render(chat::merge_system_into_first_user(messages), options);
  }
  fmt::print("{}", prompt);
  std::fflush(stdout);
  return 0;
}

const RegisterCommand kRegister{Command{
    "chat-template", "Render a conversation with a model's chat template",
    [](CLI::App& app) -> std::function<int()> {
      auto opt = std::make_shared<ChatTemplateOptions>();
      app.add_option("source", opt->source, "model (.gguf/.jlm), Hugging Face folder, or template file (.jinja)")->required();
      app.add_option("--messages", opt->messages_file, "JSON file: [messages] or {\"messages\": [...], other variables}")->required();
      app.add_flag("--no-generation-prompt", opt->no_generation_prompt, "add_generation_prompt = false");
      app.add_option("--bos", opt->bos, "bos_token text (template files; overrides the model's)");
      app.add_option("--eos", opt->eos, "eos_token text (template files; overrides the model's)");
      app.add_option("--vars", opt->vars, "extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
      app.add_option("--template-name", opt->template_name, "named template (tokenizer.chat_template.<name>, e.g. tool_use)");
      app.add_option("--now", opt->now, "render as if the clock read this Unix time (reproducible dates)");
      app.add_flag("--strict", opt->strict, "fail when the template rejects the system role instead of merging it");
      return [opt] { return run_chat_template(*opt); };
    }}};

}  // namespace
}  // namespace jitllm::cli
