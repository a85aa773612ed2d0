// ChatTemplate: a model's Jinja chat template, parsed once, rendered per request into the prompt
// text. It supplies the variables transformers and llama.cpp pass (messages,
// add_generation_prompt, bos_token, eos_token, raise_exception, strftime_now, and llama.cpp's
// enable_thinking / date_string / datetime defaults) and lets the caller add or override any
// (tools, enable_thinking, documents, ...). Rendering is const and thread-safe.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/ast.h"
#include "chat/interpreter.h"

namespace jitllm {
class Metadata;
}

namespace jitllm::chat {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Extra template variables; they override the defaults (e.g. {"enable_thinking": false}).
  nlohmann::ordered_json extra_globals = nlohmann::ordered_json::object();
  // When the template raises on a leading system message (Gemma 2: "System role not
  // supported"), render again with it merged into the first user message, as llama.cpp does.
  bool merge_system_if_rejected = false;
};

class ChatTemplate {
 public:
  // Parses `source`; throws jitllm::Error "template:LINE:COL: ..." on a syntax error.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token,
               RenderLimits limits = {});

  // From GGUF-style metadata: `tokenizer.chat_template` (or `tokenizer.chat_template.<name>`)
  // with bos/eos texts looked up in `tokenizer.ggml.tokens` by `tokenizer.ggml.bos_token_id` /
  // `eos_token_id` (empty when the model has none).
  static ChatTemplate from_metadata(const Metadata& metadata, const std::string& name = {});

  // `messages`: [{"role": ..., "content": ...}, ...] as in the OpenAI/transformers API.
  // Throws TemplateRaised when the template calls raise_exception, jitllm::Error otherwise.
  std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options = {}) const;

  // The clock behind strftime_now, date_string and datetime (default: the system clock).
  void set_clock(std::function<std::time_t()> clock) { clock_ = std::move(clock); }

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  std::string render_once(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;

  std::string source_, bos_, eos_;
  RenderLimits limits_;
  std::shared_ptr<const TemplateAst> ast_;
  std::function<std::time_t()> clock_;
};

// llama.cpp's fallback for templates without a system role: the leading system message's
// content, "\n", then the first user message's content, as one user message.
nlohmann::ordered_json merge_system_into_first_user(const nlohmann::ordered_json& messages);

}  // namespace jitllm::chat
