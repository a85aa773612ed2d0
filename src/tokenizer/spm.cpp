// SentencePiece-style BPE by scores (llama.cpp's llm_tokenizer_spm). The merge order and the
// staleness test (by sizes) are kept exactly, because they decide the ids on ties. Only pairs whose
// text is a vocab entry are ever merged, so a final symbol is either a token or one character that
// is not: the latter falls back to byte tokens (llama.cpp's resegment path never finds a recorded
// merge for such a character, so it is not kept here).
#include <queue>
#include <string>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

struct Symbol {
  int prev;
  int next;
  const char* text;
  size_t n;  // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

// Highest score first; on equal scores the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  void tokenize(std::string_view text, std::vector<TokenId>& out) {
    // One symbol per UTF-8 character (by lead byte, unvalidated, like llama.cpp).
    for (size_t offs = 0; offs < text.size();) {
      const size_t len = std::min(unicode::utf8_seq_len(uint8_t(text[offs])), text.size() - offs);
      const int index = int(symbols_.size());
      symbols_.push_back({index - 1, offs + len == text.size() ? -1 : index + 1, text.data() + offs, len});
      offs += len;
    }
    for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[size_t(b.left)];
      Symbol& right = symbols_[size_t(b.right)];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[size_t(right.next)].prev = b.left;
      try_add_bigram(left.prev, b.left);
      try_add_bigram(b.left, left.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[size_t(i)].next) resegment(symbols_[size_t(i)], out);
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view text(symbols_[size_t(left)].text,
                                symbols_[size_t(left)].n + symbols_[size_t(right)].n);
    const TokenId id = vocab_.find(text);
    if (id == kNoToken) return;
    queue_.push({left, right, vocab_.tokens[size_t(id)].score, text.size()});
  }

  void resegment(const Symbol& symbol, std::vector<TokenId>& out) {
    const std::string_view text(symbol.text, symbol.n);
    const TokenId id = vocab_.find(text);
    if (id != kNoToken) {
      out.push_back(id);
      return;
    }
    // Its bytes as byte tokens (the unknown token when the vocab lacks one).
    for (char c : text) {
      const TokenId byte_id = vocab_.byte_token(uint8_t(c));
      if (byte_id != kNoToken) out.push_back(byte_id);
      else if (vocab_.unk != kNoToken) out.push_back(vocab_.unk);
    }
  }

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
};

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  SpmSession(vocab).tokenize(text, out);
}

}  // namespace jitllm
