// Vectorized elementwise ops against the reference: SwiGLU bit-identical over ordinary values,
// the exp polynomial's saturation ranges (|g| > 87), tiny and huge magnitudes, zeros and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/jit_kernels.h"

namespace jitllm {
namespace {

TEST(JitElementwise, SwigluBitIdentical) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> g(200003), u(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = nd(rng);
    u[i] = nd(rng);
  }
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.7f, -88.7f, 89.0f,
                            -89.0f, 100.0f, -100.0f, 140.0f, -140.0f, 1e30f, -1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float); ++i) g[100 + i] = specials[i];
  for (int i = 0; i < 2000; ++i) g[1000 + size_t(i)] = -130.0f + 0.13f * float(i);  // saturation
  std::vector<float> ref(g.size()), got(g.size());
  reference_kernels().swiglu(g.data(), u.data(), ref.data(), int64_t(g.size()));
  jit_kernels().swiglu(g.data(), u.data(), got.data(), int64_t(g.size()));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(std::memcmp(&ref[i], &got[i], 4), 0)
        << "g=" << g[i] << " u=" << u[i] << " ref " << ref[i] << " got " << got[i];
}

}  // namespace
}  // namespace jitllm
