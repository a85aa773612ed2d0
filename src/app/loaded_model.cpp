// LoadedModel: loading (model file, engine, tokenizer, template) and prompt tokenization.
#include "app/loaded_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "app/grammar_vocabulary.h"
#include "app/request_error.h"
#include "app/template_choice.h"
#include "chat/chat_template.h"
#include "chat/interpreter.h"
#include "core/error.h"
#include "runtime/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::app {

const char* const kDefaultChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

std::string token_text(const Tokenizer& tok, int32_t id) {
  return id >= 0 && size_t(id) < tok.n_vocab() ? tok.piece(id) : std::string();
}

}  // namespace

std::string model_name_of(const std::string& path) {
  if (path.empty()) return "default";
  std::filesystem::path p(path);
  if (p.filename().empty()) p = p.parent_path();
  return p.has_extension() ? p.stem().string() : p.filename().string();
}

LoadedModel::LoadedModel(const LoadOptions& options) {
  engine_ = std::make_unique<Engine>(load_model_file(options.path), options.engine);
  const Metadata& md = engine_->model().file().metadata;
  tokenizer_ = std::make_unique<Tokenizer>(md);
  guarded_texts_ = tokenizer_->parse_special_texts();
  if (int64_t(tokenizer_->n_vocab()) > engine_->config().n_vocab)
    throw_error("{}: the tokenizer has {} tokens but the model only {} logits", options.path,
                tokenizer_->n_vocab(), engine_->config().n_vocab);
  const std::string bos = token_text(*tokenizer_, tokenizer_->vocab().bos);
  const std::string eos = token_text(*tokenizer_, tokenizer_->vocab().eos);
  if (!options.chat_template.empty()) {
    const TemplateChoice choice = choose_chat_template(options.chat_template);
    template_ = std::make_unique<chat::ChatTemplate>(choice.source, bos, eos);
    if (!choice.end_of_turn.empty()) implicit_stops_.push_back(choice.end_of_turn);
  } else if (md.has("tokenizer.chat_template")) {
    template_ = std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::from_metadata(md));
  } else {
    template_ = std::make_unique<chat::ChatTemplate>(kDefaultChatTemplate, bos, eos);
    own_template_ = false;
    implicit_stops_.push_back("<|im_end|>");
  }
}

LoadedModel::~LoadedModel() = default;

const std::string& LoadedModel::chat_template_source() const { return template_->source(); }

std::vector<int32_t> LoadedModel::tokenize_text(const std::string& text, bool add_special,
                                                bool parse_special) const {
  std::lock_guard lock(text_mutex_);
  return tokenizer_->encode(text, add_special, parse_special);
}

std::vector<int32_t> LoadedModel::tokenize_prompt(const std::string& text) const {
  std::lock_guard lock(text_mutex_);
  return tokenizer_->encode(text, /*add_special=*/true);
}

std::vector<int32_t> LoadedModel::tokenize_raw_prompt(const std::string& text) const {
  return tokenize_rendered(text);
}

chat::GuardedPrompt LoadedModel::render_chat_guarded(const nlohmann::ordered_json& messages,
                                                     const nlohmann::ordered_json& tools,
                                                     const nlohmann::ordered_json& globals) const {
  chat::ChatRenderOptions ro;
  ro.merge_system_if_rejected = true;
  if (globals.is_object()) ro.extra_globals = globals;
  if (!tools.is_null()) ro.extra_globals["tools"] = tools;
  std::lock_guard lock(text_mutex_);
  try {
    return chat::render_guarded(*template_, messages, ro, guarded_texts_);
  } catch (const chat::TemplateRaised& e) {
    throw RequestError("messages",
                       fmt::format("the model's chat template refused the messages: {}", e.what()),
                       "template_error");
  }
}

std::string LoadedModel::render_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools) const {
  return render_chat_guarded(messages, tools).text;
}

std::vector<int32_t> LoadedModel::tokenize_chat(const nlohmann::ordered_json& messages,
                                                const nlohmann::ordered_json& tools,
                                                bool parse_special_in_content,
                                                const std::string& continuation,
                                                const nlohmann::ordered_json& globals) const {
  chat::GuardedPrompt prompt = render_chat_guarded(messages, tools, globals);
  if (parse_special_in_content) prompt.literal_spans.clear();
  if (!continuation.empty()) {
    prompt.literal_spans.emplace_back(prompt.text.size(), prompt.text.size() + continuation.size());
    prompt.text += continuation;
  }
  return tokenize_rendered(prompt);
}

std::vector<int32_t> LoadedModel::tokenize_rendered(const std::string& text) const {
  return tokenize_rendered(chat::GuardedPrompt{text, {}});
}

std::vector<int32_t> LoadedModel::tokenize_rendered(const chat::GuardedPrompt& prompt) const {
  std::lock_guard lock(text_mutex_);
  const std::string& bos = template_->bos_token();
  const bool has_bos = !bos.empty() && prompt.text.rfind(bos, 0) == 0;
  return tokenizer_->encode_with_literals(prompt.text, /*add_special=*/!has_bos,
                                          prompt.literal_spans);
}

std::string LoadedModel::detokenize(const std::vector<int32_t>& ids) const {
  std::lock_guard lock(text_mutex_);
  return tokenizer_->decode(ids);
}

std::shared_ptr<const constrain::Vocabulary> LoadedModel::grammar_vocabulary(bool tool_markers) const {
  std::lock_guard lock(text_mutex_);
  const size_t n = std::min<size_t>(tokenizer_->n_vocab(), size_t(engine_->config().n_vocab));
  auto& vocabulary = grammar_vocabulary_[tool_markers ? 1 : 0];
  if (!vocabulary) vocabulary = make_grammar_vocabulary(*tokenizer_, n, tool_markers);
  if (tool_markers && !rendered_controls_) rendered_controls_ = app::rendered_control_tokens(*tokenizer_, n);
  return vocabulary;
}

std::vector<int32_t> LoadedModel::rendered_control_tokens() const {
  grammar_vocabulary(true);
  std::lock_guard lock(text_mutex_);
  return *rendered_controls_;
}

}  // namespace jitllm::app
