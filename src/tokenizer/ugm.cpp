// Unigram tokenizer as llama.cpp's llm_tokenizer_ugm runs it (SentencePiece's optimized Viterbi):
// normalize with the precompiled charsmap (longest-prefix replacement through an XOR-compressed
// double array, user-defined pieces kept verbatim, spaces escaped/merged/prefixed as the vocab
// says), then for every codepoint offset try every vocab piece starting there (trie walk) and keep
// the best score reaching each end offset; backtrack from the end.
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <string>

#include "core/error.h"
#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

// Byte trie over token texts.
class Trie {
 public:
  Trie() : nodes_(1) {}
  void insert(std::string_view key, TokenId value) {
    int32_t node = 0;
    for (char c : key) {
      const int32_t next = child(node, uint8_t(c));
      if (next >= 0) {
        node = next;
      } else {
        nodes_.push_back({});
        nodes_[size_t(node)].children.push_back({uint8_t(c), int32_t(nodes_.size() - 1)});
        node = int32_t(nodes_.size() - 1);
      }
    }
    nodes_[size_t(node)].value = value;  // a later duplicate text wins, as in llama.cpp's trie
  }
  int32_t child(int32_t node, uint8_t c) const {
    for (const auto& [byte, next] : nodes_[size_t(node)].children)
      if (byte == c) return next;
    return -1;
  }
  TokenId value(int32_t node) const { return nodes_[size_t(node)].value; }
  // Length of the longest key that is a prefix of `text` (0 when none).
  size_t longest_prefix(std::string_view text) const {
    int32_t node = 0;
    size_t best = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      node = child(node, uint8_t(text[i]));
      if (node < 0) break;
      if (nodes_[size_t(node)].value != kNoToken) best = i + 1;
    }
    return best;
  }
  // llama.cpp's user-defined matcher returns the longest path walked, whether or not a key ends
  // there (its naive_trie::get_longest_prefix); kept for identical normalization.
  size_t longest_path(std::string_view text) const {
    int32_t node = 0;
    size_t n = 0;
    for (; n < text.size(); ++n) {
      node = child(node, uint8_t(text[n]));
      if (node < 0) break;
    }
    return n;
  }

 private:
  struct Node {
    TokenId value = kNoToken;
    std::vector<std::pair<uint8_t, int32_t>> children;
  };
  std::vector<Node> nodes_;
};

}  // namespace

struct UgmModel {
  Trie tokens;        // normal, user-defined and unused pieces
  Trie user_defined;  // matched verbatim by the normalizer
  float unknown_score = 0.0f;
  // Charsmap: [u32 xcda_bytes][xcda: u32 entries][NUL-terminated replacement strings].
  std::vector<uint32_t> xcda;
  std::string replacements;
};

std::shared_ptr<const UgmModel> make_ugm_model(const Vocab& vocab) {
  auto m = std::make_shared<UgmModel>();
  const std::string& map = vocab.precompiled_charsmap;
  if (!map.empty()) {
    if (map.size() < 4) throw_error("tokenizer.ggml.precompiled_charsmap: {} bytes is too short", map.size());
    uint32_t xcda_bytes = 0;
    std::memcpy(&xcda_bytes, map.data(), 4);
    if (size_t(xcda_bytes) + 4 >= map.size() || xcda_bytes % 4 != 0)
      throw_error("tokenizer.ggml.precompiled_charsmap: XCDA size {} does not fit in {} bytes",
                  xcda_bytes, map.size());
    m->xcda.resize(xcda_bytes / 4);
    std::memcpy(m->xcda.data(), map.data() + 4, xcda_bytes);
    m->replacements = map.substr(4 + size_t(xcda_bytes));
  }
  float min_score = FLT_MAX;
  for (size_t id = 0; id < vocab.size(); ++id) {
    const TokenData& t = vocab.tokens[id];
    if (t.attr & kAttrNormal) min_score = std::min(min_score, t.score);
    if (t.attr & (kAttrNormal | kAttrUserDefined | kAttrUnused)) m->tokens.insert(t.text, TokenId(id));
    if (t.attr & kAttrUserDefined) m->user_defined.insert(t.text, TokenId(id));
  }
  m->unknown_score = min_score - 10.0f;
  return m;
}

