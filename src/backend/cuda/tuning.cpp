// The CUDA backend's knobs (see tuning.h) and the parsers of its two free-text settings.
#include "backend/cuda/tuning.h"

#include <charconv>

namespace jitllm::cuda {

std::optional<int> CudaKnobs::splitk_value(const std::string& v) {
  if (v.empty() || v == "auto") return -1;
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 0 || n > 1024) return std::nullopt;
  return n;
}

std::optional<int> CudaKnobs::epilogue_value(const std::string& v) {
  // Each comma-separated word is one of these (all, none: alone or among others, as before).
  size_t start = 0;
  while (start <= v.size()) {
    const size_t end = std::min(v.find(',', start), v.size());
    const std::string_view w(v.data() + start, end - start);
    if (!w.empty() && w != "all" && w != "none" && w != "rope" && w != "norm" && w != "swiglu") return std::nullopt;
    start = end + 1;
  }
  return 0;
}

const CudaKnobs& knobs() {
  static const CudaKnobs k;
  return k;
}

namespace {
[[maybe_unused]] const bool kRegistered = tuning::add_registry([]() -> const tuning::Registry& { return knobs().registry; });
}  // namespace

}  // namespace jitllm::cuda
