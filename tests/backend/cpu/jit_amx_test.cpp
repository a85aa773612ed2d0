// AMX prompt GEMMs (jit_amx.h) against the reference matmul: every format they take at real model
// shapes, ragged row tails, every token count of a tile (1..16) and several tiles, all-zero
// blocks and tokens, repeated calls into one buffer, and byte-identical emission. Skipped, with
// the reason, on machines without usable AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <vector>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_kernels.h"
#include "backend/cpu/jit_repack.h"
#include "core/thread_pool.h"
#include "jit_test_compare.h"
#include "jit_test_data.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

const QuantType kFormats[] = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K,
                              QuantType::Q6_K};

#define SKIP_WITHOUT_AMX()                                                          \
  if (!jit::amx_usable()) {                                                         \
    GTEST_SKIP() << "no usable AMX on this CPU (needs AMX-TILE, AMX-INT8 and the " \
                    "kernel's XTILEDATA permission)";                               \
  }

using jit_test::expect_close;

const JitKernels& amx_kernels() {
  static const JitKernels k(jit::Isa::Avx512Vnni, true);
  return k;
}

void check(QuantType type, int64_t rows, int64_t k, int64_t n, bool quantize, uint32_t seed) {
  const auto w = jit_test::random_weights(type, rows, k, seed, quantize);
  const auto x = jit_test::random_activation(n, k, seed + 1);
  std::vector<float> ref(size_t(rows * n)), got(size_t(rows * n), 12345.0f);
  reference_kernels().matmul(type, w.data(), rows, k, x.data(), n, ref.data());
  amx_kernels().matmul(type, w.data(), rows, k, x.data(), n, got.data());
  expect_close(ref, got, fmt::format("amx {} {}x{} n={}", quant_name(type), rows, k, n));
}

// The AMX GEMM called directly (below JitKernels' token threshold too).
std::vector<float> amx_direct(QuantType type, const std::vector<uint8_t>& w, int64_t rows,
                              int64_t k, const std::vector<float>& x, int64_t n) {
  std::vector<uint8_t> act(jit::act_layout(type, k).bytes * size_t(n));
  jit::pack_activation(type, jit::Isa::Avx512Vnni, x.data(), k, n, act.data());
  std::vector<float> out(size_t(rows * n), -7.0f);
  jit::amx_gemm({type, k, w.data(), int64_t(row_bytes(type, k))}, rows, act.data(), n, out.data(),
                ThreadPool::global());
  return out;
}

TEST(JitAmx, ModelShapes) {
  SKIP_WITHOUT_AMX();
  for (QuantType t : kFormats) {
    check(t, 2048, 2048, 64, false, 1);  // attention projections
    check(t, 8192, 2048, 33, false, 2);  // gate / up
    check(t, 2048, 8192, 17, false, 3);  // down
  }
}

TEST(JitAmx, QuantizedRowsAndRaggedRows) {
  SKIP_WITHOUT_AMX();
  for (QuantType t : kFormats) {
    check(t, 512 + 13, 512, 40, true, 10);
    check(t, 7, 768, 16, true, 11);  // one partial panel; an odd number of super-blocks
  }
}

TEST(JitAmx, EveryTokenCountOfATile) {
  SKIP_WITHOUT_AMX();
  const int64_t rows = 96 + 5, k = 1024;
  for (QuantType t : kFormats) {
    const auto w = jit_test::random_weights(t, rows, k, 20, false);
    for (int64_t n = 1; n <= 35; ++n) {
      const auto x = jit_test::random_activation(n, k, uint32_t(21 + n));
      std::vector<float> ref(size_t(rows * n));
      reference_kernels().matmul(t, w.data(), rows, k, x.data(), n, ref.data());
      expect_close(ref, amx_direct(t, w, rows, k, x, n),
                   fmt::format("amx {} n={}", quant_name(t), n));
    }
  }
}

TEST(JitAmx, ZeroBlocksAndZeroTokens) {
  SKIP_WITHOUT_AMX();
  for (QuantType t : kFormats) {
    auto w = jit_test::random_weights(t, 64, 1024, 30, true);
    const size_t rb = row_bytes(t, 1024);
    std::fill(w.begin(), w.begin() + ptrdiff_t(rb), uint8_t(0));  // row 0 all zero bytes
    std::fill(w.begin() + ptrdiff_t(rb), w.begin() + ptrdiff_t(rb + quant_traits(t).block_bytes),
              uint8_t(0));  // row 1: first block zero
    auto x = jit_test::random_activation(20, 1024, 31);
    std::fill(x.begin() + 1024, x.begin() + 2048, 0.0f);  // token 1 all zero
    std::fill(x.begin() + 5 * 1024, x.begin() + 5 * 1024 + 256, 0.0f);  // token 5: first 256
    std::vector<float> ref(64 * 20), got(64 * 20, -1.0f);
    reference_kernels().matmul(t, w.data(), 64, 1024, x.data(), 20, ref.data());
    amx_kernels().matmul(t, w.data(), 64, 1024, x.data(), 20, got.data());
    expect_close(ref, got, fmt::format("zeros {}", quant_name(t)));
    for (int64_t tok = 0; tok < 20; ++tok) EXPECT_EQ(got[size_t(tok * 64)], 0.0f);
    for (int r = 0; r < 64; ++r) EXPECT_EQ(got[size_t(64 + r)], 0.0f);
  }
}

