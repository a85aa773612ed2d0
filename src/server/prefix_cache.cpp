// PrefixCache implementation: a linear scan over a handful of sessions, which is nothing next to
// one model step.
#include "server/prefix_cache.h"

namespace jitllm::server {

void PrefixCache::put(std::unique_ptr<Session> session) {
  if (!session || session->position() == 0 || max_sessions_ == 0) return;
  entries_.push_front(std::move(session));
  while (entries_.size() > max_sessions_) entries_.pop_back();
}

PrefixCache::Match PrefixCache::take_longest(std::span<const int32_t> tokens, int64_t min_common) {
  auto best = entries_.end();
  int64_t best_common = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const int64_t c = app::common_prefix((*it)->tokens(), tokens);
    if (c > best_common) {
      best_common = c;
      best = it;
    }
  }
  Match m;
  if (best == entries_.end() || best_common < min_common || best_common == 0) return m;
  m.session = std::move(*best);
  m.common = best_common;
  entries_.erase(best);
  return m;
}

bool PrefixCache::evict_one() {
  if (entries_.empty()) return false;
  entries_.pop_back();
  return true;
}

}  // namespace jitllm::server
