// The MMQ generator (batched decode on int8 tensor cores, mmq.h) without a card: every variant
// the engine and the benches launch compiles under NVRTC for sm_90, and bad specs are refused
// with a jitllm::Error. Runs in the CPU suite wherever the toolkit was found at build time.
#include <gtest/gtest.h>

#include "backend/cuda/compiler.h"
#include "nvrtc_test_util.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/mmq.h"
#include "core/error.h"

namespace jitllm::cuda {
namespace {

TEST(MmqNoGpu, EveryVariantCompilesForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  // Single matrices of each kind at the 1B/8B row lengths, the smallest and largest row tiles.
  for (WeightKind kind : {WeightKind::Q4_K, WeightKind::Q6_K, WeightKind::Q8_0}) {
    for (int nt8 : {1, 8}) {
      MmqSpec spec;
      spec.kinds[0] = kind;
      spec.k = nt8 == 1 ? 2048 : 14336;
      spec.nt8 = nt8;
      const std::vector<char> cubin = nvrtc_compile(mmq_source(spec), spec.name(), opts);
      EXPECT_GT(cubin.size(), 1000u) << spec.name();
    }
  }
  // q/k/v of Q4_K_M in one launch (mixed kinds), the bench's tile and warp variants.
  MmqSpec spec;
  spec.kinds[0] = WeightKind::Q4_K;
  spec.kinds[1] = WeightKind::Q4_K;
  spec.kinds[2] = WeightKind::Q6_K;
  spec.nseg = 3;
  spec.k = 4096;
  spec.nt8 = 4;
  for (auto [mt, warps] : {std::pair{1, 4}, std::pair{2, 8}, std::pair{4, 16}}) {
    spec.mt = mt;
    spec.warps = warps;
    EXPECT_GT(nvrtc_compile(mmq_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  }
}

TEST(MmqNoGpu, UnsupportedKindsAndShapesAreRefused) {
  MmqSpec spec;
  spec.k = 4096;
  spec.kinds[0] = WeightKind::F16;
  EXPECT_THROW(mmq_source(spec), Error);
  spec.kinds[0] = WeightKind::Q4_K;
  spec.k = 4000;  // not whole super-blocks
  EXPECT_THROW(mmq_source(spec), Error);
  spec.k = 4096;
  spec.nt8 = 9;  // 72 activation rows: more than one launch takes
  EXPECT_THROW(mmq_source(spec), Error);
  spec.nt8 = 1;
  spec.mt = 5;
  EXPECT_THROW(mmq_source(spec), Error);
  EXPECT_TRUE(mmq_supports(WeightKind::Q8_0, 128));
  EXPECT_FALSE(mmq_supports(WeightKind::Q8_0, 96));
  EXPECT_FALSE(mmq_supports(WeightKind::BF16, 4096));
}

}  // namespace
}  // namespace jitllm::cuda
