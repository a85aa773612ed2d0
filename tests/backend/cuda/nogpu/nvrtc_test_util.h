// Shared by the no-GPU tests: whether NVRTC loads on this machine (the toolkit is installed but
// there may be no card), so that tests compiling generated sources can skip cleanly without it.
#pragma once

#include <gtest/gtest.h>

#include "backend/cuda/cuda_api.h"
#include "core/error.h"

namespace jitllm::cuda {

inline bool have_nvrtc() {
  try {
    nvrtc();
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace jitllm::cuda

#define JITLLM_REQUIRE_NVRTC() \
  if (!::jitllm::cuda::have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed"
