// UTF-8 and Unicode helpers for the tokenizers: byte-exact UTF-8 walking the way llama.cpp does
// it (invalid bytes become U+FFFD one byte at a time), GPT-2's byte <-> printable-codepoint map,
// and the few character properties WordPiece needs. Character categories come from PCRE2's
// Unicode tables and case/decomposition data from ICU: no hand-written Unicode tables here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm::unicode {

constexpr uint32_t kReplacement = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces (1 for continuation/invalid bytes), as in
// llama.cpp's unicode_len_utf8: symbols are grouped by this without validating the tail.
inline size_t utf8_seq_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Decodes one codepoint at `offset`, advancing it. Invalid or truncated sequences, surrogates and
// values above U+10FFFF yield U+FFFD and advance by one byte.
uint32_t decode_one(std::string_view text, size_t& offset);
std::vector<uint32_t> decode(std::string_view text);
void append_utf8(std::string& out, uint32_t cpt);
std::string encode(uint32_t cpt);
// `text` with every invalid byte replaced by U+FFFD (so PCRE2 in UTF mode accepts it).
std::string sanitize(std::string_view text);
// Number of bytes at the end of `bytes` that form an incomplete (but so far valid) UTF-8
// sequence; a streaming decoder holds these back until the rest arrives.
size_t incomplete_utf8_tail(std::string_view bytes);

// GPT-2 byte-level mapping: each byte <-> one printable codepoint (as UTF-8).
const std::string& byte_to_unicode(uint8_t byte);
// Inverse; returns -1 when `cpt` is not an image of a byte.
int unicode_to_byte(uint32_t cpt);

// Properties used by WordPiece pre-processing (llama.cpp's unicode flags).
struct CodepointFlags {
  bool whitespace = false;
  bool control = false;      // general category C* (except unassigned)
  bool punctuation = false;  // P*
  bool symbol = false;       // S*
  bool accent_mark = false;  // M*
  bool letter = false;       // L*
  bool number = false;       // N*
};
CodepointFlags flags(uint32_t cpt);
// Simple lowercase mapping (one codepoint to one codepoint).
uint32_t to_lower(uint32_t cpt);
// First codepoint of the canonical (NFD) decomposition of `cpt`, or `cpt` itself: llama.cpp's
// WordPiece "NFD" keeps only the base character, which drops accents.
uint32_t nfd_first(uint32_t cpt);

}  // namespace jitllm::unicode
