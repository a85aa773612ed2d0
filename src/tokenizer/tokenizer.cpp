// Tokenizer: special-token partitioning, dispatch to the model's algorithm, pieces and
// detokenization (see tokenizer.h). Mirrors llama.cpp's llama_vocab::impl::tokenize,
// token_to_piece and detokenize.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.h"
#include "tokenizer/algorithms.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// A piece of the input after special tokens are cut out: either a token or a span of text.
struct Fragment {
  TokenId token = kNoToken;  // kNoToken for text
  size_t offset = 0;
  size_t length = 0;
};

// True when [at, at + n) overlaps one of the sorted, disjoint `spans`.
bool overlaps(std::span<const std::pair<size_t, size_t>> spans, size_t at, size_t n) {
  auto it = std::upper_bound(spans.begin(), spans.end(), at,
                             [](size_t v, const std::pair<size_t, size_t>& s) { return v < s.second; });
  return it != spans.end() && it->first < at + n;
}

// Cuts every occurrence of each special token's text out of the text fragments, tokens in
// `vocab.special_match_order` (longest first); LSTRIP/RSTRIP tokens eat adjacent ASCII spaces.
// A control/unknown token's match that overlaps a `literal` span stays text.
std::vector<Fragment> partition(const Vocab& vocab, std::string_view text, bool parse_special,
                                std::span<const std::pair<size_t, size_t>> literal = {}) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId special : vocab.special_match_order) {
    const TokenData& data = vocab.tokens[size_t(special)];
    if (!parse_special && (data.attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& needle = data.text;
    const bool guarded =
        !literal.empty() && (data.attr & (kAttrControl | kAttrUnknown | kAttrStructural));
    bool changed = false;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t base = f.offset, length = f.length, from = base;
      while (true) {
        const size_t match = text.substr(0, base + length).find(needle, from);
        if (match != std::string_view::npos && guarded && overlaps(literal, match, needle.size())) {
          from = match + 1;  // request text spelling this token: look further
          continue;
        }
        if (match == std::string_view::npos) {
          if (length > 0) next.push_back({kNoToken, base, length});
          break;
        }
        changed = true;
        size_t left_length = match - base;
        if (data.attr & kAttrLstrip)
          while (left_length > 0 && is_ascii_space(text[base + left_length - 1])) --left_length;
        if (left_length > 0) next.push_back({kNoToken, base, left_length});
        next.push_back({special, 0, 0});
        size_t right = match + needle.size();
        size_t right_length = base + length - right;
        if (data.attr & kAttrRstrip)
          while (right_length > 0 && is_ascii_space(text[right])) ++right, --right_length;
        base = right;
        from = right;
        length = right_length;
        if (length == 0) break;
      }
    }
    if (changed) fragments.swap(next);
  }
  return fragments;
}

}  // namespace

