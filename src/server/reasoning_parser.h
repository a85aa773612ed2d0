// A thinking model's output split into its reasoning and its answer, as it streams: models
// that think in <think>...</think> (Qwen3, QwQ, DeepSeek-R1 and its distills) get the thinking
// in `reasoning_content` and the rest in `content`, as llama-server's --reasoning-format
// deepseek does. The output may start inside the thinking (templates that open <think> in the
// generation prompt). Owns no I/O; knows nothing of tool calls (the content goes on to them).
#pragma once

#include <string>
#include <string_view>

namespace jitllm::server {

// llama-server's --reasoning-format: none keeps the thinking in the content; deepseek puts it
// in reasoning_content; auto = deepseek where the template thinks.
enum class ReasoningFormat { None, Deepseek, Auto };

// "none" | "deepseek" | "auto"; throws ApiError 400 naming `param` for anything else.
ReasoningFormat parse_reasoning_format(std::string_view name, const char* param);
const char* reasoning_format_name(ReasoningFormat format);

// The template writes <think> ... </think> (its models think in these tags).
bool template_thinks(std::string_view template_source);
// The rendered prompt ends inside an opened <think> (whitespace may follow it): the output
// starts in the thinking.
bool prompt_opens_thinking(std::string_view prompt_text);
// The rendered prompt ends with a closed (empty) thinking, as Qwen3's template writes it for
// enable_thinking false: the answer comes without one.
bool prompt_closes_thinking(std::string_view prompt_text);

class ReasoningParser {
 public:
  explicit ReasoningParser(bool starts_inside);

  // Feeds more output; appends what can be shown now to `reasoning` and `content`. Text that
  // may be the start of a tag is held back, as is whitespace around the thinking (trimmed).
  void push(std::string_view text, std::string& reasoning, std::string& content);
  // The output ended: the rest (a thinking never closed, cut by max_tokens, is reasoning).
  void finish(std::string& reasoning, std::string& content);

 private:
  enum class State { Start, Thinking, AfterThinking, Content };
  void advance(std::string& reasoning, std::string& content, bool final);

  State state_;
  std::string pending_;  // output not yet handed out
  std::string spaces_;   // whitespace inside the thinking, shown once text follows it
  bool started_ = false; // the thought has shown text (leading whitespace is dropped)
};

}  // namespace jitllm::server
