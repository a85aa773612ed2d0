// Where jitllm keeps what it can rebuild: $XDG_CACHE_HOME/jitllm, else ~/.cache/jitllm. Holds the
// conversions of Hugging Face folders (<folder>-<key>.jlm, runtime/model_cache.h) and the CUDA
// kernel cache (cuda/). One definition, so `jitllm models` and `jitllm cache clean` look where the
// loader and the compiler write.
#pragma once

#include <string>

namespace jitllm {

// "" when neither XDG_CACHE_HOME nor HOME is set.
std::string jitllm_cache_dir();

}  // namespace jitllm
