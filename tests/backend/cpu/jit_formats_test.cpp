// Generated F16 / BF16 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 matmul kernels (jit_formats.h)
// against the reference matmul, for every ISA level this CPU runs: real model shapes (2048x2048,
// 5632x2048, 2048x5632, 128256x2048), prefill token counts with ragged row and token tails,
// all-zero blocks, repeated calls into one output buffer, the packed activation against
// quantize_activation, and byte-identical emission. F16 and BF16 must match bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/jit_formats.h"
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
using Q = QuantType;

const Q kFloat[] = {Q::F16, Q::BF16};
const Q kBlock[] = {Q::Q4_1, Q::Q5_0, Q::Q5_1, Q::IQ4_NL, Q::MXFP4};
const Q kAll[] = {Q::F16, Q::BF16, Q::Q4_1, Q::Q5_0, Q::Q5_1, Q::IQ4_NL, Q::MXFP4};

bool is_float(Q t) { return t == Q::F16 || t == Q::BF16; }

// Float formats: identical bits. Block formats: the lane-wise float accumulation differs from the
// reference's one float per block by ~1e-7 relative per block.
void expect_match(Q type, const std::vector<float>& ref, const std::vector<float>& got,
                  const std::string& what) {
  ASSERT_EQ(ref.size(), got.size());
  if (is_float(type)) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      if (std::memcmp(&ref[i], &got[i], 4) != 0 && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0u) << what << ": first at " << first << ": " << ref[first] << " vs "
                       << got[first];
    return;
  }
  jit_test::expect_close(ref, got, what);
}

void check(Q type, int64_t rows, int64_t k, int64_t n, bool quantize, uint32_t seed,
           const std::vector<Isa>& levels = jit_test::cpu_isas()) {
  const auto w = jit_test::random_weights(type, rows, k, seed, quantize);
  const auto x = jit_test::random_activation(n, k, seed + 1);
  std::vector<float> ref(size_t(rows * n));
  reference_kernels().matmul(type, w.data(), rows, k, x.data(), n, ref.data());
  for (Isa isa : levels) {
    std::vector<float> got(size_t(rows * n), 12345.0f);
    ASSERT_TRUE(jit::matmul_other_formats(isa, type, w.data(), rows, k, x.data(), n, got.data()));
    expect_match(type, ref, got,
                 fmt::format("{} {}x{} n={} {}", quant_name(type), rows, k, n, jit::isa_name(isa)));
  }
}

TEST(JitFormats, PackedActivationEqualsQuantizeActivation) {
  auto x = jit_test::random_activation(3, 1024, 5);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
  x[200] = 1e30f;                                    // one huge value among small ones
  x[300] = -3e-30f;
  // Token 2, block 5: amax 127 makes the scale 1, so every x.5 is a rounding tie (half to even).
  for (int j = 0; j < 32; ++j) x[2048 + 160 + j] = float(j % 9) - 4.5f;
  x[2048 + 170] = 127.0f;
  for (Q type : kBlock)
    for (Isa isa : jit_test::cpu_isas()) {
      const size_t tb = jit::fmt_act_bytes(type, isa, 1024);
      std::vector<uint8_t> packed(tb * 3);
      jit::fmt_pack_activation(type, isa, x.data(), 1024, 3, packed.data());
      const bool q81 = quant_traits(type).vec_dot_type == Q::Q8_1;
      const size_t ab = q81 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
      std::vector<uint8_t> want(ab * 32);
      for (int t = 0; t < 3; ++t) {
        quantize_activation(type, x.data() + t * 1024, want.data(), 1024);
        // Records are equally spaced; find the stride from the quants of block 1.
        const uint8_t* p = packed.data() + size_t(t) * tb;
        size_t stride = 0;
        for (size_t s = 32; s <= 128 && !stride; s += 8)
          if (std::memcmp(p + s, want.data() + ab + (q81 ? 4 : 2), 32) == 0) stride = s;
        ASSERT_NE(stride, 0u) << quant_name(type);
        for (int b = 0; b < 32; ++b) {
          const uint8_t* blk = want.data() + size_t(b) * ab;
          const uint8_t* rec_p = p + size_t(b) * stride;
          EXPECT_EQ(std::memcmp(rec_p, blk + (q81 ? 4 : 2), 32), 0) << quant_name(type) << b;
          uint16_t d16, s16;
          std::memcpy(&d16, blk, 2);
          std::memcpy(&s16, blk + 2, 2);
          // d follows the quants (and the 32 bias bytes when the format has a bias), s follows d.
          const size_t d_at = stride >= 72 ? 64 : 32;
          float d, s;
          std::memcpy(&d, rec_p + d_at, 4);
          EXPECT_EQ(d, fp16_to_f32(d16)) << quant_name(type) << " block " << b;
          if (q81) {
            std::memcpy(&s, rec_p + d_at + 4, 4);
            EXPECT_EQ(s, fp16_to_f32(s16)) << quant_name(type) << " block " << b;
          }
        }
      }
    }
}

