// UTF-8 byte ranges of code point ranges (see utf8_ranges.h).
#include "constrain/utf8_ranges.h"

#include <algorithm>
#include <string>

namespace jitllm::constrain {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

int encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = uint8_t(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = uint8_t(0xC0 | (cp >> 6));
    out[1] = uint8_t(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = uint8_t(0xE0 | (cp >> 12));
    out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
    out[2] = uint8_t(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | (cp >> 18));
  out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
  out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
  out[3] = uint8_t(0x80 | (cp & 0x3F));
  return 4;
}

// [lo, hi] of one encoded length, split until each piece is a product of byte ranges: every
// continuation byte below the first that differs must span its whole 0x80..0xBF range.
void split_same_length(uint32_t lo, uint32_t hi, int length, std::vector<std::vector<ByteSet>>& out) {
  for (int i = 1; i < length; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, length, out);
        split_same_length((lo | m) + 1, hi, length, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, length, out);
        split_same_length(hi & ~m, hi, length, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ByteSet> seq(static_cast<size_t>(length));
  for (int i = 0; i < length; ++i) seq[size_t(i)].set_range(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

CodePointRanges normalize_ranges(CodePointRanges ranges) {
  CodePointRanges out;
  for (auto& [lo, hi] : ranges) hi = std::min(hi, kMaxCodePoint);
  std::sort(ranges.begin(), ranges.end());
  for (const auto& [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.emplace_back(lo, hi);
  }
  return out;
}

CodePointRanges complement_ranges(const CodePointRanges& ranges) {
  CodePointRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalize_ranges(ranges)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

std::vector<std::vector<ByteSet>> utf8_sequences(const CodePointRanges& input) {
  // Without the surrogates, then cut at the encoded-length boundaries.
  const CodePointRanges ranges = normalize_ranges(input);
  CodePointRanges valid;
  for (const auto& [lo, hi] : ranges) {
    if (hi < 0xD800 || lo > 0xDFFF) valid.emplace_back(lo, hi);
    else {
      if (lo < 0xD800) valid.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) valid.emplace_back(0xE000, hi);
    }
  }
  std::vector<std::vector<ByteSet>> out;
  ByteSet ascii;
  bool any_ascii = false;
  const uint32_t limits[4] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (const auto& [lo0, hi0] : valid) {
    uint32_t lo = lo0;
    for (int length = 1; length <= 4 && lo <= hi0; ++length) {
      if (lo > limits[length - 1]) continue;
      const uint32_t hi = std::min(hi0, limits[length - 1]);
      if (length == 1) {
        ascii.set_range(uint8_t(lo), uint8_t(hi));
        any_ascii = true;
      } else {
        split_same_length(lo, hi, length, out);
      }
      lo = hi + 1;
    }
  }
  if (any_ascii) out.insert(out.begin(), std::vector<ByteSet>{ascii});
  return out;
}

void append_utf8(uint32_t cp, std::string& out) {
  uint8_t b[4];
  const int n = encode(cp, b);
  out.append(reinterpret_cast<const char*>(b), size_t(n));
}

}  // namespace jitllm::constrain
