// The f16 DQ-MMA kernel (dq_mma.h) on the 8B shapes against the CPU reference (sampled rows) and
// the dp4a matvec (every output): n = 8..64, zero blocks, ragged tiles, the residual epilogue,
// repeated calls bitwise equal; its launch shapes and options against each other (the same bits
// where the arithmetic is the same: grouped vs single launches, tiles per warp, rings, e4m3
// unpacking; within 1e-5 where only the f32 order differs).
// Label gpu: runs on the device machine, skipped where no card is usable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/mmq.h"
#include "cuda_test_util.h"
#include "tc_matmul_check.h"

namespace jitllm::cuda::test {
namespace {

TEST(CudaDqMma, EightBShapes) {
  check_mmq({QuantType::Q4_K, 4096, 4096}, {8, 13, 32, 64}, 0, true);
  check_mmq({QuantType::Q4_K, 14336, 4096}, {8, 32}, 0, true);
  check_mmq({QuantType::Q4_K, 4096, 14336}, {13, 64}, 0, true);
  check_mmq({QuantType::Q6_K, 4096, 4096}, {8, 13, 32, 64}, 0, true);
  check_mmq({QuantType::Q6_K, 4096, 14336}, {32, 40}, 0, true);
  check_mmq({QuantType::Q8_0, 4096, 4096}, {8, 13, 32, 64}, 0, true);
  check_mmq({QuantType::Q8_0, 14336, 4096}, {32}, 0, true);
}

TEST(CudaDqMma, HeadShapeZeroBlocksAndOddRowCounts) {
  check_mmq({QuantType::Q6_K, 128256, 4096}, {8, 64}, 0, true);
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0})
    check_mmq({t, 1000, 2048}, {8, 13, 57}, 3, true);  // every third block zero, a ragged last CTA
  // Rings of 3 and 4 steps in both launch shapes: 8 steps (2048) and 56 (14336, not a multiple
  // of the ring), the wide shape's staging ring.
  for (int stages : {3, 4}) {
    mmq().dq().tune(0, 0, -1, stages);
    check_mmq({QuantType::Q4_K, 1000, 2048}, {13, 57}, 3, true);
    check_mmq({QuantType::Q6_K, 4096, 14336}, {32}, 0, true);
    check_mmq({QuantType::Q4_K, 14336, 4096}, {32}, 0, true);
    mmq().dq().tune(0, 0, 0, stages);  // 1000 rows with the warps owning rows
    check_mmq({QuantType::Q8_0, 1000, 2048}, {8, 64}, 3, true);
  }
  mmq().dq().tune(0, 0, -1);
}

TEST(CudaDqMma, E4m3UnpackingGivesTheSameBits) {
  // Q4_K nibbles through e4m3 (q / 512, the scales times 512): the same products, so the same
  // bits as the default unpacking in both launch shapes and grouped with Q6_K; weights with a
  // block scale |d| > 2 keep the default (512 d sc could leave f16's range).
  JITLLM_REQUIRE_GPU();
  if (G->device->cc_major() * 10 + G->device->cc_minor() < 89) GTEST_SKIP() << "cvt.f16x2.e4m3x2 needs sm_89";
  // Weights are checked for small scales at upload only when the unpacking is asked for.
  const char* was = std::getenv("JITLLM_CUDA_DQ_E4M3");
  const std::string saved = was ? was : "";
  setenv("JITLLM_CUDA_DQ_E4M3", "1", 1);
  const QkvCase c(G, 32, 6);
  const int64_t n = c.n;
  const auto& rows = QkvCase::rows;
  DeviceBuffer xh(DqMma::f16_bytes(n, QkvCase::k));
  for (int splitk : {-1, 0}) {  // the default for these rows (split warps), then warps owning rows
    std::vector<std::vector<float>> runs[2];
    for (int e : {0, 1}) {
      mmq().dq().tune(0, 0, splitk);
      mmq().dq().tune_e4m3(e);
      std::vector<DeviceBuffer> outs;
      MatmulSeg segs[3];
      for (int i = 0; i < 3; ++i) {
        outs.emplace_back(size_t(n * rows[i]) * 4);
        segs[i] = MatmulSeg{&c.dw[size_t(i)], outs.back().get(), 0};
      }
      ASSERT_EQ(mmq().dq().use_e4m3(segs), e == 1);
      mmq().matmul_group(segs, n, c.qb, *G->stream, xh.get());
      G->stream->sync();
      for (int i = 0; i < 3; ++i) runs[e].push_back(download(outs[size_t(i)].get(), size_t(n * rows[i])));
    }
    for (int i = 0; i < 3; ++i) EXPECT_EQ(runs[1][size_t(i)], runs[0][size_t(i)]) << "segment " << i << " splitk=" << splitk;
  }
  check_mmq({QuantType::Q4_K, 14336, 4096}, {32}, 0, true);  // the wide shape against the references
  // A block scale of 3: not small, so the default unpacking even when asked for.
  std::mt19937 rng(7);
  std::vector<uint8_t> w = random_weights(QuantType::Q4_K, 64, 256, rng, 0);
  const uint16_t three = 0x4200;  // 3.0 as f16
  std::memcpy(w.data() + 144 * 5, &three, 2);
  const DeviceWeight big = DeviceWeight::upload(pack_weight(QuantType::Q4_K, w.data(), 64, 256));
  EXPECT_FALSE(big.q4k_small_scales);
  const MatmulSeg one{&big, 0, 0};
  EXPECT_FALSE(mmq().dq().use_e4m3(std::span<const MatmulSeg>(&one, 1)));
  EXPECT_TRUE(c.dw[0].q4k_small_scales);
  unsetenv("JITLLM_CUDA_DQ_E4M3");
  const std::vector<uint8_t> small = random_weights(QuantType::Q4_K, 64, 256, rng, 0);  // |d| < 0.004
  EXPECT_FALSE(DeviceWeight::upload(pack_weight(QuantType::Q4_K, small.data(), 64, 256)).q4k_small_scales)
      << "not checked, so not used, unless asked for";
  if (was) setenv("JITLLM_CUDA_DQ_E4M3", saved.c_str(), 1);
  mmq().dq().tune_e4m3(-1);
  mmq().dq().tune(0, 0, -1);
}

