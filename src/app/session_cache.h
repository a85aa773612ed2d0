// SessionCache: where a run that starts with a known prefix may find a session already holding
// it (with its KV), and leave its own for the next one. The app layer only sees this interface;
// the server's prefix cache implements it (server/prefix_cache.h), `jitllm decide` passes none.
// Callers use it from the thread that owns the engine; it does no locking of its own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/session.h"

namespace jitllm::app {

class SessionCache {
 public:
  struct Match {
    std::unique_ptr<Session> session;  // removed from the cache; null when nothing matched
    int64_t common = 0;                // tokens shared with the query
  };

  virtual ~SessionCache() = default;
  // Takes the cached session sharing the longest prefix with `tokens`, if that prefix has at
  // least `min_common` tokens. The caller truncates it to what it reuses.
  virtual Match take_longest(std::span<const int32_t> tokens, int64_t min_common) = 0;
  // Keeps `session` (its tokens and KV) for a later take_longest.
  virtual void put(std::unique_ptr<Session> session) = 0;
};

// Number of leading tokens `a` and `b` share.
inline int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return int64_t(i);
}

}  // namespace jitllm::app
