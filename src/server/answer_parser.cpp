// One choice's output into reasoning, content and calls (see answer_parser.h).
#include "server/answer_parser.h"

#include "server/harmony_parser.h"
#include "server/reasoning_parser.h"

namespace jitllm::server {

AnswerParser::AnswerParser(const AnswerFormat& f) {
  if (f.harmony) {
    harmony_ = std::make_unique<HarmonyParser>(f.reasoning, f.tool_syntax.has_value(), f.tool_names);
    return;
  }
  if (f.reasoning) reasoning_ = std::make_unique<ReasoningParser>(f.starts_thinking);
  if (f.tool_syntax) tools_.emplace(*f.tool_syntax, f.tool_names, f.string_arguments);
}

AnswerParser::AnswerParser(AnswerParser&&) noexcept = default;
AnswerParser& AnswerParser::operator=(AnswerParser&&) noexcept = default;
AnswerParser::~AnswerParser() = default;

AnswerPiece AnswerParser::push(std::string_view text) {
  AnswerPiece p;
  if (harmony_) {
    harmony_->push(text, p);
  } else {
    // The thinking comes first; calls are read out of what follows it only.
    std::string content;
    if (reasoning_) reasoning_->push(text, p.reasoning, content);
    else content = text;
    p.content = tools_ ? tools_->push(content, p.calls) : std::move(content);
  }
  n_calls_ += p.calls.size();
  return p;
}

AnswerPiece AnswerParser::finish() {
  AnswerPiece p;
  if (harmony_) {
    harmony_->finish(p);
  } else {
    std::string content;
    if (reasoning_) reasoning_->finish(p.reasoning, content);
    if (tools_) {
      p.content = tools_->push(content, p.calls);
      p.content += tools_->finish(p.calls);
    } else {
      p.content = std::move(content);
    }
  }
  n_calls_ += p.calls.size();
  return p;
}

}  // namespace jitllm::server