TEST(CudaDqMma, GroupedMixedKindsAndLaunchShapesGiveTheSameBits) {
  // The 8B q/k/v of Q4_K_M in one launch against single launches, then every tile/warp shape:
  // each row's MMAs run in the same order whatever the launch shape, so the bits are the same.
  JITLLM_REQUIRE_GPU();
  const QkvCase c(G, 29, 6);
  const int64_t n = c.n, k = QkvCase::k;
  const auto& rows = QkvCase::rows;
  const auto& dw = c.dw;
  const Q8Buffers qb = c.qb;
  DeviceBuffer xh(DqMma::f16_bytes(n, k));
  std::vector<DeviceBuffer> grouped;
  MatmulSeg segs[3];
  for (int i = 0; i < 3; ++i) {
    grouped.emplace_back(size_t(n * rows[i]) * 4);
    segs[i] = MatmulSeg{&dw[size_t(i)], grouped.back().get(), 0};
  }
  ASSERT_TRUE(Mmq::use_dq(segs));
  mmq().matmul_group(segs, n, qb, *G->stream, xh.get());
  G->stream->sync();
  std::vector<std::vector<float>> want;
  for (int i = 0; i < 3; ++i) want.push_back(download(grouped[size_t(i)].get(), size_t(n * rows[i])));
  // Launch shapes of the same arithmetic: any tiles per warp at the default split of the row
  // length (the default warps); without the split, any tiles and warps. Across the two modes
  // only the order of the f32 sums differs.
  // Rings of 3 or 4 steps change when the weights arrive, not the arithmetic.
  struct V { int mt, warps, splitk, stages; bool same; };
  for (const V v : {V{0, 0, -1, 0, true}, V{1, 4, 1, 0, true}, V{2, 4, 1, 0, true}, V{1, 4, 1, 3, true},
                    V{0, 0, -1, 4, true}, V{1, 1, 0, 0, false}, V{2, 8, 0, 0, false}, V{1, 8, 1, 0, false},
                    V{2, 2, 1, 0, false}}) {
    mmq().dq().tune(v.mt, v.warps, v.splitk, v.stages);
    std::vector<std::vector<float>> got;
    for (int i = 0; i < 3; ++i) {
      DeviceBuffer one_out(size_t(n * rows[i]) * 4);
      const MatmulSeg one{&dw[size_t(i)], one_out.get(), 0};
      mmq().matmul_group(std::span<const MatmulSeg>(&one, 1), n, qb, *G->stream, xh.get());
      G->stream->sync();
      got.push_back(download(one_out.get(), size_t(n * rows[i])));
      if (v.same)
        EXPECT_EQ(got.back(), want[size_t(i)]) << "segment " << i << " alone, mt=" << v.mt;
      else
        EXPECT_LT(rel_error(got.back(), want[size_t(i)]), 1e-5) << "segment " << i << " mt=" << v.mt
                                                               << " warps=" << v.warps << " splitk=" << v.splitk
                                                               << " stages=" << v.stages;
    }
    if (!v.same) {  // a second shape of the same mode gives its own bits again
      DeviceBuffer again(size_t(n * rows[0]) * 4);
      const MatmulSeg one{&dw[0], again.get(), 0};
      mmq().matmul_group(std::span<const MatmulSeg>(&one, 1), n, qb, *G->stream, xh.get());
      G->stream->sync();
      EXPECT_EQ(download(again.get(), size_t(n * rows[0])), got[0]);
    }
  }
  mmq().dq().tune(0, 0, -1);
  std::printf("[ cuda     ] dqmma grouped q/k/v == single launches (bitwise), 9 launch shapes\n");
}

}  // namespace
}  // namespace jitllm::cuda::test
