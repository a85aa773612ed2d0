// `jitllm info`'s numbers: bytes by format and decode bytes per token, checked against sums made
// here from the GGUF reader's own tensor table and the fixture shapes in shared/oracle/README.md.
#include <gtest/gtest.h>

#include "convert/summary.h"
#include "io/gguf.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

TEST(Summary, Q8_0FixtureBytesAndDecodeBytes) {
  const std::string path = oracle_path("models/synth-llama.Q8_0.gguf");
  const ModelSummary s = summarize_model(open_convert_source(path));
  const GgufFile gguf = GgufFile::open(path);
  uint64_t total = 0;
  for (const TensorInfo& t : gguf.tensors()) total += t.bytes;
  EXPECT_EQ(s.tensor_bytes, total);
  EXPECT_EQ(s.tensor_count, 21u);
  // README: token_embd [256, 512], untied output: a token reads one Q8_0 row of 256 (8 blocks of
  // 34 bytes) instead of the whole table.
  EXPECT_EQ(s.decode_bytes_per_token, total - 512 * 8 * 34 + 8 * 34);
  ASSERT_EQ(s.by_format.size(), 2u);
  EXPECT_EQ(s.by_format[0].format, "q8_0");
  EXPECT_EQ(s.by_format[0].tensors, 16u);
  EXPECT_EQ(s.by_format[1].format, "f32");
  EXPECT_EQ(s.by_format[1].bytes, 5u * 256 * 4);  // the 5 norm vectors
  EXPECT_EQ(s.parameters, 256u * 512 * 2 + 2 * (256 * 256 * 2 + 256 * 128 * 2 + 256 * 768 * 3 + 512) + 256);
  EXPECT_EQ(s.tokenizer_model, "llama");
  EXPECT_EQ(s.vocab_size, 512u);
  EXPECT_FALSE(s.chat_template);
  EXPECT_EQ(s.hyperparameters.get_i64("llama.block_count"), 2);
  EXPECT_FALSE(s.hyperparameters.has("general.name"));
}

TEST(Summary, TiedEmbeddingsAndExpertsCountWhatATokenReads) {
  // Without output.weight the embedding table is the head too: read whole. Expert tensors count
  // expert_used_count / expert_count of their bytes.
  ConvertSource src;
  src.format = "gguf";
  src.metadata.set("general.architecture", Value::string("llama"));
  src.metadata.set("llama.expert_count", Value::u32(8));
  src.metadata.set("llama.expert_used_count", Value::u32(2));
  auto add = [&](std::string name, QuantType type, std::vector<int64_t> shape) {
    SourceTensor t;
    t.name = std::move(name);
    t.type = type;
    t.shape = std::move(shape);
    src.tensors.push_back(std::move(t));
  };
  add("token_embd.weight", QuantType::F16, {64, 100});
  add("blk.0.ffn_up_exps.weight", QuantType::F32, {64, 32, 8});
  add("blk.0.ffn_gate_inp.weight", QuantType::F32, {64, 8});
  EXPECT_EQ(decode_bytes_per_token(src), 64u * 100 * 2 + 64u * 32 * 4 * 2 + 64u * 8 * 4);
  add("output.weight", QuantType::F16, {64, 100});
  EXPECT_EQ(decode_bytes_per_token(src), 64u * 2 + 64u * 32 * 4 * 2 + 64u * 8 * 4 + 64u * 100 * 2);
  // Parameters are counted alike: one embedding row, 2 of the 8 experts, the router, the head.
  EXPECT_EQ(active_parameters(src), 64u + 64u * 32 * 2 + 64u * 8 + 64u * 100);
}

}  // namespace
}  // namespace jitllm
