// Where a lazily applied grammar (tool_choice auto) switches on: at the first place the output
// shows `text`, or, for a trigger that only counts at the start (Llama 3's bare JSON call), only
// when nothing but whitespace comes before it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jitllm::server {

struct GrammarTrigger {
  std::string text;
  bool at_start = false;
};

// Where the first trigger that counts begins in `text` (searched from `from`), or npos.
// `blank_before`: everything before text[0] was whitespace.
inline size_t find_trigger(std::string_view text, size_t from, const std::vector<GrammarTrigger>& ts,
                           bool blank_before) {
  size_t best = std::string_view::npos;
  for (const GrammarTrigger& t : ts) {
    const size_t at = text.find(t.text, from);
    if (at == std::string_view::npos || at >= best) continue;
    if (t.at_start) {
      if (!blank_before) continue;
      if (text.substr(0, at).find_first_not_of(" \t\r\n") != std::string_view::npos) continue;
    }
    best = at;
  }
  return best;
}

}  // namespace jitllm::server
