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

const CudaKnobs& knobs() {
  static const CudaKnobs k;
  return k;
}

namespace {
[[maybe_unused]] const bool kRegistered = tuning::add_registry([]() -> const tuning::Registry& { return knobs().registry; });
}  // namespace

}  // namespace jitllm::cuda
