// SentencePiece-style BPE by scores (llama.cpp's llm_tokenizer_spm). The merge order and the
// staleness test (by sizes) are kept exactly, because they decide the ids on ties. Only pairs whose
// text is a vocab entry are ever merged, so a final symbol is either a token or one character that
// is not: the latter falls back to byte tokens (llama.cpp's resegment path never finds a recorded
// merge for such a character, so it is not kept here).
//
// Speed without changing a single id: llama.cpp runs one priority queue over the whole fragment
// (a 1 MB fragment is a million-entry heap that misses cache on every pop). A merge only ever
// joins neighbours into a vocab entry, so when no vocab entry holds a "\u2581" right after another
// character (Vocab::spm_words_independent, checked once per vocab), no merge can cross a word
// start and each word ("\u2581..." runs, cut before a "\u2581" that follows a non-"\u2581") gives
// the same ids alone as inside the fragment. Words are then tokenized one by one with reused
// buffers, and a word seen before in the same call copies its earlier ids.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, the escaped space

// Bytes of the symbol at `offs`: one UTF-8 character by its lead byte, unvalidated, cut at the
// end of the text (as llama.cpp groups them).
size_t symbol_len(std::string_view text, size_t offs) {
  return std::min(unicode::utf8_seq_len(uint8_t(text[offs])), text.size() - offs);
}

bool is_space_symbol(std::string_view text, size_t offs, size_t len) {
  return len == 3 && text.compare(offs, 3, kSpace) == 0;
}

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

// Heap order: highest score first; on equal scores the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  // One span (a whole fragment, or one word of it) -> ids appended to `out`.
  void tokenize(std::string_view text, std::vector<TokenId>& out) {
    symbols_.clear();
    heap_.clear();
    for (size_t offs = 0; offs < text.size();) {
      const size_t len = symbol_len(text, offs);
      const int index = int(symbols_.size());
      symbols_.push_back({index - 1, offs + len == text.size() ? -1 : index + 1, text.data() + offs, len});
      offs += len;
    }
    for (int i = 1; i < int(symbols_.size()); ++i) try_add_bigram(i - 1, i);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), BigramLess{});
      const Bigram b = heap_.back();
      heap_.pop_back();
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
    heap_.push_back({left, right, vocab_.tokens[size_t(id)].score, text.size()});
    std::push_heap(heap_.begin(), heap_.end(), BigramLess{});
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
  std::vector<Bigram> heap_;  // binary heap by BigramLess
};

}  // namespace

bool spm_has_inner_word_start(std::string_view text) {
  bool prev_space = true;  // a "\u2581" at the very start is no word start inside the token
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = symbol_len(text, offs);
    const bool space = is_space_symbol(text, offs, len);
    if (space && !prev_space) return true;
    prev_space = space;
    offs += len;
  }
  return false;
}

void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  SpmSession session(vocab);
  if (!vocab.spm_words_independent) {
    session.tokenize(text, out);
    return;
  }
  // word text -> where its ids already are in `out` ([begin, begin + count)).
  struct Span {
    size_t begin, count;
  };
  std::unordered_map<std::string_view, Span> seen;
  auto emit = [&](std::string_view word) {
    auto [it, inserted] = seen.try_emplace(word, Span{out.size(), 0});
    if (!inserted) {
      const Span span = it->second;
      for (size_t i = 0; i < span.count; ++i) {
        const TokenId id = out[span.begin + i];  // copy first: push_back may reallocate
        out.push_back(id);
      }
      return;
    }
    session.tokenize(word, out);
    it->second.count = out.size() - it->second.begin;
  };
  size_t word_begin = 0;
  bool prev_space = true;
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = symbol_len(text, offs);
    const bool space = is_space_symbol(text, offs, len);
    if (space && !prev_space) {
      emit(text.substr(word_begin, offs - word_begin));
      word_begin = offs;
    }
    prev_space = space;
    offs += len;
  }
  if (word_begin < text.size()) emit(text.substr(word_begin));
}

}  // namespace jitllm
