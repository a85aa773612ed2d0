// fork_session implementation: whole pages are copied (a partly filled last page included), which
// is exact because a page holds page_tokens positions of every layer and nothing else; each
// backend copies its own KV (Engine::copy_kv_pages): on a card the host pages hold nothing.
#include "runtime/session_fork.h"

#include <cstring>

#include "core/error.h"

namespace jitllm {

std::unique_ptr<Session> fork_session(Engine& engine, const Session& src, int64_t n,
                                      int64_t n_ctx) {
  if (n < 0) n = src.position();
  if (n > src.position())
    throw_error("fork: {} tokens requested but the session holds {}", n, src.position());
  auto dst = engine.new_session(n_ctx > 0 ? n_ctx : src.n_ctx());
  if (n > dst->n_ctx())
    throw_error("fork: {} tokens do not fit the new context of {}", n, dst->n_ctx());
  if (n == 0) return dst;
  dst->reserve(n);
  const KvLayout& layout = engine.kv_pool().layout();
  const int64_t pages = (n + layout.page_tokens - 1) / layout.page_tokens;
  const KvSeq from = src.kv(), to = dst->kv();
  if (from.n_pages < pages || to.n_pages < pages)
    throw_error("fork: the source session has {} KV pages, {} needed", from.n_pages, pages);
  // Every backend copies what it keeps (the host its pages, a card its device copies of them).
  engine.copy_kv_pages(from, to, pages);
  dst->append(src.tokens().data(), n);
  return dst;
}

}  // namespace jitllm
