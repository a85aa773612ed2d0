// UTF-8 walking, GPT-2 byte map and WordPiece character properties (see unicode.h).
#include "tokenizer/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <array>
#include <mutex>

#include "core/error.h"

namespace jitllm::unicode {

uint32_t decode_one(std::string_view text, size_t& offset) {
  const auto byte = [&](size_t i) { return uint8_t(text[offset + i]); };
  const size_t left = text.size() - offset;
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) {
    offset += 1;
    return b0;
  }
  size_t n = 0;
  uint32_t cpt = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cpt = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cpt = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cpt = b0 & 0x07;
  }
  bool ok = n != 0 && n <= left;
  for (size_t i = 1; ok && i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) ok = false;
    cpt = (cpt << 6) | (byte(i) & 0x3F);
  }
  // Overlong forms and surrogates are rejected so the re-encoded text is valid UTF-8 (PCRE2
  // requires it); llama.cpp would decode them to the same codepoints it cannot re-encode.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (ok && (cpt < kMin[n] || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF))) ok = false;
  if (!ok) {
    offset += 1;
    return kReplacement;
  }
  offset += n;
  return cpt;
}

std::vector<uint32_t> decode(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) out.push_back(decode_one(text, offset));
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out += char(cpt);
  } else if (cpt < 0x800) {
    out += char(0xC0 | (cpt >> 6));
    out += char(0x80 | (cpt & 0x3F));
  } else if (cpt < 0x10000) {
    out += char(0xE0 | (cpt >> 12));
    out += char(0x80 | ((cpt >> 6) & 0x3F));
    out += char(0x80 | (cpt & 0x3F));
  } else {
    out += char(0xF0 | (cpt >> 18));
    out += char(0x80 | ((cpt >> 12) & 0x3F));
    out += char(0x80 | ((cpt >> 6) & 0x3F));
    out += char(0x80 | (cpt & 0x3F));
  }
}

std::string encode(uint32_t cpt) {
  std::string out;
  append_utf8(out, cpt);
  return out;
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t start = offset;
    const uint32_t cpt = decode_one(text, offset);
    if (cpt == kReplacement && offset - start == 1)
      append_utf8(out, cpt);
    else
      out.append(text.substr(start, offset - start));
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view bytes) {
  // Look back at most 3 bytes for a lead byte whose sequence is not finished yet.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = uint8_t(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    const size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 324> from_unicode{};  // images are < 256 + 68
  ByteMap() {
    from_unicode.fill(-1);
    // Printable bytes map to themselves; the other 68 take codepoints 256, 257, ... in order.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const int cpt = printable ? b : next++;
      to_unicode[b] = encode(uint32_t(cpt));
      from_unicode[cpt] = int16_t(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

// One anchored PCRE2 pattern whose capture groups classify a single codepoint.
class Classifier {
 public:
  Classifier() {
    const char* pattern = R"((\s)|(\p{Cc}|\p{Cf}|\p{Co}|\p{Cs})|(\p{P})|(\p{S})|(\p{M})|(\p{L})|(\p{N}))";
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &err_off, nullptr);
    if (!code_) throw_error("unicode: cannot compile the character-class pattern (error {})", err);
  }
  ~Classifier() { pcre2_code_free(code_); }
  CodepointFlags classify(uint32_t cpt) const {
    CodepointFlags f;
    if (cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return f;
    const std::string s = encode(cpt);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md,
                               nullptr);
    if (rc > 1) {
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      auto group = [&](int g) { return g < rc && ov[2 * g] != PCRE2_UNSET; };
      f.whitespace = group(1);
      f.control = group(2);
      f.punctuation = group(3);
      f.symbol = group(4);
      f.accent_mark = group(5);
      f.letter = group(6);
      f.number = group(7);
    }
    pcre2_match_data_free(md);
    return f;
  }

 private:
  pcre2_code* code_ = nullptr;
};

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

int unicode_to_byte(uint32_t cpt) {
  return cpt < byte_map().from_unicode.size() ? byte_map().from_unicode[cpt] : -1;
}

CodepointFlags flags(uint32_t cpt) {
  static const Classifier classifier;
  static const auto ascii = [] {
    std::array<CodepointFlags, 128> table;
    for (uint32_t c = 0; c < 128; ++c) table[c] = classifier.classify(c);
    return table;
  }();
  return cpt < 128 ? ascii[cpt] : classifier.classify(cpt);
}

uint32_t to_lower(uint32_t cpt) { return uint32_t(u_tolower(UChar32(cpt))); }

uint32_t nfd_first(uint32_t cpt) {
  static const icu::Normalizer2* nfd = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(status);
    if (U_FAILURE(status)) throw_error("unicode: ICU NFD normalizer unavailable");
    return n;
  }();
  icu::UnicodeString decomposition;
  if (!nfd->getDecomposition(UChar32(cpt), decomposition) || decomposition.isEmpty()) return cpt;
  return uint32_t(decomposition.char32At(0));
}

}  // namespace jitllm::unicode
