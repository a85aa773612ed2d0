// Byte-level BPE (llama.cpp's llm_tokenizer_bpe): pre-tokenize, map bytes to GPT-2 codepoints,
// merge adjacent symbols by rank. The queue order (rank, then leftmost) and the staleness test
// (the pair's text changed) match llama.cpp, which decides the result when ranks collide.
#include <queue>
#include <string>

#include "tokenizer/algorithms.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the mapped word
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t left_n;   // sizes at push time: the pair is stale if either changed
  size_t right_n;
};

// Lowest rank first; on equal ranks the leftmost pair.
struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

class BpeWord {
 public:
  explicit BpeWord(const Vocab& vocab) : vocab_(vocab) {}

  void tokenize(const std::string& word, std::vector<TokenId>& out) {
    word_ = &word;
    symbols_.clear();
    queue_ = {};
    if (vocab_.ignore_merges) {
      const TokenId whole = vocab_.find(word);
      if (whole != kNoToken) {
        out.push_back(whole);
        return;
      }
    }
    for (size_t offs = 0; offs < word.size();) {
      const size_t len = std::min(unicode::utf8_seq_len(uint8_t(word[offs])), word.size() - offs);
      const int index = int(symbols_.size());
      symbols_.push_back({index - 1, offs + len == word.size() ? -1 : index + 1, offs, len});
      offs += len;
    }
    for (int i = 1; i < int(symbols_.size()); ++i) add_bigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[size_t(b.left)];
      Symbol& right = symbols_[size_t(b.right)];
      // A symbol only grows to the right and keeps its offset, so equal sizes and an unchanged
      // link mean the same text as when the pair was queued.
      if (left.n == 0 || right.n == 0 || left.n != b.left_n || right.n != b.right_n ||
          left.next != b.right)
        continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[size_t(right.next)].prev = b.left;
      add_bigram(left.prev, b.left);
      add_bigram(b.left, left.next);
    }
    for (const Symbol& s : symbols_) {
      if (s.n == 0) continue;
      const std::string_view text = std::string_view(word).substr(s.offset, s.n);
      const TokenId id = vocab_.find(text);
      if (id != kNoToken) {
        out.push_back(id);
        continue;
      }
      // Not in the vocab: llama.cpp emits whichever single bytes of it are tokens.
      for (char c : text) {
        const TokenId byte_id = vocab_.find(std::string_view(&c, 1));
        if (byte_id != kNoToken) out.push_back(byte_id);
      }
    }
  }

 private:
  void add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const Symbol& l = symbols_[size_t(left)];
    const Symbol& r = symbols_[size_t(right)];
    const std::string_view w(*word_);
    const int32_t rank = vocab_.merge_rank(w.substr(l.offset, l.n), w.substr(r.offset, r.n));
    if (rank < 0) return;
    queue_.push({left, right, rank, l.n, r.n});
  }

  const Vocab& vocab_;
  const std::string* word_ = nullptr;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue_;
};

}  // namespace

void bpe_tokenize(const Vocab& vocab, const PreTokenizer& pre, std::string_view text,
                  std::vector<TokenId>& out) {
  BpeWord session(vocab);
  std::string mapped;
  for (std::string_view piece : pre.split(text)) {
    mapped.clear();
    for (char c : piece) mapped += unicode::byte_to_unicode(uint8_t(c));
    session.tokenize(mapped, out);
  }
}

}  // namespace jitllm
