// What the answer-parser tests share (reasoning, harmony, DeepSeek and GLM tool calls): an
// output fed to an AnswerParser in pieces cut anywhere must read the same as the whole, and a
// tool-call grammar checked byte by byte against a text.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "constrain/gbnf.h"
#include "constrain/matcher.h"
#include "server/answer_parser.h"

namespace jitllm::server::answer_test {

// An answer as the parser split it: reasoning, content and the calls as "name args".
struct AnswerSplit {
  std::string reasoning, content;
  std::vector<std::string> calls;
  bool operator==(const AnswerSplit& o) const {
    return reasoning == o.reasoning && content == o.content && calls == o.calls;
  }
};

inline std::ostream& operator<<(std::ostream& os, const AnswerSplit& s) {
  os << "{reasoning '" << s.reasoning << "', content '" << s.content << "', calls";
  for (const auto& c : s.calls) os << " [" << c << "]";
  return os << "}";
}

// `text` fed to a parser of format `f` in pieces cut at `cuts` (sorted byte offsets), then
// finished; every piece handed to `add`.
inline void feed_cut(const AnswerFormat& f, const std::string& text, const std::vector<size_t>& cuts,
                     const std::function<void(const AnswerPiece&)>& add) {
  AnswerParser p(f);
  size_t from = 0;
  for (size_t at : cuts) {
    add(p.push(text.substr(from, at - from)));
    from = at;
  }
  add(p.push(text.substr(from)));
  add(p.finish());
}

// The split of `text` cut at `cuts`; `on_call` sees each call as it comes (may be empty).
inline AnswerSplit split_cut(const AnswerFormat& f, const std::string& text,
                             const std::vector<size_t>& cuts,
                             const std::function<void(const ToolCall&)>& on_call = {}) {
  AnswerSplit s;
  feed_cut(f, text, cuts, [&](const AnswerPiece& a) {
    s.reasoning += a.reasoning;
    s.content += a.content;
    for (const ToolCall& c : a.calls) {
      if (on_call) on_call(c);
      s.calls.push_back(c.name + " " + c.arguments);
    }
  });
  return s;
}

// read(text, cuts) whole, cut once at every offset, and a byte at a time: all equal `want`.
template <class T, class Read>
void expect_every_cut(const std::string& text, const T& want, Read read) {
  EXPECT_EQ(read(text, std::vector<size_t>{}), want) << "whole: " << text;
  std::vector<size_t> every;
  for (size_t at = 1; at < text.size(); ++at) {
    EXPECT_EQ(read(text, std::vector<size_t>{at}), want) << "cut at " << at << ": " << text;
    every.push_back(at);
  }
  EXPECT_EQ(read(text, every), want) << "byte by byte: " << text;
}

inline void expect_answer_split(const AnswerFormat& f, const std::string& text, const AnswerSplit& want,
                         const std::function<void(const ToolCall&)>& on_call = {}) {
  expect_every_cut(text, want, [&](const std::string& t, const std::vector<size_t>& cuts) {
    return split_cut(f, t, cuts, on_call);
  });
}

// Whether `gbnf` (from rule `root`) accepts `text` whole, over a vocabulary of the 256 bytes.
inline bool grammar_accepts_text(const std::string& gbnf, const std::string& text,
                                 const std::string& root = "root") {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  constrain::Matcher m(constrain::parse_gbnf(gbnf, root),
                       std::make_shared<constrain::Vocabulary>(bytes, std::vector<int32_t>{}));
  const auto s = m.advance_bytes(m.start(), text);
  return s != constrain::Matcher::kDead && m.accepting(s);
}

}  // namespace jitllm::server::answer_test
