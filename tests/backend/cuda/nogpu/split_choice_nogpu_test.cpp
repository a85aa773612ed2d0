// When decode attention takes the split-K kernels (no card needed): the cost model
// (CudaKernels::attention_splits_that_pay) at the shapes timed on the H200 on 2026-12-02, its
// shape over context length, and the JITLLM_CUDA_SPLITK setting.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jitllm::cuda {
namespace {

constexpr int kH200Sms = 132;
constexpr int kSplits = 32;
constexpr int kLlamaHeads = 32;  // Llama-3.1-8B and Llama-3.2-1B query heads

int splits(int64_t rows, int64_t n_kv, int heads = kLlamaHeads, int sms = kH200Sms) {
  return CudaKernels::attention_splits_that_pay(rows, heads, n_kv, sms, kSplits);
}

TEST(SplitChoiceNoGpu, TakesTheSplitWhereTheH200MeasuredItFaster) {
  // jitllm batched, 4096-token prompts and 64 steps: one 8B session 58.7 -> 235 tok/s with up to
  // 32 splits, four 1B sessions 491 -> 1440 tok/s.
  EXPECT_EQ(splits(1, 4096 + 64), 32);
  EXPECT_GE(splits(4, 4096 + 64), 2);
  // 128-token prompts and 128 steps: splits cost 16% at one session and 14% at 32.
  EXPECT_EQ(splits(1, 128 + 128), 0);
  EXPECT_EQ(splits(32, 128 + 128), 0);
}

TEST(SplitChoiceNoGpu, OnceTheSplitPaysItKeepsPayingWithTheSameCount) {
  // A decode graph per (rows, split count): the choice must not flip back as a context grows,
  // nor change its count (each change is a direct step and a capture).
  for (int sms : {132, 78, 16}) {
    for (int heads : {4, 8, 32, 64}) {
      for (int64_t rows : {1, 2, 3, 4, 8, 16, 32, 64}) {
        int64_t first = -1;
        int count = 0;
        for (int64_t n_kv = 1; n_kv <= 40000; n_kv += (n_kv < 4096 ? 1 : 37)) {
          const int s = splits(rows, n_kv, heads, sms);
          if (s > 0 && first < 0) {
            first = n_kv;
            count = s;
          }
          if (first >= 0) {
            ASSERT_EQ(s, count) << sms << " SMs, " << heads << " heads, " << rows << " rows: "
                                << n_kv << " keys, after switching at " << first;
          }
        }
        if (first >= 0) EXPECT_GT(first, 256) << "a row of one chunk never splits";
      }
    }
  }
  // One 8B session switches once its context passes about 1.3K positions.
  int64_t first = 0;
  for (int64_t n_kv = 1; !first && n_kv <= 4096; ++n_kv)
    if (splits(1, n_kv) > 0) first = n_kv;
  EXPECT_GT(first, 1024);
  EXPECT_LE(first, 2048);
}

TEST(SplitChoiceNoGpu, NoSplitWithoutHeadsSmsOrRoomForTwoSplits) {
  EXPECT_EQ(CudaKernels::attention_splits_that_pay(1, 0, 8192, kH200Sms, kSplits), 0);  // no attention yet
  EXPECT_EQ(CudaKernels::attention_splits_that_pay(1, kLlamaHeads, 8192, 0, kSplits), 0);
  EXPECT_EQ(CudaKernels::attention_splits_that_pay(1, kLlamaHeads, 8192, kH200Sms, 1), 0);
  EXPECT_EQ(CudaKernels::attention_splits_that_pay(0, kLlamaHeads, 8192, kH200Sms, kSplits), 0);
  // 64 sessions of 32 heads already fill the card: a split would need a second wave.
  EXPECT_EQ(splits(64, 100000), 0);
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
