// The card's read wall: a generated read-only reduction over a buffer far larger than L2, timed
// with events (median of several runs). Decode speed is quoted as a share of this number.
#pragma once

#include "backend/cuda/compiler.h"

namespace jitllm::cuda {

// GB/s (1e9 bytes) read from device memory; `bytes` of buffer, `reps` timed runs.
double measure_read_gbs(const Device& device, Compiler& compiler, size_t bytes = size_t(2) << 30,
                        int reps = 10);

// For -devices cuda front ends: the read wall of card `ordinal` (own compiler, default cache).
double read_wall_gbs(int ordinal);

}  // namespace jitllm::cuda
