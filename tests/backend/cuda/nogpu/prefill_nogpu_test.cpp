// The prefill kernels' checks that need no card (CPU suite, wherever the toolkit was found): the
// GEMM helper kernels and the flash-attention kernel compile under NVRTC for sm_90, unsupported
// head sizes are refused with a jitllm::Error, and batches are cut into flash tiles of one
// sequence each.
#include <gtest/gtest.h>

#include "backend/cuda/compiler.h"
#include "nvrtc_test_util.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/gemm.h"
#include "core/error.h"

namespace jitllm::cuda {
namespace {

TEST(CudaPrefillNoGpu, SourcesCompileForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  EXPECT_GT(nvrtc_compile(gemm_source(), "gemm kernels", opts).size(), 1000u);
  for (int hd : {64, 80, 128})
    EXPECT_GT(nvrtc_compile(flash_attention_source(hd), "flash attention", opts).size(), 1000u) << hd;
}

TEST(CudaPrefillNoGpu, UnsupportedHeadSizesAreRefused) {
  EXPECT_FALSE(flash_supported(128, false));  // f32 KV keeps the paged kernel
  EXPECT_FALSE(flash_supported(72, true));
  EXPECT_FALSE(flash_supported(256, true));
  EXPECT_TRUE(flash_supported(64, true));
  EXPECT_THROW(flash_attention_source(72), Error);
}

TEST(CudaPrefillNoGpu, FlashTilesFollowSequences) {
  const std::vector<int32_t> seq = {0, 0, 0, 1, 1, 0};
  const std::vector<FlashTile> t = flash_tiles(seq);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].row0, 0);
  EXPECT_EQ(t[0].count, 3);
  EXPECT_EQ(t[1].row0, 3);
  EXPECT_EQ(t[1].count, 2);
  EXPECT_EQ(t[2].row0, 5);
  EXPECT_EQ(t[2].count, 1);
  const std::vector<FlashTile> u = flash_tiles(std::vector<int32_t>(150, 4));
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[1].row0, 64);
  EXPECT_EQ(u[2].row0, 128);
  EXPECT_EQ(u[2].count, 22);
  EXPECT_TRUE(flash_tiles({}).empty());
}

TEST(CudaPrefillNoGpu, GemmSlicesBoundTheScratch) {
  // 128256 x 4096 (the 8B head): 16384-row slices of 64 Mi halves; small matrices: one slice.
  EXPECT_EQ(Gemm::slice_rows(128256, 4096), 16384);
  EXPECT_EQ(Gemm::slice_rows(4096, 4096), 4096);
  EXPECT_LE(Gemm::slice_rows(14336, 14336) * 14336, Gemm::kSliceElems);
  EXPECT_EQ(Gemm::slice_rows(1000, int64_t(1) << 30), 128);  // never fewer than 128 rows
}

}  // namespace
}  // namespace jitllm::cuda