TEST(JitFormats, DecodeModelShapes) {
  for (Q t : kAll) {
    check(t, 2048, 2048, 1, t != Q::IQ4_NL, 1);  // IQ4_NL's quantizer search is slow
    check(t, 5632, 2048, 1, false, 2);
    check(t, 2048, 5632, 1, false, 3);
  }
}

TEST(JitFormats, DecodeVocabShape) {
  // 128256 x 2048 (Llama 3 output head), best ISA only: the other shapes cover every level.
  for (Q t : {Q::Q5_1, Q::IQ4_NL}) check(t, 128256, 2048, 1, false, 4, {jit::cpu_best_isa()});
}

TEST(JitFormats, PrefillTilesAndRaggedTails) {
  // Rows not a multiple of 4 (floats then keep ggml_vec_dot's order per token) or of 16, rows a
  // multiple of 4 (tinyBLAS order), tokens not a multiple of the token tile.
  for (Q t : kAll)
    for (int64_t n : {2, 3, 5, 7, 67}) {
      const int64_t rows = n < 10 ? 2048 : 256;
      check(t, rows + 13, 512, n, false, uint32_t(10 + n));
      check(t, rows + 12, 512, n, false, uint32_t(20 + n));
    }
  for (Q t : kAll) {
    check(t, 1, 256, 1, true, 30);
    check(t, 3, 256, 9, true, 31);
    check(t, 128, 1024, 515, false, 32);  // a 512+-token prompt
  }
  // k a multiple of 16/32 but not of 64: tinyBLAS order only (several tokens, rows % 4 == 0).
  check(Q::F16, 36, 80, 5, true, 33);
  check(Q::BF16, 36, 96, 5, true, 34);
  for (Q t : kBlock) check(t, 37, 96, 3, true, 35);
}

TEST(JitFormats, Bf16EmulationAtTheAvx512Level) {
  // Where the CPU has AVX512_BF16 the avx512 level uses VDPBF16PS; the zmm emulation (used on
  // AVX-512 CPUs without it) must give the same bits, decode and GEMM.
  if (!jit::cpu_supports(Isa::Avx512Vnni)) GTEST_SKIP() << "no AVX-512";
  jit::set_bf16_native_enabled(false);
  EXPECT_FALSE(jit::bf16_native(Isa::Avx512Vnni));
  check(Q::BF16, 2048, 2048, 1, true, 70, {Isa::Avx512Vnni});
  check(Q::BF16, 256 + 12, 512, 67, true, 71, {Isa::Avx512Vnni});
  check(Q::BF16, 256 + 13, 512, 3, true, 72, {Isa::Avx512Vnni});
  jit::set_bf16_native_enabled(true);
  EXPECT_EQ(jit::bf16_native(Isa::Avx512Vnni), jit::cpu_has_avx512_bf16());
}

TEST(JitFormats, ShapesWithoutKernelFallBack) {
  // One token with k % 64 != 0: ggml_vec_dot's tail is not emitted; JitKernels still matches.
  for (Q t : kFloat) {
    const auto w = jit_test::random_weights(t, 8, 96, 40, true);
    const auto x = jit_test::random_activation(1, 96, 41);
    std::vector<float> ref(8), got(8);
    EXPECT_FALSE(jit::matmul_other_formats(jit::cpu_best_isa(), t, w.data(), 8, 96, x.data(), 1,
                                           got.data()));
    reference_kernels().matmul(t, w.data(), 8, 96, x.data(), 1, ref.data());
    JitKernels(jit::cpu_best_isa()).matmul(t, w.data(), 8, 96, x.data(), 1, got.data());
    expect_match(t, ref, got, fmt::format("fallback {}", quant_name(t)));
  }
  EXPECT_FALSE(jit::matmul_other_formats(jit::cpu_best_isa(), Q::Q4_K, nullptr, 1, 256, nullptr,
                                         1, nullptr));
}

