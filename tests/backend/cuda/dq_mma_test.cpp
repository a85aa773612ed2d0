// The f16 DQ-MMA kernel (dq_mma.h) on the 8B shapes against the CPU reference (sampled rows) and
// the dp4a matvec (every output): n = 8..64, zero blocks, ragged tiles, the residual epilogue,
// repeated calls bitwise equal; its launch shapes and options against each other (the same bits
// where the arithmetic is the same: grouped vs single launches, tiles per warp, rings; within
// 1e-5 where only the f32 order differs).
// Label gpu: runs on the device machine, skipped where no card is usable.
#include <gtest/gtest.h>

#include <cstdio>
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
