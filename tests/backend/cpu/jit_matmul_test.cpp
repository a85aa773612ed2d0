// Generated matmul kernels against the reference matmul (quant/vec_dot): every format with an
// emitter x every ISA level this CPU runs, at real model shapes (2048x2048, 5632x2048, 2048x5632,
// 128256x2048), ragged row/token tails, all-zero blocks, repeated calls into one output buffer,
// and byte-identical emission.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "jit_test_compare.h"
#include "jit_test_data.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using jit::Isa;

const QuantType kFormats[] = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K,
                              QuantType::Q6_K};

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

TEST(JitMatmul, DecodeModelShapes) {
  for (QuantType t : kFormats) {
    check(t, 2048, 2048, 1, true, 1);
    check(t, 5632, 2048, 1, false, 2);
    check(t, 2048, 5632 / 256 * 256, 1, false, 3);
  }
}

TEST(JitMatmul, DecodeVocabShape) {
  check(QuantType::Q6_K, 128256, 2048, 1, false, 4);  // Q4_K_M output
}

TEST(JitMatmul, PrefillTilesAndRaggedTails) {
  // Rows not a multiple of the row tile or of 16, tokens not a multiple of the token tile.
  for (QuantType t : kFormats)
    for (int64_t n : {2, 3, 5, 7, 67}) check(t, 2048 + 13, 512, n, true, uint32_t(10 + n));
  for (QuantType t : kFormats) check(t, 1, 256, 1, true, 20);
  for (QuantType t : kFormats) check(t, 3, 256, 9, true, 21);
  check(QuantType::Q8_0, 37, 96, 1, true, 22);  // k not a multiple of 64: the ymm Q8_0 kernel
  check(QuantType::Q8_0, 37, 96, 5, true, 23);
}

// out[t][r] of the emitted kernels for `tokens` tokens per call (the last call takes the rest).
std::vector<float> run_tiles(QuantType type, Isa isa, int rows_per_pass, int tokens,
                             const std::vector<uint8_t>& w, int64_t rows, int64_t k,
                             const std::vector<uint8_t>& act, int64_t n) {
  const jit::ActLayout al = jit::act_layout(type, k);
  std::vector<float> out(static_cast<size_t>(rows * n));
  for (int64_t t = 0; t < n; t += tokens) {
    const int nt = int(std::min<int64_t>(tokens, n - t));
    const jit::MatKernel kern(jit::MatKey{type, k, rows_per_pass, nt, isa});
    const jit::MatArgs a{w.data(), int64_t(row_bytes(type, k)), rows, act.data() + size_t(t) * al.bytes,
                         out.data() + t * rows, rows * int64_t(sizeof(float))};
    kern.fn()(&a);
  }
  return out;
}

TEST(JitMatmul, GemmTilesAreBitIdenticalToOneTokenKernels) {
  // Every GEMM tile computes each (row, token) with the one-token kernel's float operations in
  // the same order (integer sums are exact; scales and FMAs per row and token are unchanged), so
  // prefill gives exactly the T = 1 kernel's floats (zmm Q4_K: within tolerance, see below). Token counts leave every tail (odd pair,
  // 8m + 1, 6m + 1), rows leave a row tail.
  const int64_t rows = 1024 + 3, k = 2048;
  for (QuantType type : kFormats) {
    const auto w = jit_test::random_weights(type, rows, k, 50, false);
    for (int64_t n : {2, 9, 13}) {
      const auto x = jit_test::random_activation(n, k, uint32_t(51 + n));
      for (Isa isa : jit_test::cpu_isas()) {
        std::vector<uint8_t> act(jit::act_layout(type, k).bytes * size_t(n));
        jit::pack_activation(type, isa, x.data(), k, n, act.data());
        const jit::TileShape g = jit::gemm_tile(type, isa, k);
        const auto gemm = run_tiles(type, isa, g.rows, g.tokens, w, rows, k, act, n);
        const auto one = run_tiles(type, isa, 1, 1, w, rows, k, act, n);
        const std::string what = fmt::format("{} n={} {}", quant_name(type), n, jit::isa_name(isa));
        if (type == QuantType::Q4_K && isa == Isa::Avx512Vnni) {
          // The zmm Q4_K tiles sum the mins term of all tokens in one vector per row and
          // subtract it after the horizontal sum (ggml's acc_m), not per super-block.
          expect_close(one, gemm, what);
        } else {
          EXPECT_EQ(std::memcmp(gemm.data(), one.data(), gemm.size() * 4), 0) << what;
        }
      }
    }
  }
}

