// Decode matvec kernels (jit_matvec.h) against the reference matmul (quant/vec_dot) at real model
// shapes (2048x2048, 8192x2048, 2048x8192, 128256x2048), ragged row tails, all-zero blocks, two
// calls into one buffer, groups of matrices sharing one input, every ISA level this CPU runs
// that has a kernel, and byte-identical emission. Q8_0 is checked bit for bit against ggml's
// AVX2 float order, re-derived here from its definition (8 lanes of 4-element integer dots,
// acc = fma(float(isum), d_w * d_a, acc) per block, then hsum_float_8).
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
#include "backend/cpu/jit_matvec.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using jit::Isa;

const QuantType kFormats[] = {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0};

std::vector<Isa> isas(QuantType t, int64_t k) {
  std::vector<Isa> out;
  for (Isa i : jit_test::cpu_isas())
    if (jit::matvec_supported(t, i, k)) out.push_back(i);
  return out;
}

using jit_test::expect_close;

// ggml-cpu's AVX2 Q8_0 x Q8_0 dot, float order included (see the file comment).
float q8_0_ggml_order(const uint8_t* row, const BlockQ8_0* a, int64_t nb) {
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const auto* w = reinterpret_cast<const BlockQ8_0*>(row + size_t(b) * sizeof(BlockQ8_0));
    const float d = fp16_to_f32(w->d) * fp16_to_f32(a[b].d);
    for (int l = 0; l < 8; ++l) {
      int s = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) s += int(w->qs[j]) * int(a[b].qs[j]);
      acc[l] = std::fma(float(s), d, acc[l]);
    }
  }
  float r[4];
  for (int i = 0; i < 4; ++i) r[i] = acc[4 + i] + acc[i];
  const float lo = r[0] + r[2], hi = r[1] + r[3];
  return lo + hi;
}

// Runs the generated kernel for one matrix through the dispatch (n == 1).
std::vector<float> run(Isa isa, QuantType t, const std::vector<uint8_t>& w, int64_t rows,
                       int64_t k, const std::vector<float>& x, float fill = 12345.0f) {
  std::vector<float> got(size_t(rows), fill);
  const jit::MatvecTarget tg{t, w.data(), rows, got.data()};
  jit::matvec_group(isa, {&tg, 1}, k, x.data(), ThreadPool::global());
  return got;
}

void check(QuantType t, int64_t rows, int64_t k, bool quantize, uint32_t seed) {
  const auto w = jit_test::random_weights(t, rows, k, seed, quantize);
  const auto x = jit_test::random_activation(1, k, seed + 1);
  std::vector<float> ref(static_cast<size_t>(rows));
  reference_kernels().matmul(t, w.data(), rows, k, x.data(), 1, ref.data());
  for (Isa isa : isas(t, k)) {
    const auto got = run(isa, t, w, rows, k, x);
    expect_close(ref, got, fmt::format("{} {}x{} {}", quant_name(t), rows, k, jit::isa_name(isa)));
    if (t == QuantType::Q8_0) {
      std::vector<uint8_t> act(row_bytes(QuantType::Q8_0, k));
      quantize_activation(t, x.data(), act.data(), k);
      const auto* a = reinterpret_cast<const BlockQ8_0*>(act.data());
      size_t differ = 0;
      for (int64_t r = 0; r < rows; ++r)
        if (got[size_t(r)] != q8_0_ggml_order(w.data() + size_t(r) * row_bytes(t, k), a, k / 32))
          ++differ;
      EXPECT_EQ(differ, 0u) << "Q8_0 not bit-identical to ggml's order, " << rows << "x" << k;
    }
  }
}

TEST(JitMatvec, EveryIsaHasKernels) {
  // Every format here runs generated code on every level (the tests below must not skip any).
  for (QuantType t : kFormats)
    for (Isa isa : {Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni}) {
      EXPECT_TRUE(jit::matvec_supported(t, isa, 2048)) << quant_name(t) << " " << jit::isa_name(isa);
      EXPECT_FALSE(jit::matvec_supported(t, isa, t == QuantType::Q8_0 ? 48 : 384));
    }
}

TEST(JitMatvec, ModelShapes) {
  for (QuantType t : kFormats) {
    check(t, 2048, 2048, true, 1);
    check(t, 8192, 2048, false, 2);
    check(t, 2048, 8192, false, 3);
  }
}

