// The CPU backend's knobs (see tuning.h).
#include "backend/cpu/tuning.h"

namespace jitllm::jit {

const CpuKnobs& knobs() {
  static const CpuKnobs k;
  return k;
}

namespace {
[[maybe_unused]] const bool kRegistered = tuning::add_registry([]() -> const tuning::Registry& { return knobs().registry; });
}  // namespace

}  // namespace jitllm::jit
