// gpt-oss's harmony messages read as they stream (see harmony_parser.h).
#include "server/harmony_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace jitllm::server {

namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kNextAssistant = "<|start|>assistant";
constexpr std::string_view kFunctions = "functions.";
// A header is a few words; past this without "<|message|>" the text is no header.
constexpr size_t kMaxHeaderBytes = 256;

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// `s` is `whole` or the start of it.
bool may_become(std::string_view s, std::string_view whole) {
  return s.size() <= whole.size() ? starts_with(whole, s) : starts_with(s, whole);
}

// Bytes at the end of `s` that could begin `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, s.size()); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// The word after `key` in a header ("analysis", "functions.get_weather"), or "".
std::string word_after(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  size_t end = at + key.size();
  while (end < header.size() && !space(header[end]) && header[end] != '<') ++end;
  return std::string(header.substr(at + key.size(), end - at - key.size()));
}

}  // namespace

HarmonyParser::HarmonyParser(bool separate, bool calls, std::vector<std::string> names)
    : separate_(separate), calls_(calls), names_(std::move(names)) {}

void HarmonyParser::read_header(size_t at, AnswerPiece& out) {
  const std::string header = pending_.substr(0, at + kMessage.size());
  const std::string_view h = std::string_view(header).substr(0, at);
  const std::string channel = word_after(h, kChannel);
  const std::string recipient = word_after(h, "to=");
  pending_.erase(0, header.size());
  if (!recipient.empty()) {
    if (calls_ && starts_with(recipient, kFunctions) && recipient.size() > kFunctions.size()) {
      call_name_ = recipient.substr(kFunctions.size());
      raw_ = header;
      state_ = State::Call;
      return;
    }
  } else if (channel == "analysis") {
    if (!separate_) out.content += header;
    state_ = State::Reasoning;
    return;
  } else if (channel == "final" || channel == "commentary") {
    // commentary without a recipient: a preamble to the user, shown as content.
    state_ = State::Content;
    return;
  }
  pending_ = header + pending_;
  state_ = State::Raw;
}

bool HarmonyParser::body(std::string& to, bool final) {
  const size_t end = pending_.find(kEnd);
  if (end == std::string::npos) {
    const size_t n = pending_.size() - (final ? 0 : partial_tag(pending_, kEnd));
    to.append(pending_, 0, n);
    pending_.erase(0, n);
    return false;
  }
  to.append(pending_, 0, end);
  pending_.erase(0, end + kEnd.size());
  return true;
}

void HarmonyParser::advance(AnswerPiece& out, bool final) {
  while (true) {
    switch (state_) {
      case State::Header: {
        // A header starts with its channel or its recipient; anything else is text.
        if (!may_become(pending_, kChannel) && !may_become(pending_, " to=") &&
            !may_become(pending_, "to=")) {
          state_ = State::Raw;
          continue;
        }
        const size_t at = pending_.find(kMessage);
        if (at == std::string::npos) {
          if (!final && pending_.size() <= kMaxHeaderBytes) return;
          state_ = State::Raw;
          continue;
        }
        read_header(at, out);
        continue;
      }
      case State::Reasoning:
        if (!body(separate_ ? out.reasoning : out.content, final)) return;
        if (!separate_) out.content += kEnd;
        state_ = State::Between;
        continue;
      case State::Content:
        if (!body(out.content, final)) return;
        state_ = State::Between;
        continue;
      case State::Call: {
        size_t at = 0;
        while (at < pending_.size() && space(pending_[at])) ++at;
        const size_t end = json_value_end(std::string_view(pending_).substr(at));
        if (end == std::string::npos && !final) return;
        nlohmann::ordered_json args;
        if (end != std::string::npos)
          args = nlohmann::ordered_json::parse(pending_.substr(at, end), nullptr, false);
        const bool offered = names_.empty() ||
                             std::find(names_.begin(), names_.end(), call_name_) != names_.end();
        if (end == std::string::npos || !args.is_object() || !offered) {
          // Cut short, or no call of ours: the message stays the text it was.
          pending_ = raw_ + pending_;
          state_ = State::Raw;
          continue;
        }
        out.calls.push_back(ToolCall{new_tool_call_id(ToolSyntax::Harmony), call_name_, args.dump()});
        pending_.erase(0, at + end);
        raw_.clear();
        state_ = State::Between;
        continue;
      }
      case State::Between: {
        // After a message: its "<|end|>" (a call's, if written) and the next assistant message.
        size_t at = 0;
        while (at < pending_.size() && space(pending_[at])) ++at;
        std::string_view rest = std::string_view(pending_).substr(at);
        if (starts_with(rest, kEnd)) rest.remove_prefix(kEnd.size());
        if (starts_with(rest, kNextAssistant)) {
          pending_.erase(0, pending_.size() - rest.size() + kNextAssistant.size());
          state_ = State::Header;
          continue;
        }
        if (!final && (may_become(rest, kNextAssistant) || kEnd.substr(0, rest.size()) == rest))
          return;
        if (rest.empty()) {
          pending_.clear();
          return;
        }
        state_ = State::Raw;
        continue;
      }
      case State::Raw:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

void HarmonyParser::push(std::string_view text, AnswerPiece& out) {
  pending_ += text;
  advance(out, false);
}

void HarmonyParser::finish(AnswerPiece& out) { advance(out, true); }

}  // namespace jitllm::server
