// Generated Q2_K / Q3_K / Q5_K matmul kernels (jit_kquant_matmul.h) against the reference matmul
// (quantize_activation + vec_dot): each format x each ISA level this CPU runs, at real model shapes
// (2048x2048, 5632x2048, 2048x5632, 128256x2048 decode; prefill with ragged token counts up to
// 300), ragged rows, all-zero blocks and activations, two calls into one buffer, the packed
// activation's bytes against quantize_activation's, and byte-identical emission.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <random>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "jit_test_compare.h"
#include "jit_test_data.h"
#include "backend/cpu/jit_kquant_matmul.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using jit::Isa;

const QuantType kFormats[] = {QuantType::Q2_K, QuantType::Q3_K, QuantType::Q5_K};

using jit_test::expect_close;

void check(QuantType type, int64_t rows, int64_t k, int64_t n, bool quantize, uint32_t seed) {
  const auto w = jit_test::random_weights(type, rows, k, seed, quantize);
  const auto x = jit_test::random_activation(n, k, seed + 1);
  std::vector<float> ref(size_t(rows * n));
  reference_kernels().matmul(type, w.data(), rows, k, x.data(), n, ref.data());
  for (Isa isa : jit_test::cpu_isas()) {
    const JitKernels jk(isa);
    std::vector<float> got(size_t(rows * n), 12345.0f);
    jk.matmul(type, w.data(), rows, k, x.data(), n, got.data());
    expect_close(ref, got,
                 fmt::format("{} {}x{} n={} {}", quant_name(type), rows, k, n, jit::isa_name(isa)));
  }
}

TEST(JitKQuant, PackedActivationBytesEqualQuantizeActivation) {
  const int64_t k = 2048, n = 3;
  auto x = jit_test::random_activation(n, k, 1);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero super-block
  x[7] = -9.0f;                                         // a negative largest element
  x[600] = 9.0f;
  x[601] = -9.0f;  // a tie in magnitude: the first one gives the sign
  const jit::KqActLayout al = jit::kq_act_layout(k);
  std::vector<uint8_t> packed(al.bytes * n);
  jit::kq_pack_activation(x.data(), k, n, packed.data());
  std::vector<BlockQ8_K> ref(k / kQK_K);
  for (int64_t t = 0; t < n; ++t) {
    quantize_activation(QuantType::Q2_K, x.data() + t * k, ref.data(), k);
    const uint8_t* p = packed.data() + t * al.bytes;
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      EXPECT_EQ(std::memcmp(p + al.qs + i * kQK_K, ref[size_t(i)].qs, kQK_K), 0) << t << " " << i;
      float d;
      std::memcpy(&d, p + al.d + 4 * i, 4);
      EXPECT_EQ(d, ref[size_t(i)].d) << t << " " << i;
      EXPECT_EQ(std::memcmp(p + al.s16 + 32 * i, ref[size_t(i)].bsums, 32), 0) << t << " " << i;
    }
  }
}

TEST(JitKQuant, PackedActivationOfNaNIsAZeroRecord) {
  // The scale search must not run past the block when no |x| equals the maximum (NaN).
  std::vector<float> x(256, std::nanf(""));
  const jit::KqActLayout al = jit::kq_act_layout(256);
  std::vector<uint8_t> packed(al.bytes, 0xAB);
  jit::kq_pack_activation(x.data(), 256, 1, packed.data());
  float d;
  std::memcpy(&d, packed.data() + al.d, 4);
  EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(packed[al.qs], 0);
}

TEST(JitKQuant, DecodeModelShapes) {
  for (QuantType t : kFormats) {
    check(t, 2048, 2048, 1, true, 1);
    check(t, 5632, 2048, 1, false, 2);
    check(t, 2048, 5632, 1, false, 3);
  }
}

TEST(JitKQuant, DecodeVocabShape) {
  for (QuantType t : kFormats) check(t, 128256, 2048, 1, false, 4);
}

TEST(JitKQuant, PrefillTilesAndRaggedTails) {
  // Rows not a multiple of the row tile or of 16, tokens not a multiple of the token tile.
  for (QuantType t : kFormats)
    for (int64_t n : {2, 3, 5, 7, 64, 67}) check(t, 256 + 13, 512, n, true, uint32_t(10 + n));
  for (QuantType t : kFormats) check(t, 96 + 3, 2048, 300, false, 19);  // 4 token blocks, ragged
  for (QuantType t : kFormats) {  // an 8B ffn_down row (k = 14336): large activation offsets
    check(t, 40, 14336, 1, false, 17);
    check(t, 40, 14336, 9, false, 18);
  }
  for (QuantType t : kFormats) check(t, 1, 256, 1, true, 20);
  for (QuantType t : kFormats) check(t, 3, 256, 9, true, 21);
}

TEST(JitKQuant, ZeroBlocksAndZeroActivations) {
  for (QuantType t : kFormats) {
    auto w = jit_test::random_weights(t, 64, 1024, 30, true);
    const size_t rb = row_bytes(t, 1024);
    // First row entirely zero bytes; the second row's first super-block zero.
    std::fill(w.begin(), w.begin() + ptrdiff_t(rb), uint8_t(0));
    std::fill(w.begin() + ptrdiff_t(rb), w.begin() + ptrdiff_t(rb + quant_traits(t).block_bytes),
              uint8_t(0));
    auto x = jit_test::random_activation(3, 1024, 31);
    std::fill(x.begin() + 1024, x.begin() + 2048, 0.0f);  // token 1: all zero
    std::fill(x.begin() + 2048, x.begin() + 2048 + 256, 0.0f);  // token 2: first block zero
    std::vector<float> ref(64 * 3);
    reference_kernels().matmul(t, w.data(), 64, 1024, x.data(), 3, ref.data());
    for (Isa isa : jit_test::cpu_isas()) {
      std::vector<float> got(64 * 3, -1.0f);
      JitKernels(isa).matmul(t, w.data(), 64, 1024, x.data(), 3, got.data());
      expect_close(ref, got, fmt::format("zeros {} {}", quant_name(t), jit::isa_name(isa)));
      EXPECT_EQ(got[0], 0.0f);
      for (int r = 0; r < 64; ++r) EXPECT_EQ(got[64 + r], 0.0f);
    }
  }
}

