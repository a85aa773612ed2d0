// Code point ranges as UTF-8 byte sequences: a character class of a grammar becomes the byte
// ranges its valid encodings take (grammar.h matches bytes). Surrogates (U+D800..U+DFFF) are
// left out: they have no valid UTF-8 encoding.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "constrain/grammar.h"

namespace jitllm::constrain {

using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive [lo, hi]

// Sorted, merged and clipped to [0, 0x10FFFF] (the input may overlap and come in any order).
CodePointRanges normalize_ranges(CodePointRanges ranges);
// Every code point not in `ranges` (any order).
CodePointRanges complement_ranges(const CodePointRanges& ranges);

// Byte-set sequences matching exactly the UTF-8 encodings of `ranges`: one sequence per run of
// encodings that is a product of byte ranges. Single-byte (ASCII) ranges come merged in one
// sequence of length 1 first.
std::vector<std::vector<ByteSet>> utf8_sequences(const CodePointRanges& ranges);

// Appends the UTF-8 encoding of `cp` (must be a valid scalar value) to `out`.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace jitllm::constrain
