// fork_session: a new session on the same engine holding the first n tokens of another one, KV
// pages copied byte for byte, so one prefilled prefix can seed several continuations (the
// server's prefix cache, /v1/systemone questions sharing a state, n > 1 choices). Kept beside
// Session rather than inside it: it only uses Session's public page interface.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/engine.h"

namespace jitllm {

// n < 0: every token of `src`. `src` must belong to `engine`'s page pool. n_ctx <= 0 keeps src's.
// Throws jitllm::Error when n is out of range or the pool cannot supply the pages.
std::unique_ptr<Session> fork_session(Engine& engine, const Session& src, int64_t n = -1,
                                      int64_t n_ctx = 0);

}  // namespace jitllm