TEST(JitKQuant, TwoCallsIntoOneBufferOverwrite) {
  for (QuantType t : kFormats) {
    const auto w = jit_test::random_weights(t, 100, 512, 40, true);
    const auto x1 = jit_test::random_activation(4, 512, 41), x2 = jit_test::random_activation(4, 512, 42);
    std::vector<float> ref(400);
    reference_kernels().matmul(t, w.data(), 100, 512, x2.data(), 4, ref.data());
    for (Isa isa : jit_test::cpu_isas()) {
      const JitKernels jk(isa);
      std::vector<float> got(400);
      jk.matmul(t, w.data(), 100, 512, x1.data(), 4, got.data());
      jk.matmul(t, w.data(), 100, 512, x2.data(), 4, got.data());
      expect_close(ref, got, fmt::format("second call {} {}", quant_name(t), jit::isa_name(isa)));
      std::vector<float> one(100);
      jk.matmul(t, w.data(), 100, 512, x2.data() + 512, 1, one.data());
      jk.matmul(t, w.data(), 100, 512, x2.data() + 512, 1, one.data());
      expect_close(std::vector<float>(ref.begin() + 100, ref.begin() + 200), one,
                   fmt::format("decode twice {} {}", quant_name(t), jit::isa_name(isa)));
    }
  }
}

TEST(JitKQuant, EveryTileAgainstTheReferenceDot) {
  // The kernels themselves (not the dispatch): every T up to the GEMM tile, R = 1..4, ragged rows.
  const int64_t k = 512, rows = 11;
  for (QuantType t : kFormats) {
    const auto w = jit_test::random_weights(t, rows, k, 50, true);
    const auto x = jit_test::random_activation(8, k, 51);
    const jit::KqActLayout al = jit::kq_act_layout(k);
    std::vector<uint8_t> act(al.bytes * 8 + 64);
    uint8_t* a = act.data() + (64 - reinterpret_cast<uintptr_t>(act.data()) % 64) % 64;
    jit::kq_pack_activation(x.data(), k, 8, a);
    std::vector<float> ref(size_t(8 * rows));
    reference_kernels().matmul(t, w.data(), rows, k, x.data(), 8, ref.data());
    for (Isa isa : jit_test::cpu_isas())
      for (auto [R, T] : {std::pair{1, 1}, {4, 1}, {3, 1}, {2, 2}, {1, 3},
                          {jit::kq_gemm_tile(t, isa).rows, jit::kq_gemm_tile(t, isa).tokens}}) {
          const jit::KqKernel kern({t, k, R, T, isa});
          std::vector<float> got(size_t(8 * rows), 7.0f), want(size_t(T * rows));
          const jit::KqArgs args{w.data(), int64_t(row_bytes(t, k)), rows, a, got.data(),
                                 int64_t(rows * 4)};
          kern.fn()(&args);
          got.resize(size_t(T * rows));
          std::copy(ref.begin(), ref.begin() + T * rows, want.begin());
          expect_close(want, got,
                       fmt::format("{} R={} T={} {}", quant_name(t), R, T, jit::isa_name(isa)));
        }
  }
}

TEST(JitKQuant, EmissionIsDeterministic) {
  for (QuantType t : kFormats)
    for (Isa isa : jit_test::cpu_isas()) {
      const jit::KqTile d = jit::kq_decode_tile(t, isa);
      const jit::KqKey key{t, 2048, d.rows, d.tokens, isa};
      const jit::KqKernel a(key), b(key);
      EXPECT_EQ(a.code(), b.code()) << quant_name(t) << " " << jit::isa_name(isa);
      const jit::KqTile g = jit::kq_gemm_tile(t, isa);
      EXPECT_NE(a.code(), jit::KqKernel(jit::KqKey{t, 4096, g.rows, g.tokens, isa}).code());
    }
}

TEST(JitKQuant, BadShapesAreErrorsOrFallBack) {
  const Isa isa = jit::cpu_best_isa();
  EXPECT_THROW(jit::KqKernel(jit::KqKey{QuantType::Q2_K, 300, 1, 1, isa}), Error);
  EXPECT_THROW(jit::KqKernel(jit::KqKey{QuantType::Q5_K, 256, 5, 1, isa}), Error);
  EXPECT_THROW(jit::KqKernel(jit::KqKey{QuantType::Q4_K, 256, 1, 1, isa}), Error);
  // Too many accumulators for the registers: a clear error, not bad code.
  EXPECT_THROW(jit::KqKernel(jit::KqKey{QuantType::Q5_K, 256, 4, 8, Isa::Avx2}), Error);
  float out = 0, x[256] = {};
  const uint8_t w[256] = {};
  EXPECT_FALSE(jit::matmul_k_quants(isa, QuantType::Q4_K, w, 1, 256, x, 1, &out));
  EXPECT_FALSE(jit::matmul_k_quants(isa, QuantType::Q2_K, w, 1, 128, x, 1, &out));
}

}  // namespace
}  // namespace jitllm
