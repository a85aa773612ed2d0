// The cache directory (see cache_dir.h).
#include "core/cache_dir.h"

#include <cstdlib>

namespace jitllm {

std::string jitllm_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/jitllm";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/jitllm";
  return "";
}

}  // namespace jitllm