TEST(JitAmx, TwoCallsIntoOneBufferOverwrite) {
  SKIP_WITHOUT_AMX();
  for (QuantType t : kFormats) {
    const auto w = jit_test::random_weights(t, 100, 512, 40, true);
    const auto x1 = jit_test::random_activation(24, 512, 41);
    const auto x2 = jit_test::random_activation(24, 512, 42);
    std::vector<float> ref(100 * 24), got(100 * 24);
    reference_kernels().matmul(t, w.data(), 100, 512, x2.data(), 24, ref.data());
    amx_kernels().matmul(t, w.data(), 100, 512, x1.data(), 24, got.data());
    amx_kernels().matmul(t, w.data(), 100, 512, x2.data(), 24, got.data());
    expect_close(ref, got, fmt::format("second call {}", quant_name(t)));
  }
}

TEST(JitAmx, PanelPackingEqualsThePlainTwin) {
  SKIP_WITHOUT_AMX();  // the packing runs AVX-512 code only where AMX is
  for (QuantType t : kFormats)
    for (int n_rows : {16, 5, 1}) {
      const int64_t k = 768;
      const auto w = jit_test::random_weights(t, n_rows, k, uint32_t(60 + n_rows), false);
      const size_t bytes = jit::amx_panel_bytes(t, k);
      std::vector<uint8_t> fast(bytes, 0xAB), ref(bytes, 0xCD);
      const jit::AmxSource src{t, k, w.data(), int64_t(row_bytes(t, k))};
      jit::amx_pack_panel(src, 0, n_rows, fast.data());
      jit::amx_pack_panel_reference(src, 0, n_rows, ref.data());
      EXPECT_EQ(fast, ref) << quant_name(t) << " rows=" << n_rows;
    }
}

TEST(JitAmx, PanelsFromTheDecodeCopyEqualPanelsFromTheFile) {
  SKIP_WITHOUT_AMX();
  // 37 rows: 9 interleaved groups of 4 and a tail row alone; panels starting inside a group.
  const int64_t rows = 37, k = 512;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K}) {
    const auto w = jit_test::random_weights(t, rows, k, 70, false);
    const auto copy = jit::repack_matrix(t, w.data(), rows, k);
    const jit::AmxSource file{t, k, w.data(), int64_t(row_bytes(t, k))};
    const jit::AmxSource packed{t, k, nullptr, 0, copy.get()};
    const size_t bytes = jit::amx_panel_bytes(t, k);
    for (int64_t r0 : {int64_t(0), int64_t(16), int64_t(21), int64_t(32)}) {
      const int n = int(std::min<int64_t>(16, rows - r0));
      std::vector<uint8_t> a(bytes), b(bytes), c(bytes);
      jit::amx_pack_panel(file, r0, n, a.data());
      jit::amx_pack_panel(packed, r0, n, b.data());
      jit::amx_pack_panel_reference(packed, r0, n, c.data());
      EXPECT_EQ(a, b) << quant_name(t) << " r0=" << r0;
      EXPECT_EQ(a, c) << quant_name(t) << " r0=" << r0;
    }
  }
}

TEST(JitAmx, PromptStepsReadTheDecodeCopy) {
  SKIP_WITHOUT_AMX();
  // Through matmul_group with the copy as MatmulTarget::prepared at token counts that take the
  // AMX tiles, the original poisoned so that a read of it would show; fewer tokens read the
  // original (the AVX-512 tiles), checked before the poisoning.
  const int64_t rows = 300 + 3, k = 1024;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K}) {
    auto w = jit_test::random_weights(t, rows, k, 80, false);
    const auto copy = amx_kernels().prepare_weights(t, w.data(), rows, k);
    ASSERT_NE(copy, nullptr) << quant_name(t);
    EXPECT_TRUE(amx_kernels().prefill_reads_prepared(t, k)) << quant_name(t);
    const auto original = w;
    auto check = [&](int64_t n, const char* what) {
      const auto x = jit_test::random_activation(n, k, uint32_t(81 + n));
      std::vector<float> ref(size_t(rows * n)), got(size_t(rows * n));
      reference_kernels().matmul(t, original.data(), rows, k, x.data(), n, ref.data());
      const CpuKernels::MatmulTarget target{t, w.data(), rows, got.data(), copy.get()};
      amx_kernels().matmul_group({&target, 1}, k, x.data(), n);
      expect_close(ref, got, fmt::format("{} {} n={}", what, quant_name(t), n));
    };
    for (int64_t n : {2, 5}) check(n, "few tokens");
    std::fill(w.begin(), w.end(), uint8_t(0xFF));
    for (int64_t n : {40, 67}) check(n, "from the copy");
  }
}

TEST(JitAmx, EmissionIsDeterministic) {
  SKIP_WITHOUT_AMX();
  for (QuantType t : kFormats) {
    const jit::AmxKey key{t, 2048, 16}, other{t, 2048, 5};
    EXPECT_EQ(jit::amx_kernel_code(key), jit::amx_kernel_code(key)) << quant_name(t);
    EXPECT_NE(jit::amx_kernel_code(key), jit::amx_kernel_code(other)) << quant_name(t);
  }
}

TEST(JitAmx, RefusesWhatItDoesNotTake) {
  EXPECT_FALSE(jit::amx_supported(QuantType::Q5_K, 2048));
  EXPECT_FALSE(jit::amx_supported(QuantType::Q4_K, 96));
  EXPECT_FALSE(jit::amx_supported(QuantType::Q8_0, 96));
  EXPECT_TRUE(jit::amx_supported(QuantType::Q8_0, 128));
  if (!jit::amx_usable()) {
    EXPECT_ANY_THROW(JitKernels(jit::Isa::Avx512Vnni, true));
  }
}

}  // namespace
}  // namespace jitllm
