// An activation matrix as the ops see it: a pointer into one backend's memory and its shape.
// The graph never dereferences it; only the backend that allocated it does.
#pragma once

#include <cstdint>

namespace jitllm {

// A float activation matrix [rows, cols], row-major, in the backend's memory.
struct Act {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
};

}  // namespace jitllm
