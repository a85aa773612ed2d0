// LoadedModel: a model file made ready for the front ends (`jitllm` commands, `jitllmd`): its
// Engine, its Tokenizer and its chat template, and the text <-> ids helpers built on them. A
// model without a chat template gets a ChatML-like default, with "<|im_end|>" as an implicit
// stop string. Owns no thread and queues nothing: the server wraps it with a scheduler
// (server/served_model.h), the CLI calls the Engine directly.
#pragma once

#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/content_guard.h"
#include "constrain/vocabulary.h"
#include "runtime/engine.h"

namespace jitllm {
class Tokenizer;
}  // namespace jitllm

namespace jitllm::app {

struct LoadOptions {
  std::string path;                // .gguf, .jlm or HF folder ("" = the bundled default model)
  std::string chat_template;       // a file or a built-in name: overrides the model's template
  EngineOptions engine;            // kernels, devices, KV, warm-up (runtime/engine.h)
};

// The ChatML-like template used when a model ships none.
extern const char* const kDefaultChatTemplate;

// The name a model goes by when none is given: the file's stem or the folder's name
// ("default" for the bundled model).
std::string model_name_of(const std::string& path);

class LoadedModel {
 public:
  explicit LoadedModel(const LoadOptions& options);  // loads; throws jitllm::Error
  ~LoadedModel();

  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // False when the model ships no chat template and kDefaultChatTemplate stands in.
  bool has_own_template() const { return own_template_; }
  const std::vector<std::string>& implicit_stops() const { return implicit_stops_; }
  // The Jinja source of the chat template in use (the model's, a file's, or the default).
  const std::string& chat_template_source() const;

  // The helpers below may be called from several threads at once (one lock around the
  // tokenizer and the template).
  // Plain prompt text -> ids, BOS added when the vocabulary asks for it (as `jitllm run`);
  // special-token texts in it are text.
  std::vector<int32_t> tokenize_prompt(const std::string& text) const;
  // Text -> ids, with the vocabulary's BOS/EOS only when add_special (jitllmd's /tokenize).
  // parse_special: control-token texts in it become their ids (llama-server's /tokenize flag).
  std::vector<int32_t> tokenize_text(const std::string& text, bool add_special,
                                     bool parse_special = false) const;
  // A raw prompt the client wrote itself (/v1/completions): special-token texts become their
  // tokens, as llama-server does; BOS as tokenize_rendered (not twice).
  std::vector<int32_t> tokenize_raw_prompt(const std::string& text) const;
  // Chat messages rendered with the template (add_generation_prompt), with the byte ranges where
  // a request string spelled a control token (chat/content_guard.h). Throws RequestError (param
  // messages, code template_error) when the template refuses the conversation.
  // `globals`: more template variables (an object, or null for none: chat_template_kwargs,
  // reasoning_effort).
  chat::GuardedPrompt render_chat_guarded(const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& tools,
                                          const nlohmann::ordered_json& globals = nullptr) const;
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools) const;
  // render_chat_guarded, tokenized with special tokens parsed in the template's text only (a
  // "<|im_end|>" typed in a message stays text, as llama-server does), or everywhere with
  // parse_special_in_content (a client that writes raw control tokens on purpose). BOS is not
  // added twice when the template writes it. `continuation`: the start of the answer, put
  // after the generation prompt as text (never control tokens) for the model to continue.
  std::vector<int32_t> tokenize_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools,
                                     bool parse_special_in_content = false,
                                     const std::string& continuation = "",
                                     const nlohmann::ordered_json& globals = nullptr) const;
  // Text that came out of the template -> ids (special tokens parsed, BOS unless it is there):
  // everywhere for a string, outside the literal spans for a guarded prompt.
  std::vector<int32_t> tokenize_rendered(const std::string& text) const;
  std::vector<int32_t> tokenize_rendered(const chat::GuardedPrompt& prompt) const;
  // The texts a request must not spell as control tokens (Tokenizer::parse_special_texts).
  const std::vector<std::string>& guarded_texts() const { return guarded_texts_; }
  std::string detokenize(const std::vector<int32_t>& ids) const;
  // The vocabulary grammars are matched against (app/grammar_vocabulary.h), built on first
  // use (~0.1 s for 128k tokens) and shared by every constrained request.
  // `tool_markers`: the variant where the tool-call marker tokens are text (grammars of calls).
  std::shared_ptr<const constrain::Vocabulary> grammar_vocabulary(bool tool_markers = false) const;
  // The control tokens a constrained output may hold and its decoder writes as text (the
  // tool-call markers, app/grammar_vocabulary.h).
  std::vector<int32_t> rendered_control_tokens() const;

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<chat::ChatTemplate> template_;
  bool own_template_ = true;
  std::vector<std::string> implicit_stops_;
  std::vector<std::string> guarded_texts_;
  mutable std::mutex text_mutex_;  // tokenizer and template calls from several threads
  mutable std::shared_ptr<const constrain::Vocabulary> grammar_vocabulary_[2];  // under text_mutex_
  mutable std::optional<std::vector<int32_t>> rendered_controls_;            // the same
};

}  // namespace jitllm::app
