// Row-interleaved decode copies (jit_repack.h) and the matvec kernels that read them: the copy's
// bytes against the layout as documented (re-derived here field by field), and the packed
// kernels' outputs bit for bit against the GGUF-layout kernels' (themselves checked against the
// reference and, for Q8_0, ggml's float order in jit_matvec_test.cpp) at real model shapes,
// ragged row counts (tail rows stored as groups of one), all-zero blocks, two calls into one
// buffer, every ISA level this CPU runs; plus emission determinism and the huge-page buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "jit_test_data.h"
#include "backend/cpu/jit_matvec.h"
#include "backend/cpu/jit_repack.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/huge_buffer.h"
#include "core/thread_pool.h"
#include "quant/formats.h"

namespace jitllm {
namespace {

using jit::Isa;

const QuantType kFormats[] = {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0};

std::vector<float> run(Isa isa, QuantType t, const uint8_t* w, const jit::RepackedMatrix* packed,
                       int64_t rows, int64_t k, const std::vector<float>& x, float fill) {
  std::vector<float> out(size_t(rows), fill);
  const jit::MatvecTarget tg{t, w, rows, out.data(), packed};
  jit::matvec_group(isa, {&tg, 1}, k, x.data(), ThreadPool::global());
  return out;
}

// Packed kernel == GGUF-layout kernel, bit for bit, on every ISA.
void check_same(QuantType t, const std::vector<uint8_t>& w, int64_t rows, int64_t k,
                uint32_t seed) {
  const auto packed = jit::repack_matrix(t, w.data(), rows, k, &ThreadPool::global());
  const auto x = jit_test::random_activation(1, k, seed);
  for (Isa isa : jit_test::cpu_isas()) {
    const auto want = run(isa, t, w.data(), nullptr, rows, k, x, 1.0f);
    const auto got = run(isa, t, w.data(), packed.get(), rows, k, x, -1.0f);
    size_t differ = 0;
    for (int64_t r = 0; r < rows; ++r)
      if (std::memcmp(&want[size_t(r)], &got[size_t(r)], 4) != 0) ++differ;
    EXPECT_EQ(differ, 0u) << quant_name(t) << " " << rows << "x" << k << " " << jit::isa_name(isa);
  }
}

TEST(JitRepack, BytesFollowTheDocumentedLayout) {
  // Field offsets as jit_repack.h's table states them, per format: {hdr_from, hdr, body_from,
  // body, side_from, side}.
  struct Want {
    QuantType t;
    int hdr_from, hdr, body_from, body, side_from, side;
  };
  const Want wants[] = {{QuantType::Q8_0, 0, 0, 2, 32, 0, 2},
                        {QuantType::Q4_K, 0, 16, 16, 128, 0, 0},
                        {QuantType::Q6_K, 192, 16, 0, 192, 208, 2}};
  for (const Want& f : wants)
    for (int64_t rows : {1, 4, 7, 13}) {
      const int64_t k = f.t == QuantType::Q8_0 ? 96 : 512;
      const int64_t nb = k / quant_traits(f.t).block_elems;
      const size_t bb = quant_traits(f.t).block_bytes;
      const auto w = jit_test::random_weights(f.t, rows, k, uint32_t(rows), false);
      const auto m = jit::repack_matrix(f.t, w.data(), rows, k);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(m->main) % 64, 0u);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(m->side) % 64, 0u);
      EXPECT_EQ(m->main_row_bytes, nb * (f.hdr + f.body));
      EXPECT_EQ(m->side_row_bytes, nb * f.side);
      size_t bad = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t g = r < rows / 4 * 4 ? 4 : 1, r0 = r / g * g, i = r - r0;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* src = w.data() + size_t(r) * row_bytes(f.t, k) + size_t(b) * bb;
          const uint8_t* rec = m->main + r0 * m->main_row_bytes + b * g * (f.hdr + f.body);
          const uint8_t* side = m->side + r0 * m->side_row_bytes + b * g * f.side;
          if (std::memcmp(rec + i * f.hdr, src + f.hdr_from, size_t(f.hdr)) != 0) ++bad;
          if (std::memcmp(rec + g * f.hdr + i * f.body, src + f.body_from, size_t(f.body)) != 0)
            ++bad;
          if (std::memcmp(side + i * f.side, src + f.side_from, size_t(f.side)) != 0) ++bad;
        }
      }
      EXPECT_EQ(bad, 0u) << quant_name(f.t) << " rows " << rows;
    }
}

