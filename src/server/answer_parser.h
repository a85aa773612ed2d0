// One chat choice's output read, as it streams, into what the response carries: the reasoning
// (reasoning_content), the content, and the tool calls. The parts come from the parsers of
// each concern: <think> reasoning (reasoning_parser.h) in front of the tool calls
// (tool_call_parser.h), or gpt-oss's harmony messages (harmony_parser.h), which hold all three.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace jitllm::server {

class HarmonyParser;
class ReasoningParser;

// How a request's output is read (fixed when the job is made).
struct AnswerFormat {
  bool harmony = false;          // gpt-oss: channels and recipients (harmony_parser.h)
  bool reasoning = false;        // thinking goes to reasoning (else it stays in the content)
  bool starts_thinking = false;  // <think>: the prompt opened it, the output starts inside
  // Calls parsed out of the text (tools given, tool_choice not none): their syntax, and the
  // functions offered (a call of another stays text).
  std::optional<ToolSyntax> tool_syntax;
  std::vector<std::string> tool_names;
  std::map<std::string, std::set<std::string>> string_arguments;  // GlmXml: written raw

  // Anything to parse at all (otherwise the text is the content as it comes).
  bool parsed() const { return harmony || reasoning || tool_syntax.has_value(); }
};

// What one push or finish handed out.
struct AnswerPiece {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

class AnswerParser {
 public:
  explicit AnswerParser(const AnswerFormat& format);
  AnswerParser(AnswerParser&&) noexcept;
  AnswerParser& operator=(AnswerParser&&) noexcept;
  ~AnswerParser();

  AnswerPiece push(std::string_view text);
  // The output ended: everything still held (an unfinished call goes back into the content).
  AnswerPiece finish();
  size_t n_calls() const { return n_calls_; }

 private:
  std::unique_ptr<HarmonyParser> harmony_;
  std::unique_ptr<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
  size_t n_calls_ = 0;
};

}  // namespace jitllm::server