TEST(JitMatvec, VocabShape) {
  check(QuantType::Q6_K, 128256, 2048, false, 4);  // Q4_K_M's output head
}

TEST(JitMatvec, RaggedRowTails) {
  // Rows not a multiple of the rows per pass, nor of the 16-row chunks.
  for (QuantType t : kFormats)
    for (int64_t rows : {1, 2, 3, 5, 7, 2048 + 13}) check(t, rows, 512, true, uint32_t(10 + rows));
  check(QuantType::Q8_0, 37, 96, true, 22);  // k an odd number of blocks
}

TEST(JitMatvec, ZeroBlocksAndZeroActivation) {
  for (QuantType t : kFormats) {
    const int64_t k = 1024, rows = 64;
    auto w = jit_test::random_weights(t, rows, k, 30, true);
    const size_t rb = row_bytes(t, k);
    std::fill(w.begin(), w.begin() + ptrdiff_t(rb), uint8_t(0));  // row 0: all zero bytes
    std::fill(w.begin() + ptrdiff_t(rb), w.begin() + ptrdiff_t(rb + quant_traits(t).block_bytes),
              uint8_t(0));  // row 1: first block zero
    const auto x = jit_test::random_activation(1, k, 31);
    std::vector<float> ref(static_cast<size_t>(rows));
    reference_kernels().matmul(t, w.data(), rows, k, x.data(), 1, ref.data());
    const std::vector<float> zx(size_t(k), 0.0f);
    for (Isa isa : isas(t, k)) {
      const auto got = run(isa, t, w, rows, k, x, -1.0f);
      expect_close(ref, got, fmt::format("zeros {} {}", quant_name(t), jit::isa_name(isa)));
      EXPECT_EQ(got[0], 0.0f);
      for (float v : run(isa, t, w, rows, k, zx, -1.0f)) EXPECT_EQ(v, 0.0f);
    }
  }
}

TEST(JitMatvec, TwoCallsIntoOneBufferOverwrite) {
  for (QuantType t : kFormats) {
    const int64_t k = 512, rows = 100;
    const auto w = jit_test::random_weights(t, rows, k, 40, true);
    const auto x1 = jit_test::random_activation(1, k, 41), x2 = jit_test::random_activation(1, k, 42);
    std::vector<float> ref(static_cast<size_t>(rows));
    reference_kernels().matmul(t, w.data(), rows, k, x2.data(), 1, ref.data());
    for (Isa isa : isas(t, k)) {
      std::vector<float> got(static_cast<size_t>(rows));
      const jit::MatvecTarget tg{t, w.data(), rows, got.data()};
      jit::matvec_group(isa, {&tg, 1}, k, x1.data(), ThreadPool::global());
      jit::matvec_group(isa, {&tg, 1}, k, x2.data(), ThreadPool::global());
      expect_close(ref, got, fmt::format("second call {} {}", quant_name(t), jit::isa_name(isa)));
    }
  }
}

TEST(JitMatvec, GroupOfMixedFormatsSharesOneInput) {
  // q (Q4_K), k (Q4_K), v (Q6_K) as in Q4_K_M attention, through JitKernels::matmul_group.
  const int64_t k = 2048;
  const auto wq = jit_test::random_weights(QuantType::Q4_K, 2048, k, 50, false);
  const auto wk = jit_test::random_weights(QuantType::Q4_K, 512, k, 51, false);
  const auto wv = jit_test::random_weights(QuantType::Q6_K, 512 + 5, k, 52, false);
  const auto x = jit_test::random_activation(1, k, 53);
  std::vector<float> rq(2048), rk(512), rv(517);
  reference_kernels().matmul(QuantType::Q4_K, wq.data(), 2048, k, x.data(), 1, rq.data());
  reference_kernels().matmul(QuantType::Q4_K, wk.data(), 512, k, x.data(), 1, rk.data());
  reference_kernels().matmul(QuantType::Q6_K, wv.data(), 517, k, x.data(), 1, rv.data());
  for (Isa isa : {Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni}) {
    if (!jit::cpu_supports(isa)) continue;
    std::vector<float> q(2048, 7.0f), kk(512, 7.0f), v(517, 7.0f);
    const CpuKernels::MatmulTarget ts[] = {{QuantType::Q4_K, wq.data(), 2048, q.data()},
                                           {QuantType::Q4_K, wk.data(), 512, kk.data()},
                                           {QuantType::Q6_K, wv.data(), 517, v.data()}};
    JitKernels(isa).matmul_group(ts, k, x.data(), 1);
    expect_close(rq, q, fmt::format("group q {}", jit::isa_name(isa)));
    expect_close(rk, kk, fmt::format("group k {}", jit::isa_name(isa)));
    expect_close(rv, v, fmt::format("group v {}", jit::isa_name(isa)));
  }
}