TEST(JitMatmul, Q8_0PrefillIsBitIdenticalToDecode) {
  // Q8_0 must keep ggml's float order (a near-tie in pydoc-llama flips otherwise): prefill
  // through JitKernels gives exactly the floats of one-token matmuls (the decode path).
  const int64_t rows = 2048 + 3, k = 2048;
  const auto w = jit_test::random_weights(QuantType::Q8_0, rows, k, 50, false);
  for (int64_t n : {2, 9, 67}) {
    const auto x = jit_test::random_activation(n, k, uint32_t(51 + n));
    for (Isa isa : jit_test::cpu_isas()) {
      const JitKernels jk(isa);
      std::vector<float> gemm(static_cast<size_t>(rows * n)), one(static_cast<size_t>(rows));
      jk.matmul(QuantType::Q8_0, w.data(), rows, k, x.data(), n, gemm.data());
      size_t differ = 0;
      for (int64_t t = 0; t < n; ++t) {
        jk.matmul(QuantType::Q8_0, w.data(), rows, k, x.data() + t * k, 1, one.data());
        differ += size_t(std::memcmp(one.data(), gemm.data() + t * rows, rows * 4) != 0);
      }
      EXPECT_EQ(differ, 0u) << "n=" << n << " " << jit::isa_name(isa);
    }
  }
}

TEST(JitMatmul, ZeroBlocksAndZeroActivations) {
  for (QuantType t : kFormats) {
    auto w = jit_test::random_weights(t, 64, 1024, 30, true);
    // First row entirely zero bytes; the second row's first block zero.
    std::fill(w.begin(), w.begin() + ptrdiff_t(row_bytes(t, 1024)), uint8_t(0));
    std::fill(w.begin() + ptrdiff_t(row_bytes(t, 1024)),
              w.begin() + ptrdiff_t(row_bytes(t, 1024) + quant_traits(t).block_bytes), uint8_t(0));
    auto x = jit_test::random_activation(3, 1024, 31);
    std::fill(x.begin() + 1024, x.begin() + 2048, 0.0f);  // token 1: all zero
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

TEST(JitMatmul, TwoCallsIntoOneBufferOverwrite) {
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

TEST(JitMatmul, EmissionIsDeterministic) {
  for (QuantType t : kFormats)
    for (Isa isa : jit_test::cpu_isas()) {
      const jit::TileShape d = jit::decode_tile(t, isa, 2048);
      const jit::MatKey key{t, 2048, d.rows, d.tokens, isa};
      const jit::MatKernel a(key), b(key);
      EXPECT_EQ(a.code(), b.code()) << quant_name(t) << " " << jit::isa_name(isa);
      const jit::TileShape g = jit::gemm_tile(t, isa, 4096);
      const jit::MatKey key2{t, 4096, g.rows, g.tokens, isa};
      EXPECT_NE(a.code(), jit::MatKernel(key2).code());
    }
}

TEST(JitMatmul, BadShapesAreErrors) {
  EXPECT_THROW(jit::MatKernel(jit::MatKey{QuantType::Q4_K, 300, 1, 1, jit::cpu_best_isa()}), Error);
  EXPECT_THROW(jit::MatKernel(jit::MatKey{QuantType::Q8_0, 64, 9, 1, jit::cpu_best_isa()}), Error);
  EXPECT_THROW(jit::MatKernel(jit::MatKey{QuantType::F16, 64, 1, 1, jit::cpu_best_isa()}), Error);
}

}  // namespace
}  // namespace jitllm
