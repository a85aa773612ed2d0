// Session: one conversation's state on an Engine: its position (tokens already in the KV cache),
// its KV pages, its context limit and the tokens it has seen. Sessions are advanced only through
// Engine::step / prefill / decode; several can advance together in one ragged step.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/ops.h"
#include "runtime/kv_pages.h"

namespace jitllm {

class Session {
 public:
  Session(KvPagePool& pool, int64_t n_ctx);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int64_t position() const { return int64_t(tokens_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Forgets everything (position 0) and returns the pages to the pool.
  void clear();
  // Keeps the first n tokens (their KV stays valid) and forgets the rest, e.g. to re-run a chat
  // turn from where the re-rendered conversation diverges.
  void truncate(int64_t n);

  // Engine internals: make room for `n` more positions (throws on context overflow), expose the
  // pages, record accepted tokens.
  void reserve(int64_t n);
  KvSeq kv() const { return KvSeq{pages_.data(), int64_t(pages_.size())}; }
  void append(const int32_t* tokens, int64_t n) { tokens_.insert(tokens_.end(), tokens, tokens + n); }

 private:
  KvPagePool& pool_;
  int64_t n_ctx_;
  std::vector<uint8_t*> pages_;
  std::vector<int32_t> tokens_;
};

}  // namespace jitllm
