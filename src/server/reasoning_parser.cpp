// Thinking split off the answer (see reasoning_parser.h).
#include "server/reasoning_parser.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace jitllm::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_space(std::string_view s) {
  size_t at = 0;
  while (at < s.size() && space(s[at])) ++at;
  return at;
}

// Bytes at the end of `s` that could begin `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, s.size()); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningFormat parse_reasoning_format(std::string_view name, const char* param) {
  if (name == "none") return ReasoningFormat::None;
  if (name == "deepseek") return ReasoningFormat::Deepseek;
  if (name == "auto") return ReasoningFormat::Auto;
  throw invalid_request(param, fmt::format("'{}' must be none, deepseek or auto (got '{}')", param,
                                           name));
}

const char* reasoning_format_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::None: return "none";
    case ReasoningFormat::Deepseek: return "deepseek";
    case ReasoningFormat::Auto: return "auto";
  }
  return "auto";
}

bool template_thinks(std::string_view source) {
  return source.find(kOpen) != std::string_view::npos &&
         source.find(kClose) != std::string_view::npos;
}

namespace {

bool ends_with_tag(std::string_view prompt, std::string_view tag) {
  while (!prompt.empty() && space(prompt.back())) prompt.remove_suffix(1);
  return prompt.size() >= tag.size() && prompt.substr(prompt.size() - tag.size()) == tag;
}

}  // namespace

bool prompt_opens_thinking(std::string_view prompt) { return ends_with_tag(prompt, kOpen); }
bool prompt_closes_thinking(std::string_view prompt) { return ends_with_tag(prompt, kClose); }

ReasoningParser::ReasoningParser(bool starts_inside)
    : state_(starts_inside ? State::Thinking : State::Start) {}

void ReasoningParser::advance(std::string& reasoning, std::string& content, bool final) {
  while (true) {
    switch (state_) {
      case State::Start: {
        // Only a <think> at the very start (after whitespace) opens the thinking.
        const size_t at = skip_space(pending_);
        const std::string_view rest = std::string_view(pending_).substr(at);
        if (rest.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, at + kOpen.size());
          state_ = State::Thinking;
          continue;
        }
        if (!final && kOpen.substr(0, rest.size()) == rest) return;  // may still open
        state_ = State::Content;
        continue;
      }
      case State::Thinking: {
        const size_t close = pending_.find(kClose);
        size_t end = close;
        if (close == std::string::npos) end = pending_.size() - (final ? 0 : partial_tag(pending_, kClose));
        // The thought without the whitespace around it: spaces wait for text to follow them.
        for (size_t i = 0; i < end; ++i) {
          if (space(pending_[i])) {
            spaces_ += pending_[i];
            continue;
          }
          if (started_) reasoning += spaces_;
          spaces_.clear();
          reasoning += pending_[i];
          started_ = true;
        }
        if (close == std::string::npos) {
          pending_.erase(0, end);
          return;
        }
        pending_.erase(0, close + kClose.size());
        spaces_.clear();
        state_ = State::AfterThinking;
        continue;
      }
      case State::AfterThinking: {
        // The answer starts at its first non-space byte.
        pending_.erase(0, skip_space(pending_));
        if (pending_.empty()) return;
        state_ = State::Content;
        continue;
      }
      case State::Content:
        content += pending_;
        pending_.clear();
        return;
    }
  }
}

void ReasoningParser::push(std::string_view text, std::string& reasoning, std::string& content) {
  pending_ += text;
  advance(reasoning, content, false);
}

void ReasoningParser::finish(std::string& reasoning, std::string& content) {
  advance(reasoning, content, true);
}

}  // namespace jitllm::server
