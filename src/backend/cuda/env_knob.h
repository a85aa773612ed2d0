// Integer settings read from the environment (the JITLLM_CUDA_* bench and tuning knobs).
#pragma once

#include <cstdlib>

namespace jitllm::cuda {

// The value of `name` as an integer, or `fallback` when it is unset or empty.
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace jitllm::cuda
