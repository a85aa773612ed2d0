// The generated activation packing against the packing built on the reference
// quantize_activation: byte-identical planes for random rows at model widths (2048, 8192) and
// ragged token counts, all-zero blocks, sign ties of the largest |x|, values landing exactly on
// .5 steps, tiny / huge magnitudes; and byte-identical emission.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_matmul.h"
#include "core/error.h"

namespace jitllm {
namespace {

void expect_same_packing(QuantType type, const std::vector<float>& x, int64_t k) {
  const int64_t n = int64_t(x.size()) / k;
  const jit::ActLayout l = jit::act_layout(type, k);
  for (jit::Isa isa : {jit::Isa::Avx2, jit::Isa::AvxVnni, jit::Isa::Avx512Vnni}) {
    std::vector<uint8_t> a(l.bytes * size_t(n), 0), b(l.bytes * size_t(n), 0);
    jit::pack_activation(type, isa, x.data(), k, n, a.data());
    jit::pack_activation_reference(type, isa, x.data(), k, n, b.data());
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        ADD_FAILURE() << quant_name(type) << ": byte " << i << " (token " << i / l.bytes
                      << ", offset " << i % l.bytes << ") differs";
        break;
      }
  }
}

TEST(JitActivation, PackingMatchesReferenceQuantization) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t k = 1024;
  std::vector<float> x(size_t(8 * k));
  for (float& v : x) v = nd(rng);
  // token 1: zeros; token 2: largest |x| twice with both signs (the first decides the sign);
  // token 3: multiples of amax/254 (x * 127 / amax exactly on .5); token 4/5: tiny and huge.
  std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);
  x[2 * k + 5] = -9.0f;
  x[2 * k + 9] = 9.0f;
  x[2 * k + 300] = 9.0f;
  x[2 * k + 301] = -9.0f;
  for (int64_t i = 0; i < k; ++i) x[size_t(3 * k + i)] = float(int(i % 255) - 127) * (3.0f / 254.0f);
  for (int64_t i = 0; i < k; ++i) x[size_t(4 * k + i)] *= 1e-30f;
  for (int64_t i = 0; i < k; ++i) x[size_t(5 * k + i)] *= 1e30f;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K})
    expect_same_packing(t, x, k);
}

TEST(JitActivation, ModelWidthsAndRaggedTokenCounts) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int64_t k : {2048, 8192})
    for (int64_t n : {1, 2, 5, 13, 65}) {
      std::vector<float> x(size_t(n * k));
      for (float& v : x) v = nd(rng);
      // A zero 32-block and a zero 256-block in the last token, a lone outlier in the first.
      std::fill(x.end() - 512, x.end() - 480, 0.0f);
      std::fill(x.end() - 256, x.end(), 0.0f);
      x[17] = -1000.0f;
      for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K})
        expect_same_packing(t, x, k);
    }
}

TEST(JitActivation, EmissionIsDeterministicAndPerShape) {
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K}) {
    const auto a = jit::act_kernel_code(t, jit::Isa::Avx2, 2048);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, jit::act_kernel_code(t, jit::Isa::Avx2, 2048));
    EXPECT_NE(a, jit::act_kernel_code(t, jit::Isa::Avx2, 4096));
  }
  EXPECT_NE(jit::act_kernel_code(QuantType::Q8_0, jit::Isa::Avx2, 2048),
            jit::act_kernel_code(QuantType::Q4_0, jit::Isa::Avx2, 2048));  // the -8 bias
  EXPECT_THROW(jit::act_kernel_code(QuantType::Q4_K, jit::Isa::Avx2, 300), Error);
}

}  // namespace
}  // namespace jitllm
