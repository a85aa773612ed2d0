// Session implementation.
#include "runtime/session.h"

#include "core/error.h"

namespace jitllm {

Session::Session(KvPagePool& pool, int64_t n_ctx) : pool_(pool), n_ctx_(n_ctx) {
  if (n_ctx <= 0) throw_error("context size must be positive, got {}", n_ctx);
}

Session::~Session() { clear(); }

void Session::clear() {
  for (uint8_t* p : pages_) pool_.release(p);
  pages_.clear();
  tokens_.clear();
}

void Session::truncate(int64_t n) {
  if (n < 0 || n > position())
    throw_error("truncate: {} is outside the session's {} tokens", n, position());
  tokens_.resize(size_t(n));
  const int64_t per_page = pool_.layout().page_tokens;
  const size_t keep = size_t((n + per_page - 1) / per_page);
  while (pages_.size() > keep) {
    pool_.release(pages_.back());
    pages_.pop_back();
  }
}

void Session::reserve(int64_t n) {
  const int64_t need = position() + n;
  if (need > n_ctx_)
    throw_error("context overflow: {} tokens in the session + {} new exceed the context size of {}",
                position(), n, n_ctx_);
  const int64_t per_page = pool_.layout().page_tokens;
  while (int64_t(pages_.size()) * per_page < need) pages_.push_back(pool_.acquire());
}

}  // namespace jitllm
