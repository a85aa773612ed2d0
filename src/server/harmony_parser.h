// gpt-oss's output (OpenAI's harmony format) read as it streams. The generation prompt ends in
// "<|start|>assistant", so the output is a run of messages, each a header, "<|message|>", its
// text, and "<|end|>" (then "<|start|>assistant" and the next), the last one ended by
// <|return|> or <|call|> (end-of-generation tokens: they are not in the text):
//
//   <|channel|>analysis<|message|>THOUGHT<|end|>                         -> reasoning
//   <|start|>assistant<|channel|>final<|message|>ANSWER                  -> content
//   <|channel|>commentary<|message|>PREAMBLE<|end|>                      -> content
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{ARGS}   -> a tool call
//   to=functions.NAME<|channel|>commentary json<|message|>{ARGS}  (recipient first: the same)
//
// A message this does not read (another recipient, a header it cannot parse, a call of a
// function not offered or with arguments that are no JSON object) goes into the content as the
// text it was, from there to the end. Owns no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/answer_parser.h"

namespace jitllm::server {

class HarmonyParser {
 public:
  // `separate`: analysis messages go to reasoning; otherwise into the content with their
  // markers (reasoning_format none). `calls`: tool calls are read (tools were offered; `names`
  // are their functions), else a call is text.
  HarmonyParser(bool separate, bool calls, std::vector<std::string> names);

  void push(std::string_view text, AnswerPiece& out);
  void finish(AnswerPiece& out);

 private:
  enum class State { Header, Reasoning, Content, Call, Between, Raw };
  void advance(AnswerPiece& out, bool final);
  // The header in pending_ up to `at` (where "<|message|>" begins) read into the next state.
  void read_header(size_t at, AnswerPiece& out);
  // A body up to "<|end|>": its text to `to`, what is sure so far when the end is not seen.
  bool body(std::string& to, bool final);

  bool separate_, calls_;
  std::vector<std::string> names_;
  State state_ = State::Header;
  std::string pending_;    // output not yet handed out
  std::string raw_;        // the current message's text so far (a message that is not read)
  std::string call_name_;  // State::Call
};

}  // namespace jitllm::server