TEST(JitRepack, ModelShapesMatchTheGgufKernels) {
  for (QuantType t : kFormats) {
    check_same(t, jit_test::random_weights(t, 2048, 2048, 1, false), 2048, 2048, 2);
    check_same(t, jit_test::random_weights(t, 8192, 2048, 3, false), 8192, 2048, 4);
    check_same(t, jit_test::random_weights(t, 2048, 8192, 5, false), 2048, 8192, 6);
  }
}

TEST(JitRepack, VocabShapesMatchTheGgufKernels) {
  // The 1B output heads: Q6_K in Q4_K_M, Q8_0 in Q8_0.
  for (QuantType t : {QuantType::Q6_K, QuantType::Q8_0})
    check_same(t, jit_test::random_weights(t, 128256, 2048, 7, false), 128256, 2048, 8);
}

TEST(JitRepack, RaggedRowsAndOddBlockCounts) {
  for (QuantType t : kFormats)
    for (int64_t rows : {1, 2, 3, 5, 6, 7, 17, 2048 + 13})
      check_same(t, jit_test::random_weights(t, rows, 512, uint32_t(rows), false), rows, 512, 9);
  check_same(QuantType::Q8_0, jit_test::random_weights(QuantType::Q8_0, 37, 96, 10, false), 37, 96, 11);
}

TEST(JitRepack, ZeroBlocksAndTwoCallsIntoOneBuffer) {
  for (QuantType t : kFormats) {
    const int64_t k = 1024, rows = 70;
    auto w = jit_test::random_weights(t, rows, k, 20, false);
    const size_t rb = row_bytes(t, k), bb = quant_traits(t).block_bytes;
    std::fill(w.begin(), w.begin() + ptrdiff_t(rb), uint8_t(0));  // row 0 all zero
    std::fill(w.begin() + ptrdiff_t(rb), w.begin() + ptrdiff_t(rb + bb), uint8_t(0));  // row 1, block 0
    std::fill(w.end() - ptrdiff_t(bb), w.end(), uint8_t(0));  // the tail row's last block
    const auto packed = jit::repack_matrix(t, w.data(), rows, k);
    const auto x1 = jit_test::random_activation(1, k, 21), x2 = jit_test::random_activation(1, k, 22);
    for (Isa isa : jit_test::cpu_isas()) {
      const auto want = run(isa, t, w.data(), nullptr, rows, k, x2, 0.0f);
      std::vector<float> got(size_t(rows), 5.0f);
      const jit::MatvecTarget tg{t, w.data(), rows, got.data(), packed.get()};
      jit::matvec_group(isa, {&tg, 1}, k, x1.data(), ThreadPool::global());
      jit::matvec_group(isa, {&tg, 1}, k, x2.data(), ThreadPool::global());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0)
          << quant_name(t) << " " << jit::isa_name(isa);
      EXPECT_EQ(got[0], 0.0f);
      const std::vector<float> zx(size_t(k), 0.0f);
      for (float v : run(isa, t, w.data(), packed.get(), rows, k, zx, -1.0f)) EXPECT_EQ(v, 0.0f);
    }
  }
}