TEST(JitMatvec, PackedActivationHoldsTheReferenceQuants) {
  // The records (jit_matvec.h) rebuilt here from quantize_activation, byte for byte.
  const int64_t k = 2048;
  auto x = jit_test::random_activation(1, k, 60);
  x[5] = 40.0f;  // an outlier block
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero super-block
  for (QuantType t : kFormats)
    for (Isa isa : isas(t, k)) {
      std::vector<uint8_t> got(jit::matvec_act_bytes(t, k), 0xAB);
      jit::pack_matvec_act(t, isa, x.data(), k, got.data());
      std::vector<uint8_t> act(row_bytes(quant_traits(t).vec_dot_type, k));
      quantize_activation(t, x.data(), act.data(), k);
      std::vector<uint8_t> want(got.size(), 0);
      if (t == QuantType::Q8_0) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(act.data());
        for (int64_t i = 0; i < k / 32; ++i) {
          uint8_t* rec = want.data() + 128 * i;
          std::memcpy(rec, b[i].qs, 32);
          std::memcpy(rec + 32, b[i].qs, 32);
          for (int l = 0; l < 16; ++l) {
            int32_t c = 0;
            for (int j = 0; j < 4; ++j) c -= 128 * b[i].qs[4 * (l % 8) + j];
            std::memcpy(rec + 64 + 4 * l, &c, 4);
          }
          const float d = fp16_to_f32(b[i].d);
          std::memcpy(want.data() + 128 * (k / 32) + 4 * i, &d, 4);
        }
      } else {
        const auto* b = reinterpret_cast<const BlockQ8_K*>(act.data());
        const bool permuted = t == QuantType::Q4_K && isa == Isa::Avx512Vnni;
        const int order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
        for (int64_t i = 0; i < k / 256; ++i) {
          uint8_t* rec = want.data() + 320 * i;
          for (int p = 0; p < 8; ++p)
            std::memcpy(rec + 32 * p, b[i].qs + 32 * (permuted ? order[p] : p), 32);
          int16_t sums[16];
          for (int g = 0; g < 16; ++g)
            sums[g] = t == QuantType::Q6_K ? b[i].bsums[g]
                      : g < 8               ? int16_t(0)
                                            : int16_t(b[i].bsums[2 * (g - 8)] + b[i].bsums[2 * (g - 8) + 1]);
          std::memcpy(rec + 256, sums, 32);
          std::memcpy(rec + 288, &b[i].d, 4);
        }
      }
      EXPECT_EQ(got, want) << quant_name(t) << " " << jit::isa_name(isa);
    }
}

TEST(JitMatvec, EmissionIsDeterministic) {
  for (QuantType t : kFormats)
    for (Isa isa : isas(t, 2048)) {
      const jit::MatvecKey key{t, 2048, jit::matvec_rows(t, isa), isa};
      const jit::MatvecKernel a(key), b(key);
      EXPECT_EQ(a.code(), b.code()) << quant_name(t) << " " << jit::isa_name(isa);
      EXPECT_NE(a.code(), jit::MatvecKernel({t, 4096, key.rows, isa}).code());
    }
}

TEST(JitMatvec, BadKeysAreErrors) {
  const Isa isa = jit::cpu_best_isa();
  EXPECT_THROW(jit::MatvecKernel({QuantType::Q4_K, 300, 1, isa}), Error);
  EXPECT_THROW(jit::MatvecKernel({QuantType::Q8_0, 64, 9, isa}), Error);
  EXPECT_THROW(jit::MatvecKernel({QuantType::F16, 64, 1, isa}), Error);
  EXPECT_THROW(jit::pack_matvec_act(QuantType::F16, isa, nullptr, 64, nullptr), Error);
}

}  // namespace
}  // namespace jitllm
