// libFuzzer target for the grammar engine (src/constrain): a client's `grammar` (GBNF) or
// `response_format` JSON Schema (its `pattern` regexes included) is untrusted text. The first byte
// picks the input's kind, the rest is the text:
//   bit 0 clear: GBNF; bit 0 set: a JSON Schema (JSON text), converted to GBNF.
// What parses is matched against a small vocabulary: the start state's mask, then the bytes of the
// input's tail fed one token at a time, each state's mask taken. Any outcome other than a result
// or a jitllm::Error (a crash, a sanitizer report, another exception type) is a finding.
// Seeds: fuzz/corpus/grammar.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "core/error.h"

namespace {

// Tokens that straddle terminals, multi-byte UTF-8 pieces, a byte-fallback half, a control token
// (empty) and the end token.
std::shared_ptr<const jitllm::constrain::Vocabulary> vocabulary() {
  static const auto v = std::make_shared<const jitllm::constrain::Vocabulary>(
      std::vector<std::string>{"a", "ab", "{\"", "\":", "\"", "}", "[", "]", ",", " ", "0", "12",
                               "-", ".", "e", "true", "null", "\xE2\x96", "\x81", "\xC3\xA9",
                               "\n", "x", "", "</s>"},
      std::vector<int32_t>{23});
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool schema = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    std::string gbnf;
    if (schema) {
      const auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return 0;
      gbnf = jitllm::constrain::json_schema_to_gbnf(j);
    } else {
      gbnf = std::string(text);
    }
    jitllm::constrain::Matcher m(jitllm::constrain::parse_gbnf(gbnf), vocabulary());
    jitllm::constrain::Matcher::State s = m.start();
    (void)m.mask(s);
    // Walk with tokens chosen by the input's bytes: each picks the next allowed token.
    const size_t tokens = vocabulary()->size();
    for (size_t i = 1; i < size && s != jitllm::constrain::Matcher::kDead; ++i) {
      const int32_t t = int32_t(data[i] % tokens);
      if (!m.allows(s, t)) continue;
      s = m.advance(s, t);
      if (s != jitllm::constrain::Matcher::kDead) {
        (void)m.mask(s);
        (void)m.accepting(s);
      }
    }
  } catch (const jitllm::Error&) {
    // refused with a message: the expected outcome for bad grammars and schemas
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_grammar: unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
