// When decode attention takes the split-K kernels (no card needed): the cost model
// (CudaKernels::split_attention_pays) at the shapes timed on the H200 on 2026-12-02, its shape over
// context length, and the JITLLM_CUDA_SPLITK setting.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jitllm::cuda {
namespace {

constexpr int kH200Sms = 132;
constexpr int kSplits = 32;
constexpr int kLlamaHeads = 32;  // Llama-3.1-8B and Llama-3.2-1B query heads

bool pays(int64_t rows, int64_t n_kv) {
  return CudaKernels::split_attention_pays(rows, kLlamaHeads, n_kv, kH200Sms, kSplits);
}

TEST(SplitChoiceNoGpu, TakesTheSplitWhereTheH200MeasuredItFaster) {
  // jitllm batched, 4096-token prompts: one 8B session 58.7 -> 235 tok/s with splits; four 1B
  // sessions 491 -> 1440 tok/s.
  EXPECT_TRUE(pays(1, 4096 + 64));
  EXPECT_TRUE(pays(4, 4096 + 64));
  // 128-token prompts: splits cost 16% at one session and 14% at 32.
  EXPECT_FALSE(pays(1, 128 + 128));
  EXPECT_FALSE(pays(32, 128 + 128));
}

TEST(SplitChoiceNoGpu, OneSessionSwitchesOnceAsItsContextGrows) {
  // Never for rows of one chunk (256 keys); once the split pays for one session it keeps paying
  // up to the longest context (a graph per choice, so flapping would recapture).
  EXPECT_FALSE(pays(1, 256));
  int64_t first = -1;
  for (int64_t n_kv = 1; n_kv <= 131072; ++n_kv) {
    const bool p = pays(1, n_kv);
    if (p && first < 0) first = n_kv;
    if (first >= 0) ASSERT_TRUE(p) << n_kv << " keys, after switching at " << first;
  }
  EXPECT_GT(first, 256);
  EXPECT_LE(first, 2048);
}

TEST(SplitChoiceNoGpu, NothingToSplitWithoutHeadsSmsOrSplits) {
  EXPECT_FALSE(CudaKernels::split_attention_pays(1, 0, 8192, kH200Sms, kSplits));  // no attention yet
  EXPECT_FALSE(CudaKernels::split_attention_pays(1, kLlamaHeads, 8192, 0, kSplits));
  EXPECT_FALSE(CudaKernels::split_attention_pays(1, kLlamaHeads, 8192, kH200Sms, 1));
  EXPECT_FALSE(CudaKernels::split_attention_pays(0, kLlamaHeads, 8192, kH200Sms, kSplits));
}

TEST(SplitChoiceNoGpu, SplitkSettingIsAutoNeverOrACount) {
  EXPECT_EQ(CudaOps::splitk_setting(nullptr), -1);
  EXPECT_EQ(CudaOps::splitk_setting(""), -1);
  EXPECT_EQ(CudaOps::splitk_setting("auto"), -1);
  EXPECT_EQ(CudaOps::splitk_setting("0"), 0);
  EXPECT_EQ(CudaOps::splitk_setting("8"), 8);
  EXPECT_EQ(CudaOps::splitk_setting("1024"), 1024);
  for (const char* bad : {"-1", "1025", "eight", "8x", "on"}) {
    try {
      CudaOps::splitk_setting(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("JITLLM_CUDA_SPLITK"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace jitllm::cuda
