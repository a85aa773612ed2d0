// PrefixCache: sessions whose requests finished, kept with their KV so a later request that
// starts with the same tokens skips prefilling them. Bounded by a number of sessions; the least
// recently used goes first, and the scheduler evicts more when the KV pool runs short. Used only
// by the scheduler thread (no locking). It is the app layer's SessionCache, so /v1/systemone
// (app/systemone_scoring.h) finds and leaves its state here too.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>

#include "app/session_cache.h"
#include "runtime/session.h"

namespace jitllm::server {

class PrefixCache final : public app::SessionCache {
 public:
  explicit PrefixCache(size_t max_sessions) : max_sessions_(max_sessions) {}

  // Keeps `session` (its tokens and KV); evicts the least recently used beyond the bound.
  void put(std::unique_ptr<Session> session) override;
  // Takes the cached session sharing the longest prefix with `tokens`, if that prefix has at
  // least `min_common` tokens. The caller truncates it to what it reuses.
  Match take_longest(std::span<const int32_t> tokens, int64_t min_common) override;

  // Drops the least recently used session; false when empty.
  bool evict_one();
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

 private:
  size_t max_sessions_;
  std::list<std::unique_ptr<Session>> entries_;  // most recently used first
};

}  // namespace jitllm::server
