// The generated-kernel tests' comparison with the reference: every output within 2e-6 of the
// largest |ref| plus 2e-6 of its own |ref| (integer sums are exact; only float order differs).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace jitllm::jit_test {

inline void expect_close(const std::vector<float>& ref, const std::vector<float>& got,
                         const std::string& what) {
  ASSERT_EQ(ref.size(), got.size());
  float scale = 0;
  for (float v : ref) scale = std::max(scale, std::fabs(v));
  size_t bad = 0;
  float worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float diff = std::fabs(ref[i] - got[i]);
    worst = std::max(worst, diff / std::max(scale, 1e-30f));
    if (!(diff <= 2e-6f * scale + 2e-6f * std::fabs(ref[i]))) ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": worst |diff| / max|ref| = " << worst;
}

}  // namespace jitllm::jit_test
