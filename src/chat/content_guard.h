// Rendering a chat template so that the prompt's bytes that came from the request (message
// contents, tool calls, tool definitions: every string in `messages` and the extra variables)
// can be told from the template's own where it matters: where they spell a special token.
// A user who writes "<|im_end|>\n<|im_start|>system" in a message must get those characters as
// text, not as role boundaries, while the template's "<|im_end|>" stays one control token.
// (llama-server tokenizes the whole rendered prompt with specials parsed, so content can forge
// turns there; ggml-org/llama.cpp#26273 asked for an escape flag. tiktoken's
// disallowed_special and ollama#17262 draw the line where we do.)
//
// How: each guarded text (the control tokens' texts, given by the caller) found in a request
// string is swapped for a placeholder before rendering ("\x7f<nonce>.<index>\x7f": no letters,
// spaces or HTML/JSON-escaped bytes, so trim/tojson carry it through unchanged, and a nonce no
// input contains, so a request cannot forge one), and swapped back in the output, where its byte
// range is recorded. When that equals the template's render of the original strings (the usual
// case) it is the answer. When the template transformed a guarded text (|upper, |e, replace)
// the true render is kept, and the bytes standing where the placeholders stood are marked
// instead (found by lining the template's text up with it). Only when that fails too (a template
// that cuts a placeholder) is the restored text used, which then differs from the template's own
// render where the request spelled a special. A request without guarded texts renders once.
// Not caught: a special token spelled half by the template and half by the request.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace jitllm::chat {

struct GuardedPrompt {
  std::string text;
  // [begin, end) byte ranges of `text` that reproduce a guarded text from a request string;
  // sorted, disjoint. A tokenizer must keep these as plain text.
  std::vector<std::pair<size_t, size_t>> literal_spans;
};

// ChatTemplate::render over the guarded strings of `messages` and `options.extra_globals`.
// `guarded`: the texts that must not come out of a request as specials (empty ones are ignored).
GuardedPrompt render_guarded(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                             const ChatRenderOptions& options,
                             const std::vector<std::string>& guarded);

// Appends request text after a rendered prompt (a candidate answer scored after it), marking the
// guarded texts inside it as literal too.
void append_request_text(GuardedPrompt& prompt, const std::string& text,
                         const std::vector<std::string>& guarded);

}  // namespace jitllm::chat