TEST(JitFormats, ZeroBlocksAndZeroActivations) {
  for (Q t : kAll) {
    auto w = jit_test::random_weights(t, 64, 1024, 50, true);
    const size_t rb = row_bytes(t, 1024);
    std::fill(w.begin(), w.begin() + ptrdiff_t(rb), uint8_t(0));  // row 0: zero bytes
    std::fill(w.begin() + ptrdiff_t(rb), w.begin() + ptrdiff_t(rb + 64), uint8_t(0));
    auto x = jit_test::random_activation(3, 1024, 51);
    std::fill(x.begin() + 1024, x.begin() + 2048, 0.0f);  // token 1: all zero
    std::fill(x.begin(), x.begin() + 64, 0.0f);           // token 0: two zero blocks
    std::vector<float> ref(64 * 3);
    reference_kernels().matmul(t, w.data(), 64, 1024, x.data(), 3, ref.data());
    for (Isa isa : jit_test::cpu_isas()) {
      std::vector<float> got(64 * 3, -1.0f);
      ASSERT_TRUE(jit::matmul_other_formats(isa, t, w.data(), 64, 1024, x.data(), 3, got.data()));
      expect_match(t, ref, got, fmt::format("zeros {} {}", quant_name(t), jit::isa_name(isa)));
      // Zero bytes are a zero row: scale 0 (MXFP4: level 0 at any scale).
      EXPECT_EQ(got[0], 0.0f) << quant_name(t);
      for (int r = 0; r < 64; ++r) EXPECT_EQ(got[64 + r], 0.0f) << quant_name(t);
    }
  }
}

TEST(JitFormats, TwoCallsIntoOneBufferOverwrite) {
  for (Q t : kAll) {
    const auto w = jit_test::random_weights(t, 100, 512, 60, true);
    const auto x1 = jit_test::random_activation(4, 512, 61), x2 = jit_test::random_activation(4, 512, 62);
    std::vector<float> ref(400), ref1(100);
    reference_kernels().matmul(t, w.data(), 100, 512, x2.data(), 4, ref.data());
    reference_kernels().matmul(t, w.data(), 100, 512, x2.data() + 512, 1, ref1.data());
    for (Isa isa : jit_test::cpu_isas()) {
      const JitKernels jk(isa);
      std::vector<float> got(400);
      jk.matmul(t, w.data(), 100, 512, x1.data(), 4, got.data());
      jk.matmul(t, w.data(), 100, 512, x2.data(), 4, got.data());
      expect_match(t, ref, got, fmt::format("second call {} {}", quant_name(t), jit::isa_name(isa)));
      std::vector<float> one(100);
      jk.matmul(t, w.data(), 100, 512, x2.data() + 512, 1, one.data());
      jk.matmul(t, w.data(), 100, 512, x2.data() + 512, 1, one.data());
      expect_match(t, ref1, one, fmt::format("decode twice {} {}", quant_name(t), jit::isa_name(isa)));
    }
  }
}

TEST(JitFormats, EmissionIsDeterministic) {
  for (Q t : kAll)
    for (Isa isa : jit_test::cpu_isas()) {
      const jit::TileShape d = jit::fmt_decode_tile(t, isa, 2048 + 64);
      const jit::FmtKey key{t, 2048 + 64, d.rows, d.tokens, isa, jit::FloatOrder::Vec};
      const jit::FmtKernel a(key), b(key);
      EXPECT_EQ(a.code(), b.code()) << quant_name(t) << " " << jit::isa_name(isa);
      const jit::TileShape g = jit::fmt_gemm_tile(t, isa);
      const jit::FmtKey key2{t, 4096, g.rows, g.tokens, isa, jit::FloatOrder::Gemm};
      EXPECT_NE(a.code(), jit::FmtKernel(key2).code());
    }
}

TEST(JitFormats, BadShapesAreErrors) {
  const Isa isa = jit::cpu_best_isa();
  EXPECT_THROW(jit::FmtKernel(jit::FmtKey{Q::F16, 96, 1, 1, isa, jit::FloatOrder::Vec}), Error);
  EXPECT_THROW(jit::FmtKernel(jit::FmtKey{Q::Q5_0, 100, 1, 1, isa, jit::FloatOrder::Vec}), Error);
  EXPECT_THROW(jit::FmtKernel(jit::FmtKey{Q::Q4_1, 256, 9, 1, isa, jit::FloatOrder::Vec}), Error);
  EXPECT_THROW(jit::FmtKernel(jit::FmtKey{Q::Q4_K, 256, 1, 1, isa, jit::FloatOrder::Vec}), Error);
}

}  // namespace
}  // namespace jitllm
