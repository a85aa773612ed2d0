// The weights a decode step reads (runtime/read_wall.h), as `jitllm speed` and `jitllm batched`
// report them against the read wall: a mixture of experts counts only the experts a step chooses.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/model_loader.h"
#include "runtime/read_wall.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

TEST(ReadWall, ExpertStacksCountTheExpertsAStepChooses) {
  // qwen3moe-tiny: 8 experts, 3 a token, an output head of its own.
  const auto file = load_model_file(testing::family_hf_folder("qwen3moe"));
  double experts = 0, rest = 0, embedding_row = 0;
  for (const TensorInfo& t : file->tensors) {
    if (t.name == "token_embd.weight")
      embedding_row = double(t.bytes) / double(t.rows());
    else if (t.name.find("_exps.") != std::string::npos)
      experts += double(t.bytes);
    else
      rest += double(t.bytes);
  }
  ASSERT_GT(experts, 0);
  const double one = weight_bytes_per_token(*file);
  EXPECT_NEAR(one, embedding_row + rest + experts * 3 / 8, 1.0);
  EXPECT_EQ(weight_bytes_per_token(*file, 1), one);
  // 4 sessions: the expected share of distinct experts, 1 - (5/8)^4; many: nearly all of them.
  EXPECT_NEAR(weight_bytes_per_token(*file, 4), embedding_row + rest + experts * (1 - std::pow(5.0 / 8, 4)), 1.0);
  EXPECT_NEAR(weight_bytes_per_token(*file, 1000), embedding_row + rest + experts, 1.0);
}

TEST(ReadWall, DenseModelsReadEveryWeightOnce) {
  const auto file = load_model_file(testing::family_hf_folder("qwen3"));
  double all = 0, embedding = 0, rows = 1;
  for (const TensorInfo& t : file->tensors) {
    all += double(t.bytes);
    if (t.name == "token_embd.weight") {
      embedding = double(t.bytes);
      rows = double(t.rows());
    }
  }
  const bool tied = file->find("output.weight") == nullptr;
  const double want = tied ? all : all - embedding + embedding / rows;
  EXPECT_NEAR(weight_bytes_per_token(*file), want, 1.0);
  EXPECT_EQ(weight_bytes_per_token(*file, 32), weight_bytes_per_token(*file));
}

}  // namespace
}  // namespace jitllm