Tokenizer::Tokenizer(const Metadata& metadata) : vocab_(load_vocab(metadata)) {
  if (vocab_.type == VocabType::Bpe) {
    pre_ = std::make_unique<PreTokenizer>(pre_tokenizer_spec(vocab_.pre).regexes);
    // llama.cpp finds the BPE newline token by tokenizing "\n".
    std::vector<TokenId> ids;
    encode_fragment("\n", false, ids);
    vocab_.linefeed = ids.empty() ? vocab_.pad : ids[0];
  }
  if (vocab_.type == VocabType::Ugm) ugm_ = make_ugm_model(vocab_);
  piece_cache_.reserve(vocab_.size());
  for (size_t id = 0; id < vocab_.size(); ++id) piece_cache_.push_back(render_piece(TokenId(id)));
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::encode_fragment(std::string_view text, bool prev_special,
                                std::vector<TokenId>& out) const {
  switch (vocab_.type) {
    case VocabType::Spm: {
      // Spaces become U+2581; a fragment at the start or after a special token gets one more.
      std::string escaped;
      escaped.reserve(text.size() + 3);
      if (vocab_.add_space_prefix && prev_special) escaped += "\xE2\x96\x81";
      for (char c : text) {
        if (c == ' ') escaped += "\xE2\x96\x81";
        else escaped += c;
      }
      spm_tokenize(vocab_, escaped, out);
      break;
    }
    case VocabType::Bpe:
      // Invalid UTF-8 becomes U+FFFD, as llama.cpp's codepoint split does.
      bpe_tokenize(vocab_, *pre_, unicode::sanitize(text), out);
      break;
    case VocabType::Wpm:
      wpm_tokenize(vocab_, text, out);
      break;
    case VocabType::Ugm:
      ugm_tokenize(vocab_, *ugm_, text, out);
      break;
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return encode_impl(text, add_special, parse_special, {});
}

std::vector<TokenId> Tokenizer::encode_with_literals(
    std::string_view text, bool add_special,
    std::span<const std::pair<size_t, size_t>> literal_spans) const {
  for (size_t i = 0; i < literal_spans.size(); ++i) {
    const auto& [begin, end] = literal_spans[i];
    if (begin >= end || end > text.size() || (i > 0 && begin < literal_spans[i - 1].second))
      throw_error("tokenize: literal span {} [{}, {}) is not a sorted, disjoint range of the {} "
                  "bytes", i, begin, end, text.size());
  }
  return encode_impl(text, add_special, /*parse_special=*/true, literal_spans);
}

std::vector<TokenId> Tokenizer::encode_impl(std::string_view text, bool add_special,
                                            bool parse_special,
                                            std::span<const std::pair<size_t, size_t>> literal) const {
  if (text.size() > kMaxInputBytes)
    throw_error("tokenize: input of {} bytes is larger than the limit of {} bytes", text.size(),
                kMaxInputBytes);
  std::vector<TokenId> out;
  const std::vector<Fragment> fragments = partition(vocab_, text, parse_special, literal);
  const bool bos = add_special && vocab_.add_bos && vocab_.bos != kNoToken;
  if (vocab_.type == VocabType::Wpm) {
    if (add_special && vocab_.bos != kNoToken) out.push_back(vocab_.bos);
  } else if (bos) {
    out.push_back(vocab_.bos);
  }
  bool prev_special = true;  // SPM: the first fragment gets the leading space
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
    } else {
      encode_fragment(text.substr(f.offset, f.length), prev_special, out);
      prev_special = false;
    }
  }
  if (vocab_.type == VocabType::Wpm) {
    if (add_special && vocab_.sep != kNoToken) out.push_back(vocab_.sep);
  } else if (add_special && vocab_.add_eos && vocab_.eos != kNoToken) {
    out.push_back(vocab_.eos);
  }
  return out;
}

std::vector<std::string> Tokenizer::parse_special_texts() const {
  std::vector<std::string> out;
  for (TokenId special : vocab_.special_match_order) {
    const TokenData& data = vocab_.tokens[size_t(special)];
    if (data.attr & (kAttrControl | kAttrUnknown | kAttrStructural)) out.push_back(data.text);
  }
  return out;
}

const std::string& Tokenizer::piece(TokenId id) const {
  if (id < 0 || size_t(id) >= piece_cache_.size())
    throw_error("token id {} is out of range (vocabulary has {} tokens)", id, piece_cache_.size());
  return piece_cache_[size_t(id)];
}

std::string Tokenizer::piece(TokenId id, bool special) const {
  const TokenData& data = vocab_.at(id);
  if (!special && (data.attr & (kAttrUnknown | kAttrControl))) return {};
  return piece_cache_[size_t(id)];
}

