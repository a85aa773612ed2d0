// See content_guard.h. The request's JSON is walked with an explicit stack (a hostile request
// may nest deeply; nothing here recurses on it).
#include "chat/content_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <set>

#include "core/error.h"

namespace jitllm::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kMark = '\x7f';  // DEL: printable in JSON, no letter, no space, no HTML escape

// The guarded texts by first byte, longest first (so "<|im_start|>" wins over "<|im").
struct Matcher {
  const std::vector<std::string>& texts;
  std::array<std::vector<size_t>, 256> by_first;

  explicit Matcher(const std::vector<std::string>& t) : texts(t) {
    for (size_t i = 0; i < texts.size(); ++i)
      if (!texts[i].empty()) by_first[uint8_t(texts[i][0])].push_back(i);
    for (auto& list : by_first)
      std::stable_sort(list.begin(), list.end(),
                       [&](size_t a, size_t b) { return texts[a].size() > texts[b].size(); });
  }

  // Index of the longest guarded text at s[at], or -1.
  long match(const std::string& s, size_t at) const {
    for (size_t i : by_first[uint8_t(s[at])])
      if (s.compare(at, texts[i].size(), texts[i]) == 0) return long(i);
    return -1;
  }
};

// Every string value inside `root` (object keys are not rendered as content by templates).
template <typename Fn>
void for_each_string(Json& root, Fn&& fn) {
  std::vector<Json*> stack{&root};
  while (!stack.empty()) {
    Json* j = stack.back();
    stack.pop_back();
    if (j->is_string()) {
      fn(j->get_ref<std::string&>());
    } else if (j->is_array() || j->is_object()) {
      for (auto& child : *j) stack.push_back(&child);
    }
  }
}

// The smallest nonce whose placeholder prefix "\x7f<nonce>." appears in no request string and
// not in the template. One pass collects the nonces the inputs spell (a request full of
// "\x7f<n>." costs a scan, not one scan per n).
std::string pick_nonce(Json& messages, Json& globals, const std::string& source) {
  std::set<uint64_t> taken;
  auto note = [&](const std::string& s) {
    for (size_t at = s.find(kMark); at != std::string::npos; at = s.find(kMark, at + 1)) {
      size_t end = at + 1;
      uint64_t n = 0;
      while (end < s.size() && end - at <= 19 && s[end] >= '0' && s[end] <= '9')
        n = n * 10 + uint64_t(s[end++] - '0');
      if (end > at + 1 && end < s.size() && s[end] == '.') taken.insert(n);
    }
  };
  for_each_string(messages, note);
  for_each_string(globals, note);
  note(source);
  uint64_t n = 0;
  while (taken.count(n)) ++n;  // at most one step per nonce the inputs spell
  return std::to_string(n);
}

// Replaces the guarded texts in `s` by placeholders; true when there was one.
bool replace_guarded(std::string& s, const Matcher& m, const std::string& nonce) {
  std::string out;
  bool changed = false;
  for (size_t i = 0; i < s.size();) {
    const long g = m.match(s, i);
    if (g < 0) {
      if (changed) out += s[i];
      ++i;
      continue;
    }
    if (!changed) out.assign(s, 0, i);
    changed = true;
    out += fmt::format("{}{}.{}{}", kMark, nonce, g, kMark);
    i += m.texts[size_t(g)].size();
  }
  if (changed) s = std::move(out);
  return changed;
}

// A render with placeholders, cut into the template's text and the placeholders in it.
struct Piece {
  std::string text;    // template text (placeholder < 0)
  long placeholder = -1;  // index of the guarded text
};

std::vector<Piece> split_placeholders(const std::string& rendered, size_t n_texts,
                                      const std::string& nonce) {
  std::vector<Piece> pieces(1);
  const std::string prefix = fmt::format("{}{}.", kMark, nonce);
  size_t at = 0;
  while (true) {
    const size_t hit = rendered.find(prefix, at);
    if (hit == std::string::npos) break;
    const size_t digits = hit + prefix.size();
    size_t end = digits;
    while (end < rendered.size() && rendered[end] >= '0' && rendered[end] <= '9') ++end;
    size_t index = n_texts;
    if (end > digits && end - digits < 10 && end < rendered.size() && rendered[end] == kMark)
      index = std::stoul(rendered.substr(digits, end - digits));
    pieces.back().text.append(rendered, at, hit - at);
    if (index >= n_texts) {  // a placeholder the template cut: its bytes stay template text
      pieces.back().text.append(prefix);
      at = digits;
      continue;
    }
    pieces.push_back({"", long(index)});
    pieces.push_back({});
    at = end + 1;
  }
  pieces.back().text.append(rendered, at, std::string::npos);
  return pieces;
}

