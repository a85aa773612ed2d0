// The DQ-MMA generator (batched decode on f16 tensor cores, dq_mma.h) without a card: the
// variants the engine launches compile under NVRTC for sm_90 with no register spills, and bad
// specs are refused with a jitllm::Error. Runs in the CPU suite wherever the toolkit was found.
#include <gtest/gtest.h>

#include "backend/cuda/compiler.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/dq_mma.h"
#include "core/error.h"
#include "nvrtc_test_util.h"

namespace jitllm::cuda {
namespace {

TEST(DqMmaNoGpu, EngineVariantsCompileForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  auto expect_compiles = [&](const DqMmaSpec& spec) {
    EXPECT_GT(nvrtc_compile(dq_mma_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  };
  // Each kind alone at the 1B/8B row lengths, with the smallest and largest activation tiles and
  // the tile counts per warp the host picks for them (2 up to 4 tiles of 8, then 1).
  for (WeightKind kind : {WeightKind::Q4_K, WeightKind::Q6_K, WeightKind::Q8_0}) {
    for (int nt8 : {1, 4, 8}) {
      DqMmaSpec spec;
      spec.kinds[0] = kind;
      spec.k = nt8 == 1 ? 2048 : 14336;
      spec.nt8 = nt8;
      spec.mt = nt8 <= 4 ? 2 : 1;
      for (bool splitk : {false, true}) {  // warps own rows / warps split the row length
        spec.splitk = splitk;
        const std::vector<char> cubin = nvrtc_compile(dq_mma_source(spec), spec.name(), opts);
        EXPECT_GT(cubin.size(), 1000u) << spec.name();
      }
    }
  }
  // q/k/v of Q4_K_M in one launch (mixed kinds), at 1 and 8 warps per CTA.
  DqMmaSpec spec;
  spec.kinds[0] = WeightKind::Q4_K;
  spec.kinds[1] = WeightKind::Q4_K;
  spec.kinds[2] = WeightKind::Q6_K;
  spec.nseg = 3;
  spec.k = 4096;
  spec.nt8 = 4;
  for (int warps : {1, 8}) {
    spec.warps = warps;
    expect_compiles(spec);
  }
  EXPECT_EQ(dq_mma_smem_bytes(spec), size_t(2 * 32 * 288 * 2));
  spec.splitk = true;  // the reduction tile: 32 activation rows x (16 MT + 4) floats
  EXPECT_EQ(dq_mma_smem_bytes(spec), size_t(32 * (16 * 2 + 4) * 4));
  expect_compiles(spec);
  EXPECT_GT(nvrtc_compile(q8_to_f16_source(), "q8_to_f16", opts).size(), 500u);
  // The SwiGLU epilogue (gate, up of one kind; half the warps on each), 1..8 activation tiles.
  for (int nt8 : {1, 4, 8}) {
    DqMmaSpec sw;
    sw.nseg = 2;
    sw.k = 4096;
    sw.nt8 = nt8;
    sw.mt = 1;
    sw.warps = nt8 == 8 ? 4 : 8;
    sw.swiglu = true;
    expect_compiles(sw);
  }
  // Rings of 3 and 4 steps in both modes (the split one at 1 tile per warp), 8B gate / q/o.
  for (int stages : {3, 4}) {
    DqMmaSpec r;
    r.k = 4096;
    r.nt8 = 4;
    r.mt = 1;
    r.stages = stages;
    for (bool splitk : {false, true}) {
      r.splitk = splitk;
      expect_compiles(r);
    }
    r.splitk = false;
    EXPECT_EQ(dq_mma_smem_bytes(r), size_t(stages) * 32 * 288 * 2);
  }
}

TEST(DqMmaNoGpu, UnsupportedKindsAndShapesAreRefused) {
  DqMmaSpec spec;
  spec.k = 4096;
  spec.kinds[0] = WeightKind::F16;
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.kinds[0] = WeightKind::Q8_0;
  spec.k = 4000;  // not whole steps of 256
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.k = 4096;
  spec.nt8 = 9;  // 72 activation rows: more than one launch takes
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.nt8 = 1;
  spec.mt = 3;
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.mt = 1;
  spec.warps = 9;
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.warps = 4;
  spec.stages = 5;
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.stages = 2;
  spec.swiglu = true;  // one matrix
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.nseg = 2;
  spec.kinds[1] = WeightKind::Q6_K;  // gate and up of two kinds
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.kinds[1] = spec.kinds[0];
  spec.warps = 3;  // halves of warps
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.warps = 6;  // 48 rows per CTA: not whole q8 blocks
  EXPECT_THROW(dq_mma_source(spec), Error);
  spec.warps = 4;
  spec.splitk = true;
  EXPECT_THROW(dq_mma_source(spec), Error);
  EXPECT_TRUE(dq_mma_supports(WeightKind::Q8_0, 256));
  EXPECT_FALSE(dq_mma_supports(WeightKind::Q8_0, 128));
  EXPECT_FALSE(dq_mma_supports(WeightKind::Q5_K, 4096));
  EXPECT_EQ(DqMma::f16_bytes(13, 4096), size_t(16 * 4096 * 2));
}

}  // namespace
}  // namespace jitllm::cuda
