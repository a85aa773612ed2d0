// The per-tensor plan of a conversion on model shapes the oracle fixtures do not have: rows that
// do not divide into blocks, a head tied to the embeddings, an 8-expert MoE, keep. (The presets on
// a real model are checked byte for byte against llama-quantize in convert_test.cpp.)
#include "convert/quant_mix.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace jitllm {
namespace {

SourceTensor tensor(std::string name, std::vector<int64_t> shape, QuantType type = QuantType::F16) {
  SourceTensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.type = type;
  return t;
}

// A llama-shaped source: n_layer blocks of [n_embd] norms and [n_embd, ...] matrices.
ConvertSource llama_source(int n_layer, int64_t n_embd, int64_t n_ff, bool tied, int n_expert = 0) {
  ConvertSource s;
  s.format = "gguf";
  s.metadata.set("general.architecture", Value::string("llama"));
  s.metadata.set("llama.block_count", Value::u32(uint32_t(n_layer)));
  s.metadata.set("llama.attention.head_count", Value::u32(32));
  s.metadata.set("llama.attention.head_count_kv", Value::u32(8));
  if (n_expert) s.metadata.set("llama.expert_count", Value::u32(uint32_t(n_expert)));
  s.tensors.push_back(tensor("token_embd.weight", {n_embd, 1000}));
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    s.tensors.push_back(tensor(b + "attn_norm.weight", {n_embd}, QuantType::F32));
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"})
      s.tensors.push_back(tensor(b + m + ".weight", {n_embd, n_embd}));
    if (n_expert) {
      s.tensors.push_back(tensor(b + "ffn_gate_inp.weight", {n_embd, n_expert}, QuantType::F32));
      s.tensors.push_back(tensor(b + "ffn_down_exps.weight", {n_ff, n_embd, n_expert}));
    } else {
      s.tensors.push_back(tensor(b + "ffn_down.weight", {n_ff, n_embd}));
    }
  }
  if (!tied) s.tensors.push_back(tensor("output.weight", {n_embd, 1000}));
  return s;
}

const TensorChoice& choice(const ConvertSource& s, const std::vector<TensorChoice>& plan,
                           const std::string& name) {
  for (size_t i = 0; i < s.tensors.size(); ++i)
    if (s.tensors[i].name == name) return plan[i];
  throw_error("no tensor {}", name);
}

TEST(QuantMix, Q4KMGivesMoreBitsToTheLayersLlamaQuantizeChooses) {
  const ConvertSource s = llama_source(32, 256, 512, /*tied=*/false);
  const auto plan = plan_tensor_types(s, parse_convert_target("Q4_K_M"));
  // use_more_bits over 32 layers: the first and last 4, then every third from layer 6.
  for (int i = 0; i < 32; ++i) {
    const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(choice(s, plan, b + "attn_v.weight").type, more ? QuantType::Q6_K : QuantType::Q4_K) << i;
    EXPECT_EQ(choice(s, plan, b + "ffn_down.weight").type, more ? QuantType::Q6_K : QuantType::Q4_K) << i;
    EXPECT_EQ(choice(s, plan, b + "attn_q.weight").type, QuantType::Q4_K);
    EXPECT_EQ(choice(s, plan, b + "attn_norm.weight").reason, "not quantized: norm");
  }
  EXPECT_EQ(choice(s, plan, "output.weight").type, QuantType::Q6_K);
  EXPECT_EQ(choice(s, plan, "output.weight").reason, "output head in the Q4_K_M mix");
  EXPECT_EQ(choice(s, plan, "token_embd.weight").type, QuantType::Q4_K);
  EXPECT_EQ(choice(s, plan, "token_embd.weight").reason, "");
}

TEST(QuantMix, ATiedHeadTakesTheHeadsFormat) {
  const ConvertSource s = llama_source(2, 256, 512, /*tied=*/true);
  const auto plan = plan_tensor_types(s, parse_convert_target("q5_k_m"));
  EXPECT_EQ(choice(s, plan, "token_embd.weight").type, QuantType::Q6_K);
  EXPECT_EQ(choice(s, plan, "token_embd.weight").reason,
            "token embeddings (the head too) in the Q5_K_M mix");
}

TEST(QuantMix, RowsThatDoNotDivideFallBackAsLlamaQuantizeDoes) {
  // Rows of 288 take Q5_0 for Q4_K (32 divides them); rows of 100 nothing but F16.
  for (const int64_t n_embd : {288, 100}) {
    SCOPED_TRACE(n_embd);
    const ConvertSource s = llama_source(2, n_embd, 512, false);
    for (const char* type : {"Q4_K_M", "q4_K"}) {
      const bool pure = std::string(type) == "q4_K";
      const auto plan = plan_tensor_types(s, parse_convert_target(type, pure));
      const TensorChoice& q = choice(s, plan, "blk.0.attn_q.weight");
      EXPECT_EQ(q.type, n_embd == 288 ? QuantType::Q5_0 : QuantType::F16) << type;
      EXPECT_EQ(q.reason, "rows of " + std::to_string(n_embd) + " do not divide into q4_K blocks of 256");
      // The Q6_K the mix gives attn_v of layer 1 falls back to Q8_0, or F16.
      EXPECT_EQ(choice(s, plan, "blk.1.attn_v.weight").type,
                pure ? q.type : n_embd == 288 ? QuantType::Q8_0 : QuantType::F16);
      // ffn_down's rows are 512 long: no fallback (layer 1 of 2 gets more bits in the mix).
      EXPECT_EQ(choice(s, plan, "blk.0.ffn_down.weight").type, QuantType::Q4_K);
      EXPECT_EQ(choice(s, plan, "blk.1.ffn_down.weight").type, pure ? QuantType::Q4_K : QuantType::Q6_K);
    }
  }
}