TEST(JitRepack, GroupThroughJitKernelsUsesThePreparedCopy) {
  // q/k/v of a Q4_K_M layer (v in Q6_K, 517 rows: a ragged tail), prepared by the kernels as the
  // model's CpuOps does; the prepared copy alone is read (the originals are poisoned after).
  const int64_t k = 2048;
  auto wq = jit_test::random_weights(QuantType::Q4_K, 2048, k, 30, false);
  auto wv = jit_test::random_weights(QuantType::Q6_K, 517, k, 31, false);
  const auto x = jit_test::random_activation(1, k, 32);
  for (Isa isa : jit_test::cpu_isas()) {
    const JitKernels kern(isa);
    std::vector<float> rq(2048), rv(517), q(2048, 3.0f), v(517, 3.0f);
    const CpuKernels::MatmulTarget plain[] = {{QuantType::Q4_K, wq.data(), 2048, rq.data()},
                                              {QuantType::Q6_K, wv.data(), 517, rv.data()}};
    kern.matmul_group(plain, k, x.data(), 1);
    const auto pq = kern.prepare_weights(QuantType::Q4_K, wq.data(), 2048, k);
    const auto pv = kern.prepare_weights(QuantType::Q6_K, wv.data(), 517, k);
    ASSERT_TRUE(pq && pv);
    auto poisoned_q = wq, poisoned_v = wv;
    std::fill(poisoned_q.begin(), poisoned_q.end(), uint8_t(0x77));
    std::fill(poisoned_v.begin(), poisoned_v.end(), uint8_t(0x77));
    const CpuKernels::MatmulTarget packed[] = {
        {QuantType::Q4_K, poisoned_q.data(), 2048, q.data(), pq.get()},
        {QuantType::Q6_K, poisoned_v.data(), 517, v.data(), pv.get()}};
    kern.matmul_group(packed, k, x.data(), 1);
    EXPECT_EQ(std::memcmp(rq.data(), q.data(), q.size() * 4), 0) << jit::isa_name(isa);
    EXPECT_EQ(std::memcmp(rv.data(), v.data(), v.size() * 4), 0) << jit::isa_name(isa);
    EXPECT_EQ(kern.prepare_weights(QuantType::F16, wq.data(), 16, k), nullptr);
  }
}

TEST(JitRepack, MismatchedCopyAndBadInputsAreErrors) {
  const int64_t k = 512;
  const auto w = jit_test::random_weights(QuantType::Q8_0, 8, k, 40, false);
  const auto m = jit::repack_matrix(QuantType::Q8_0, w.data(), 8, k);
  std::vector<float> out(9);
  const auto x = jit_test::random_activation(1, k, 41);
  const jit::MatvecTarget tg{QuantType::Q8_0, w.data(), 9, out.data(), m.get()};  // 9 != 8 rows
  EXPECT_THROW(jit::matvec_group(jit::cpu_best_isa(), {&tg, 1}, k, x.data(), ThreadPool::global()),
               Error);
  EXPECT_THROW(jit::repack_matrix(QuantType::F16, w.data(), 8, k), Error);
  EXPECT_THROW(jit::repack_matrix(QuantType::Q8_0, w.data(), 8, 100), Error);
  EXPECT_THROW(jit::repack_matrix(QuantType::Q8_0, w.data(), 0, k), Error);
  EXPECT_THROW(jit::MatvecKernel({QuantType::Q8_0, k, 2, jit::cpu_best_isa(), true}), Error);
}

TEST(JitRepack, EmissionIsDeterministic) {
  for (QuantType t : kFormats)
    for (Isa isa : jit_test::cpu_isas()) {
      const jit::MatvecKey key{t, 2048, jit::kRepackGroup, isa, true};
      const jit::MatvecKernel a(key), b(key);
      EXPECT_EQ(a.code(), b.code()) << quant_name(t) << " " << jit::isa_name(isa);
      EXPECT_NE(a.code(), jit::MatvecKernel({t, 2048, jit::kRepackGroup, isa, false}).code());
    }
}

TEST(HugeBuffer, AlignedZeroedAndInHugePagesWhereTheKernelAllowsThem) {
  const size_t bytes = 5 * HugeBuffer::kHugePage + 123;
  HugeBuffer b(bytes);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % HugeBuffer::kHugePage, 0u);
  EXPECT_EQ(b.size(), bytes);
  size_t nonzero = 0;
  for (size_t i = 0; i < bytes; i += 4096) nonzero += b.data()[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  std::memset(b.data(), 1, bytes);
  std::string thp;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), thp);
  if (thp.find("[never]") == std::string::npos && !thp.empty())
    EXPECT_GT(b.huge_bytes(), 0) << "THP: " << thp;
  HugeBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.size(), bytes);
  EXPECT_EQ(HugeBuffer(0).data(), nullptr);
}

}  // namespace
}  // namespace jitllm