namespace {

// Checked reads of the packed XCDA nodes: BASE bits 10-30 (shifted by bit 9), LCHECK bits 0-7
// (+ bit 31), LEAF bit 8, VALUE bits 0-30.
struct Xcda {
  const std::vector<uint32_t>& a;
  uint32_t node(size_t i) const {
    if (i >= a.size()) throw_error("precompiled charsmap: XCDA index {} out of {} entries", i, a.size());
    return a[i];
  }
  uint32_t base(size_t i) const { const uint32_t n = node(i); return (n >> 10) << ((n & (1u << 9)) >> 6); }
  uint32_t lcheck(size_t i) const { return node(i) & ((1u << 31) | 0xFF); }
  bool leaf(size_t i) const { return (node(i) >> 8) & 1; }
  uint32_t value(size_t i) const { return node(i) & ((1u << 31) - 1); }
};

// Normalized form of the input prefix at `offset`: (replacement bytes, input bytes consumed).
std::pair<std::string_view, size_t> normalize_prefix(const UgmModel& m, std::string_view input,
                                                     size_t offset) {
  const std::string_view rest = input.substr(offset);
  if (const size_t n = m.user_defined.longest_path(rest); n > 0) return {rest.substr(0, n), n};
  size_t match_len = 0, match_value = 0;
  if (!m.xcda.empty()) {
    const Xcda x{m.xcda};
    uint32_t node = x.base(0);
    for (size_t i = 0; i < rest.size(); ++i) {
      const uint8_t c = uint8_t(rest[i]);
      if (c == 0) break;
      node ^= c;
      if (x.lcheck(node) != c) break;
      const bool leaf = x.leaf(node);
      node ^= x.base(node);
      if (leaf) {
        match_len = i + 1;
        match_value = x.value(node);
      }
    }
  }
  if (match_len > 0) {
    if (match_value >= m.replacements.size())
      throw_error("precompiled charsmap: replacement offset {} out of {} bytes", match_value,
                  m.replacements.size());
    const size_t end = m.replacements.find('\0', match_value);
    if (end == std::string::npos) throw_error("precompiled charsmap: unterminated replacement");
    return {std::string_view(m.replacements).substr(match_value, end - match_value), match_len};
  }
  size_t next = 0;
  const uint32_t cpt = unicode::decode_one(rest, next);
  if (cpt == unicode::kReplacement && next == 1) return {"\xEF\xBF\xBD", 1};
  return {rest.substr(0, next), next};
}

std::string normalize(const Vocab& v, const UgmModel& m, std::string_view input) {
  std::string out;
  out.reserve(input.size() * 3);
  const std::string_view space = v.escape_whitespaces ? "\xE2\x96\x81" : " ";
  const bool prepend = v.add_space_prefix, merge = v.remove_extra_whitespaces;
  bool prepended = false, in_word = false;
  for (size_t offset = 0; offset < input.size();) {
    const auto [norm, consumed] = normalize_prefix(m, input, offset);
    for (char c : norm) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend && !prepended) || merge) {
            out += space;
            prepended = true;
          }
        }
        out += c;
      } else {
        in_word = false;
        if (!merge) out += space;
      }
    }
    offset += consumed;
  }
  return out;
}

struct Best {
  TokenId id;
  size_t from;  // input offset where the token starts
  double score;
};

}  // namespace

void ugm_tokenize(const Vocab& vocab, const UgmModel& m, std::string_view text,
                  std::vector<TokenId>& out) {
  const std::string s = normalize(vocab, m, text);
  const size_t n = s.size();
  if (n == 0) return;
  std::vector<Best> best(n + 1, Best{vocab.unk, 0, -DBL_MAX});  // [n + 1]
  best[0] = {vocab.unk, 0, 0.0};
  for (size_t offset = 0; offset < n;) {
    const size_t cp_len = std::min(unicode::utf8_seq_len(uint8_t(s[offset])), n - offset);
    const double base = best[offset].score;
    bool whole_cp = false;
    int32_t node = 0;
    for (size_t end = offset; end < n;) {
      node = m.tokens.child(node, uint8_t(s[end++]));
      if (node < 0) break;
      const TokenId id = m.tokens.value(node);
      if (id == kNoToken) continue;
      if (end - offset == cp_len) whole_cp = true;
      const TokenData& t = vocab.tokens[size_t(id)];
      // Scores in double, user-defined pieces at 0, as SentencePiece/HF do.
      const double score = base + ((t.attr & kAttrUserDefined) ? 0.0 : double(t.score));
      if (score > best[end].score) best[end] = {id, offset, score};
    }
    if (!whole_cp) {
      const double score = base + double(m.unknown_score);
      Best& b = best[offset + cp_len];
      if (score > b.score) b = {vocab.unk, offset, score};
    }
    offset += cp_len;
  }
  // Backtrack; runs of unknowns collapse into one.
  const size_t first = out.size();
  bool prev_unknown = false;
  for (size_t at = n;;) {
    const Best& b = best[at];
    const bool unknown = b.id == vocab.unk;
    if (!(prev_unknown && unknown) && b.id != kNoToken) out.push_back(b.id);
    if (b.from == 0) break;
    prev_unknown = unknown;
    at = b.from;
  }
  std::reverse(out.begin() + std::ptrdiff_t(first), out.end());
}

}  // namespace jitllm
