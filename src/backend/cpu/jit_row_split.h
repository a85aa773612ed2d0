// How the generated matmuls spread weight rows over the pool, shared by every format's dispatch.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

#include "core/thread_pool.h"

namespace jitllm::jit {

// Rows handed out in chunks (multiples of 16 rows, so no output cache line is shared) from an
// atomic counter: a thread slowed down by anything else on its core takes fewer chunks instead
// of holding up the others at the end of a static split.
inline void dynamic_rows(ThreadPool& pool, int64_t rows, int64_t chunk,
                         const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  if (pool.size() == 1 || n_chunks == 1) return fn(0, rows);
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < n_chunks;)
      fn(c * chunk, std::min(rows, (c + 1) * chunk));
  });
}

// Chunk size giving each thread about `per_thread` chunks, a multiple of 16 rows.
inline int64_t row_chunk(int64_t rows, int threads, int64_t per_thread) {
  const int64_t c = rows / (int64_t(threads) * per_thread) / 16 * 16;
  return std::max<int64_t>(16, c);
}

}  // namespace jitllm::jit