// The placeholders swapped back for their texts, each text's range recorded.
GuardedPrompt restore(const std::vector<Piece>& pieces, const std::vector<std::string>& texts) {
  GuardedPrompt p;
  for (const Piece& piece : pieces) {
    if (piece.placeholder < 0) {
      p.text += piece.text;
      continue;
    }
    const std::string& t = texts[size_t(piece.placeholder)];
    p.literal_spans.emplace_back(p.text.size(), p.text.size() + t.size());
    p.text += t;
  }
  return p;
}

// The template changed a guarded text (upper, escape, replace): the placeholder came through
// unchanged, so the restored text differs from the true render `plain`. Finds the template's
// text of `pieces` in `plain`, in order, and marks what lies between as request text. Empty
// when it does not line up.
std::optional<GuardedPrompt> align(const std::string& plain, const std::vector<Piece>& pieces) {
  GuardedPrompt p{plain, {}};
  size_t at = 0;
  bool open = false;  // placeholders seen since the last template text: their bytes start at `at`
  size_t span_begin = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    if (piece.placeholder >= 0) {
      if (!open) span_begin = at;
      open = true;
      continue;
    }
    if (piece.text.empty() && i + 1 < pieces.size()) continue;  // between two placeholders
    size_t found = at;
    if (open) {
      found = i + 1 == pieces.size() ? plain.size() - std::min(plain.size() - at, piece.text.size())
                                     : plain.find(piece.text, at);
      if (found == std::string::npos || found < at) return std::nullopt;
      if (found > span_begin) p.literal_spans.emplace_back(span_begin, found);
      open = false;
    }
    if (plain.compare(found, piece.text.size(), piece.text) != 0) return std::nullopt;
    at = found + piece.text.size();
  }
  if (at != plain.size()) return std::nullopt;
  return p;
}

}  // namespace

void append_request_text(GuardedPrompt& prompt, const std::string& text,
                         const std::vector<std::string>& guarded) {
  const Matcher matcher(guarded);
  const size_t base = prompt.text.size();
  prompt.text += text;
  for (size_t i = 0; i < text.size();) {
    const long g = matcher.match(text, i);
    if (g < 0) {
      ++i;
      continue;
    }
    const size_t n = guarded[size_t(g)].size();
    prompt.literal_spans.emplace_back(base + i, base + i + n);
    i += n;
  }
}

GuardedPrompt render_guarded(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                             const ChatRenderOptions& options,
                             const std::vector<std::string>& guarded) {
  const Matcher matcher(guarded);
  Json guarded_messages = messages;
  ChatRenderOptions guarded_options = options;
  const std::string nonce =
      pick_nonce(guarded_messages, guarded_options.extra_globals, tmpl.source());
  bool changed = false;
  auto swap = [&](std::string& s) { changed |= replace_guarded(s, matcher, nonce); };
  for_each_string(guarded_messages, swap);
  for_each_string(guarded_options.extra_globals, swap);
  if (!changed) return {tmpl.render(messages, options), {}};  // nothing to guard: one render
  const std::vector<Piece> pieces =
      split_placeholders(tmpl.render(guarded_messages, guarded_options), guarded.size(), nonce);
  GuardedPrompt restored = restore(pieces, guarded);
  // The template passed the request's specials through as they were (the usual case): done.
  const std::string plain = tmpl.render(messages, options);
  if (restored.text == plain) return restored;
  if (auto aligned = align(plain, pieces)) return *aligned;
  // It transformed them and the render does not line up: the restored text keeps the request's
  // specials as text, at the price of differing from the template's own render there.
  return restored;
}

}  // namespace jitllm::chat