TEST(QuantMix, EightExpertsGetTheirMixAndLayersComeFromNames) {
  ConvertSource s = llama_source(4, 256, 512, false, /*n_expert=*/8);
  std::swap(s.tensors[7], s.tensors[14]);  // layer 0's and 1's expert tensors swapped
  const auto plan = plan_tensor_types(s, parse_convert_target("Q4_K_M"));
  EXPECT_EQ(choice(s, plan, "blk.2.attn_v.weight").type, QuantType::Q8_0);
  EXPECT_EQ(choice(s, plan, "blk.2.attn_k.weight").type, QuantType::Q8_0);
  EXPECT_EQ(choice(s, plan, "blk.2.attn_output.weight").type, QuantType::Q5_K);
  EXPECT_EQ(choice(s, plan, "blk.2.ffn_gate_inp.weight").type, QuantType::F32);
  // use_more_bits over 4 layers: 2 ((2 - 0) % 3 == 2) and 3 (>= 7 * 4 / 8), by layer, not order.
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(choice(s, plan, "blk." + std::to_string(i) + ".ffn_down_exps.weight").type,
              i >= 2 ? QuantType::Q6_K : QuantType::Q4_K) << i;
  const auto moe = plan_tensor_types(s, parse_convert_target("MXFP4_MOE"));
  EXPECT_EQ(choice(s, moe, "blk.1.ffn_down_exps.weight").type, QuantType::MXFP4);
  EXPECT_EQ(choice(s, moe, "blk.1.attn_q.weight").type, QuantType::Q8_0);
  EXPECT_EQ(choice(s, moe, "output.weight").type, QuantType::Q8_0);
}

// LLM_TYPE_70B: 80 layers of llama with GQA, or of qwen2 whatever its heads: an attn_v in Q3_K or
// Q4_K takes Q5_K.
TEST(QuantMix, A70BGivesAttnVFiveBits) {
  ConvertSource s = llama_source(80, 256, 512, false);
  auto plan = plan_tensor_types(s, parse_convert_target("Q4_K_M"));
  EXPECT_EQ(choice(s, plan, "blk.11.attn_v.weight").type, QuantType::Q5_K);  // no more bits here
  EXPECT_EQ(choice(s, plan, "blk.0.attn_v.weight").type, QuantType::Q6_K);   // more bits stay
  EXPECT_EQ(choice(s, plan, "blk.11.attn_q.weight").type, QuantType::Q4_K);
  s.metadata.set("llama.attention.head_count_kv", Value::u32(32));  // no GQA: not a 70B
  plan = plan_tensor_types(s, parse_convert_target("Q4_K_M"));
  EXPECT_EQ(choice(s, plan, "blk.11.attn_v.weight").type, QuantType::Q4_K);
  s.metadata.set("general.architecture", Value::string("qwen2"));
  s.metadata.set("qwen2.block_count", Value::u32(80));
  plan = plan_tensor_types(s, parse_convert_target("Q3_K_M"));
  EXPECT_EQ(choice(s, plan, "blk.5.attn_v.weight").type, QuantType::Q5_K);
  EXPECT_EQ(choice(s, plan, "blk.79.attn_v.weight").type, QuantType::Q5_K);
}

TEST(QuantMix, KeepLeavesFormatsButStoresAnHfCheckpointsVectorsAsF32) {
  ConvertSource s = llama_source(1, 256, 512, false);
  s.format = "hf";
  s.tensors[1].type = QuantType::BF16;  // blk.0.attn_norm.weight
  const auto plan = plan_tensor_types(s, parse_convert_target("keep"));
  EXPECT_EQ(plan[1].type, QuantType::F32);
  EXPECT_EQ(plan[1].reason, "1-D, stored as f32");
  EXPECT_EQ(choice(s, plan, "blk.0.attn_q.weight").type, QuantType::F16);
}

TEST(QuantMix, TargetNamesAreParsedAsLlamaQuantizeReadsThem) {
  EXPECT_EQ(parse_convert_target("q8_0").preset, QuantPreset::Q8_0);
  EXPECT_EQ(parse_convert_target("q8_0", true).preset, std::nullopt);
  EXPECT_EQ(parse_convert_target("q4_K").preset, std::nullopt);  // not a preset: plain
  EXPECT_EQ(parse_convert_target("q4_K").type, QuantType::Q4_K);
  EXPECT_EQ(parse_convert_target("f16").type, QuantType::F16);
  EXPECT_EQ(preset_file_type(*parse_convert_target("Q4_K_M").preset), 15);
  EXPECT_THROW(parse_convert_target("IQ2_XXS"), Error);  // a format jitllm cannot quantize
  EXPECT_THROW(parse_convert_target("q8_1"), Error);     // an activation format
  EXPECT_THROW(parse_convert_target("keep", /*pure=*/true), Error);
}

}  // namespace
}  // namespace jitllm