std::string Tokenizer::render_piece(TokenId id) const {
  const TokenData& data = vocab_.tokens[size_t(id)];
  const uint32_t attr = data.attr;
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return data.text;
  switch (vocab_.type) {
    case VocabType::Spm:
    case VocabType::Wpm:
    case VocabType::Ugm:
      if (attr & kAttrNormal) {
        std::string out;
        for (size_t i = 0; i < data.text.size(); ++i) {
          if (data.text.compare(i, 3, "\xE2\x96\x81") == 0) {
            out += ' ';
            i += 2;
          } else {
            out += data.text[i];
          }
        }
        return out;
      }
      if ((attr & kAttrByte) && data.text.size() >= 6) {
        // "<0xXX>"
        return std::string(1, char(std::strtol(data.text.substr(3, 2).c_str(), nullptr, 16)));
      }
      return {};
    case VocabType::Bpe:
      if (attr & kAttrNormal) {
        // Undo the GPT-2 byte mapping; a codepoint that is no byte's image is shown as llama.cpp
        // does ("[UNK_BYTE_0x..." + token text + "]").
        std::string out;
        for (size_t offset = 0; offset < data.text.size();) {
          const size_t start = offset;
          const uint32_t cpt = unicode::decode_one(data.text, offset);
          const int byte = unicode::unicode_to_byte(cpt);
          if (byte >= 0) {
            out += char(byte);
          } else {
            out += "[UNK_BYTE_0x";
            for (size_t i = start; i < offset; ++i) out += fmt::format("{:02x}", uint8_t(data.text[i]));
            out += data.text + "]";
          }
        }
        return out;
      }
      return {};
  }
  return {};
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool remove_special,
                              bool unparse_special) const {
  size_t begin = 0, end = ids.size();
  bool remove_space = vocab_.add_space_prefix;
  if (remove_special && vocab_.add_bos && end > begin && ids[begin] == vocab_.bos) {
    remove_space = false;
    ++begin;
  }
  if (remove_special && vocab_.add_eos && end > begin && ids[end - 1] == vocab_.eos) --end;
  std::string text;
  for (size_t i = begin; i < end; ++i) {
    const TokenData& data = vocab_.at(ids[i]);
    if (!unparse_special && (data.attr & (kAttrUnknown | kAttrControl))) {
      remove_space = false;
      continue;
    }
    std::string_view p = piece(ids[i]);
    if (remove_space && !p.empty() && p.front() == ' ') p.remove_prefix(1);
    remove_space = false;
    text += p;
  }
  if (!vocab_.clean_spaces || text.empty()) return text;

  // HF's clean_up_tokenization_spaces, as llama.cpp does it: three in-place passes over the
  // buffer (a pass reads what the previous one left, including the NUL pass 2 writes).
  std::string& t = text;
  size_t total = t.size();
  const size_t total1 = total;  // pass 1: " ?" " !" " ." " ," lose the space
  total = 1;
  for (size_t i = 1; i < total1; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  }
  const size_t total2 = total;  // pass 2: " ' " -> "'"
  total = 1;
  for (size_t i = 1; i < total2; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < total2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  const size_t total3 = total;  // pass 3: " 's" " 'm" " 're" " 've" lose the space
  total = 1;
  for (size_t i = 1; i < total3; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < total3) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    t[total++] = x;
  }
  t.resize(total);
  return text;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool unparse_special)
    : tokenizer_(tokenizer), unparse_special_(unparse_special) {}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, std::vector<TokenId> rendered)
    : tokenizer_(tokenizer), unparse_special_(false), rendered_(std::move(rendered)) {}

std::string StreamDecoder::push(TokenId id) {
  const bool special = unparse_special_ ||
                       std::find(rendered_.begin(), rendered_.end(), id) != rendered_.end();
  std::string p = tokenizer_.piece(id, special);
  if (first_ && !p.empty()) {
    if (tokenizer_.vocab().add_space_prefix && p.front() == ' ') p.erase(0, 1);
  }
  if (first_ && !(id == tokenizer_.vocab().bos && p.empty())) first_ = false;
  pending_ += p;
  const size_t hold = unicode::incomplete_utf8_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  if (!pending_.empty()) out = unicode::encode(unicode::kReplacement);
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace jitllm
