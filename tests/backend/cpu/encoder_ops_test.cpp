// The encoders' elementwise kernels (BERT): LayerNorm and the exact (erf) GELU against their
// definitions in double, on a BERT-base row (768), a ragged one (97) and a single value; with and
// without weight and bias; a constant row (zero variance); in place and twice into one buffer;
// the GELU's specials (zeros, infinities, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/reference_kernels.h"

namespace jitllm {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

TEST(EncoderOps, LayerNormMatchesItsDefinition) {
  const ReferenceKernels k;
  for (const int64_t dim : {int64_t(768), int64_t(97), int64_t(1)})
    for (const bool affine : {true, false}) {
      const int64_t n = 5;
      std::vector<float> x = random_floats(size_t(n * dim), uint32_t(dim), 3.0f);
      for (int64_t i = 0; i < dim; ++i) x[size_t(dim + i)] = 2.5f;  // row 1: constant
      for (int64_t i = 0; i < dim; ++i) x[size_t(2 * dim + i)] += 1000.0f;  // row 2: far from 0
      const std::vector<float> w = random_floats(size_t(dim), 7, 1.0f), b = random_floats(size_t(dim), 8, 1.0f);
      const float eps = 1e-12f;
      std::vector<float> got(x.size(), -1.0f);
      for (int pass = 0; pass < 2; ++pass)  // twice into one buffer
        k.layer_norm(x.data(), affine ? w.data() : nullptr, affine ? b.data() : nullptr, n, dim, eps, got.data());
      for (int64_t t = 0; t < n; ++t) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < dim; ++i) mean += x[size_t(t * dim + i)];
        mean /= double(dim);
        for (int64_t i = 0; i < dim; ++i) var += std::pow(x[size_t(t * dim + i)] - mean, 2);
        var /= double(dim);
        for (int64_t i = 0; i < dim; ++i) {
          double want = (x[size_t(t * dim + i)] - mean) / std::sqrt(var + eps);
          if (affine) want = want * w[size_t(i)] + b[size_t(i)];
          EXPECT_NEAR(got[size_t(t * dim + i)], want, 1e-4 * (1 + std::fabs(want)))
              << "dim " << dim << " row " << t << " col " << i;
        }
      }
      std::vector<float> inplace = x;
      k.layer_norm(inplace.data(), affine ? w.data() : nullptr, affine ? b.data() : nullptr, n, dim, eps,
                   inplace.data());
      EXPECT_EQ(inplace, got) << "in place, dim " << dim;
    }
}

TEST(EncoderOps, GeluErfMatchesItsDefinition) {
  const ReferenceKernels k;
  std::vector<float> x = random_floats(10001, 3, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {0.0f, -0.0f, 1e-30f, -1e-30f, 10.0f, -10.0f, 40.0f, -40.0f, inf, -inf});
  std::vector<float> got(x.size(), -1.0f);
  k.gelu_erf(x.data(), got.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    if (std::isinf(v)) {  // +inf stays; -inf * 0 is NaN, as in torch
      if (v > 0) EXPECT_EQ(got[i], v);
      else EXPECT_TRUE(std::isnan(got[i]) || got[i] == 0.0f) << "gelu(-inf)";
      continue;
    }
    EXPECT_NEAR(got[i], want, 1e-6 * (1 + std::fabs(want))) << "x " << v;
  }
  std::vector<float> nan{std::numeric_limits<float>::quiet_NaN()};
  k.gelu_erf(nan.data(), nan.data(), 1);  // in place
  EXPECT_TRUE(std::isnan(nan[0]));
}

}  // namespace
}  // namespace jitllm
