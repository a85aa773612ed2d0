// gpt-oss from a Hugging Face folder (GptOssForCausalLM, transformers' unquantized layout): the
// keys (expert width, window, the layers' sliding pattern from layer_types, YaRN's betas and
// `truncate`), and the experts' rearrangement element by element: gate_up_proj
// [n_expert, hidden, 2 * width] with gate and up interleaved by column becomes GGUF's
// ffn_gate_exps / ffn_up_exps [hidden, width, n_expert] (ne order), down_proj [n_expert, width,
// hidden] becomes ffn_down_exps [width, hidden, n_expert], the biases split the same way and kept
// F32; OpenAI's MXFP4 experts (U8 blocks and scales) repacked into ggml's MXFP4 so every value
// dequantizes to what transformers' dequantization (FP4 code table times 2^(scale - 127), two
// codes a byte, low nibble first) gives. And what is refused: half an MXFP4 pair, attention
// without biases. Whether the converted model computes what transformers computes is
// MoeOracle's (tests/runtime).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "convert/convert.h"
#include "convert/hf_folder_writer.h"
#include "core/error.h"
#include "io/model_file.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using nlohmann::json;
using testing::HfFolderWriter;
using testing::HfTensor;

constexpr int64_t kHidden = 64, kWidth = 32, kExperts = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 16;
constexpr int64_t kLayers = 3, kVocab = 300;

json gpt_oss_config() {
  return json{{"architectures", {"GptOssForCausalLM"}},
              {"model_type", "gpt_oss"},
              {"vocab_size", kVocab},
              {"hidden_size", kHidden},
              {"intermediate_size", kWidth},
              {"num_hidden_layers", kLayers},
              {"num_attention_heads", kHeads},
              {"num_key_value_heads", kKvHeads},
              {"head_dim", kHeadDim},
              {"max_position_embeddings", 1024},
              {"rms_norm_eps", 1e-5},
              {"num_local_experts", kExperts},
              {"num_experts_per_tok", 2},
              {"sliding_window", 16},
              {"layer_types", {"sliding_attention", "full_attention", "full_attention"}},
              {"attention_bias", true},
              {"swiglu_limit", 7.0},
              {"rope_parameters",
               {{"rope_type", "yarn"}, {"rope_theta", 150000.0}, {"factor", 32.0},
                {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"truncate", false},
                {"original_max_position_embeddings", 4096}}},
              {"tie_word_embeddings", false}};
}

void add_gpt_oss_tensors(HfFolderWriter& w) {
  w.add("model.embed_tokens.weight", {kVocab, kHidden});
  w.add("model.norm.weight", {kHidden});
  w.add("lm_head.weight", {kVocab, kHidden});
  for (int il = 0; il < kLayers; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    w.add(p + "input_layernorm.weight", {kHidden});
    w.add(p + "post_attention_layernorm.weight", {kHidden});
    for (const char* proj : {"q", "k", "v"}) {
      const int64_t rows = std::string(proj) == "q" ? kHeads * kHeadDim : kKvHeads * kHeadDim;
      w.add(p + "self_attn." + proj + "_proj.weight", {rows, kHidden});
      w.add(p + "self_attn." + proj + "_proj.bias", {rows});
    }
    w.add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim});
    w.add(p + "self_attn.o_proj.bias", {kHidden});
    w.add(p + "self_attn.sinks", {kHeads});
    w.add(p + "mlp.router.weight", {kExperts, kHidden});
    w.add(p + "mlp.router.bias", {kExperts});
    w.add(p + "mlp.experts.gate_up_proj", {kExperts, kHidden, 2 * kWidth});
    w.add(p + "mlp.experts.gate_up_proj_bias", {kExperts, 2 * kWidth});
    w.add(p + "mlp.experts.down_proj", {kExperts, kWidth, kHidden});
    w.add(p + "mlp.experts.down_proj_bias", {kExperts, kHidden});
  }
}

ModelFile convert_folder(const HfFolderWriter& w) {
  ConvertOptions o;
  o.source.skip_hf_tokenizer = true;
  convert_to_jlm(w.dir(), w.file("out.jlm"), o);
  return open_model_file(w.file("out.jlm"));
}

float f32_at(const HfTensor& t, int64_t i) {
  float v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

// Element i (row-major over the ne shape) of a converted tensor; a .jlm keeps each expert of a
// stacked [.., .., n_expert] tensor in its own pages (slice_stride apart).
float value_at(const TensorInfo& t, int64_t i) {
  const int64_t row = i / t.shape[0], col = i % t.shape[0];
  const size_t rb = row_bytes(t.type, t.shape[0]);
  const uint8_t* p = t.data + size_t(row) * rb;
  if (t.shape.size() >= 2 && t.slice_stride) {
    const int64_t per_expert = t.shape.size() == 3 ? t.shape[1] : 1;
    p = t.data + size_t(row / per_expert) * t.slice_stride + size_t(row % per_expert) * rb;
  }
  std::vector<float> values(size_t(t.shape[0]));
  dequantize_row(t.type, p, values.data(), t.shape[0]);
  return values[size_t(col)];
}

TEST(HfGptOss, KeysAndSlidingPattern) {
  HfFolderWriter w("gpt_oss_keys");
  add_gpt_oss_tensors(w);
  w.write(gpt_oss_config());
  const ModelFile m = convert_folder(w);
  const Metadata& md = m.metadata;
  EXPECT_EQ(md.get_string("general.architecture"), "gpt-oss");
  EXPECT_EQ(md.get_i64("gpt-oss.expert_count"), kExperts);
  EXPECT_EQ(md.get_i64("gpt-oss.expert_used_count"), 2);
  EXPECT_EQ(md.get_i64("gpt-oss.expert_feed_forward_length"), kWidth);
  EXPECT_EQ(md.get_i64("gpt-oss.attention.sliding_window"), 16);
  std::vector<bool> sliding;
  for (const Value& v : md.at("gpt-oss.attention.sliding_window_pattern").as_array().items)
    sliding.push_back(v.as_bool());
  EXPECT_EQ(sliding, (std::vector<bool>{true, false, false}));  // layer_types, not the default
  EXPECT_EQ(md.get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(md.get_f64("gpt-oss.rope.scaling.factor"), 32.0);
  EXPECT_EQ(md.get_i64("gpt-oss.rope.scaling.original_context_length"), 4096);
  EXPECT_EQ(md.get_f64("gpt-oss.rope.scaling.yarn_beta_fast"), 32.0);
  EXPECT_FALSE(md.get_bool("gpt-oss.rope.scaling.yarn_truncate"));
  EXPECT_FALSE(md.has("gpt-oss.expert_swiglu_limit"));
  EXPECT_EQ(m.get("blk.2.attn_sinks.weight").shape, std::vector<int64_t>{kHeads});
  EXPECT_EQ(m.get("blk.0.post_attention_norm.weight").shape, std::vector<int64_t>{kHidden});
  EXPECT_EQ(m.get("blk.0.attn_output.bias").type, QuantType::F32);
  EXPECT_EQ(m.get("blk.0.ffn_gate_inp.weight").type, QuantType::F32);  // the router
}

TEST(HfGptOss, ExpertsSplitAndTransposedElementByElement) {
  HfFolderWriter w("gpt_oss_experts");
  add_gpt_oss_tensors(w);
  w.write(gpt_oss_config());
  const ModelFile m = convert_folder(w);
  for (int il : {0, 2}) {
    const std::string hf = "model.layers." + std::to_string(il) + ".mlp.experts.";
    const std::string blk = "blk." + std::to_string(il) + ".";
    const HfTensor& gate_up = w.tensor(hf + "gate_up_proj");  // [E][hidden][2 width]
    const HfTensor& down = w.tensor(hf + "down_proj");        // [E][width][hidden]
    const TensorInfo& gate = m.get(blk + "ffn_gate_exps.weight");
    const TensorInfo& up = m.get(blk + "ffn_up_exps.weight");
    const TensorInfo& dn = m.get(blk + "ffn_down_exps.weight");
    ASSERT_EQ(gate.shape, (std::vector<int64_t>{kHidden, kWidth, kExperts}));
    ASSERT_EQ(up.shape, gate.shape);
    ASSERT_EQ(dn.shape, (std::vector<int64_t>{kWidth, kHidden, kExperts}));
    for (int64_t e = 0; e < kExperts; ++e)
      for (int64_t i = 0; i < kWidth; ++i)
        for (int64_t h = 0; h < kHidden; ++h) {
          const int64_t src = (e * kHidden + h) * 2 * kWidth + 2 * i;
          const int64_t dst = (e * kWidth + i) * kHidden + h;  // expert e, output row i, column h
          ASSERT_EQ(value_at(gate, dst), f32_at(gate_up, src)) << il << " " << e << " " << i << " " << h;
          ASSERT_EQ(value_at(up, dst), f32_at(gate_up, src + 1)) << il << " " << e << " " << i << " " << h;
          // down: expert e, output row h, column i = down_proj[e][i][h]
          ASSERT_EQ(value_at(dn, (e * kHidden + h) * kWidth + i),
                    f32_at(down, (e * kWidth + i) * kHidden + h));
        }
    const HfTensor& gate_up_b = w.tensor(hf + "gate_up_proj_bias");  // [E][2 width]
    const TensorInfo& gb = m.get(blk + "ffn_gate_exps.bias");
    const TensorInfo& ub = m.get(blk + "ffn_up_exps.bias");
    ASSERT_EQ(gb.shape, (std::vector<int64_t>{kWidth, kExperts}));
    EXPECT_EQ(gb.type, QuantType::F32);
    for (int64_t e = 0; e < kExperts; ++e)
      for (int64_t i = 0; i < kWidth; ++i) {
        ASSERT_EQ(value_at(gb, e * kWidth + i), f32_at(gate_up_b, e * 2 * kWidth + 2 * i));
        ASSERT_EQ(value_at(ub, e * kWidth + i), f32_at(gate_up_b, e * 2 * kWidth + 2 * i + 1));
      }
    EXPECT_EQ(m.get(blk + "ffn_down_exps.bias").shape, (std::vector<int64_t>{kHidden, kExperts}));
  }
}

// transformers' FP4 (E2M1) code table (integrations/mxfp4.py FP4_VALUES).
constexpr float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// OpenAI's layout: blocks [E][rows][in / 32][16], scales [E][rows][in / 32]; returns the value of
// (expert e, row r, input k) as transformers dequantizes it.
struct Mxfp4Hf {
  int64_t rows, in;
  std::vector<uint8_t> blocks, scales;
  Mxfp4Hf(int64_t rows_, int64_t in_, std::mt19937& rng) : rows(rows_), in(in_) {
    blocks.resize(size_t(kExperts * rows * in / 2));
    scales.resize(size_t(kExperts * rows * in / 32));
    for (uint8_t& b : blocks) b = uint8_t(rng());
    for (uint8_t& s : scales) s = uint8_t(120 + rng() % 10);
  }
  float value(int64_t e, int64_t r, int64_t k) const {
    const size_t row = size_t(e * rows + r);
    const uint8_t byte = blocks[row * size_t(in / 2) + size_t(k / 2)];
    const int code = k % 2 == 0 ? byte & 0x0F : byte >> 4;
    return std::ldexp(kFp4[code], int(scales[row * size_t(in / 32) + size_t(k / 32)]) - 127);
  }
};

// One layer's MXFP4 experts; without_down_scales leaves half a pair.
void add_mxfp4_experts(HfFolderWriter& w, const std::string& p, const Mxfp4Hf& gate_up,
                       const Mxfp4Hf& down, bool without_down_scales = false) {
  w.add_bytes(p + "mlp.experts.gate_up_proj_blocks", {kExperts, 2 * kWidth, kHidden / 32, 16}, "U8",
              gate_up.blocks);
  w.add_bytes(p + "mlp.experts.gate_up_proj_scales", {kExperts, 2 * kWidth, kHidden / 32}, "U8",
              gate_up.scales);
  w.add_bytes(p + "mlp.experts.down_proj_blocks", {kExperts, kHidden, kWidth / 32, 16}, "U8",
              down.blocks);
  if (!without_down_scales)
    w.add_bytes(p + "mlp.experts.down_proj_scales", {kExperts, kHidden, kWidth / 32}, "U8", down.scales);
}

// Every layer's tensors but the unquantized experts.
void add_gpt_oss_tensors_but_experts(HfFolderWriter& w) {
  HfFolderWriter all("gpt_oss_all_" + std::to_string(::getpid()));
  add_gpt_oss_tensors(all);
  for (const HfTensor& t : all.tensors())
    if (t.name.find("experts.gate_up_proj") == std::string::npos &&
        t.name.find("experts.down_proj") == std::string::npos)
      w.add_bytes(t.name, t.shape, t.dtype, t.bytes);
    else if (t.name.ends_with("_bias"))
      w.add_bytes(t.name, t.shape, t.dtype, t.bytes);
}

TEST(HfGptOss, Mxfp4ExpertsRepackedLosslessly) {
  HfFolderWriter w("gpt_oss_mxfp4");
  add_gpt_oss_tensors_but_experts(w);
  std::mt19937 rng(7);
  std::vector<Mxfp4Hf> gate_up, down;
  for (int il = 0; il < kLayers; ++il) {
    gate_up.emplace_back(2 * kWidth, kHidden, rng);
    down.emplace_back(kHidden, kWidth, rng);
    add_mxfp4_experts(w, "model.layers." + std::to_string(il) + ".", gate_up.back(), down.back());
  }
  w.write(gpt_oss_config());
  const ModelFile m = convert_folder(w);
  for (int il = 0; il < kLayers; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    const TensorInfo& gate = m.get(blk + "ffn_gate_exps.weight");
    const TensorInfo& up = m.get(blk + "ffn_up_exps.weight");
    const TensorInfo& dn = m.get(blk + "ffn_down_exps.weight");
    ASSERT_EQ(gate.type, QuantType::MXFP4);
    ASSERT_EQ(gate.shape, (std::vector<int64_t>{kHidden, kWidth, kExperts}));
    ASSERT_EQ(up.shape, gate.shape);
    ASSERT_EQ(dn.type, QuantType::MXFP4);
    ASSERT_EQ(dn.shape, (std::vector<int64_t>{kWidth, kHidden, kExperts}));
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int64_t i = 0; i < kWidth; ++i)
        for (int64_t h = 0; h < kHidden; ++h) {
          const int64_t at = (e * kWidth + i) * kHidden + h;
          ASSERT_EQ(value_at(gate, at), gate_up[size_t(il)].value(e, 2 * i, h)) << il << " " << e << " " << i << " " << h;
          ASSERT_EQ(value_at(up, at), gate_up[size_t(il)].value(e, 2 * i + 1, h)) << il << " " << e << " " << i << " " << h;
        }
      for (int64_t h = 0; h < kHidden; ++h)
        for (int64_t i = 0; i < kWidth; ++i)
          ASSERT_EQ(value_at(dn, (e * kHidden + h) * kWidth + i), down[size_t(il)].value(e, h, i));
    }
  }
}

TEST(HfGptOss, Refusals) {
  {  // blocks without their scales
    HfFolderWriter w("gpt_oss_half_pair");
    add_gpt_oss_tensors_but_experts(w);
    std::mt19937 rng(1);
    const Mxfp4Hf down(kHidden, kWidth, rng);
    for (int il = 0; il < kLayers; ++il) {
      const Mxfp4Hf gate_up(2 * kWidth, kHidden, rng);
      add_mxfp4_experts(w, "model.layers." + std::to_string(il) + ".", gate_up, down, true);
    }
    w.write(gpt_oss_config());
    try {
      convert_folder(w);
      FAIL() << "MXFP4 blocks without scales converted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ffn_down_exps.weight"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("scales"), std::string::npos) << e.what();
    }
  }
  {
    HfFolderWriter w("gpt_oss_nobias");
    add_gpt_oss_tensors(w);
    json c = gpt_oss_config();
    c["attention_bias"] = false;
    w.write(c);
    try {
      convert_folder(w);
      FAIL() << "attention without biases converted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_bias"), std::string::npos) << e.what();
    }
  }
  {  // transformers and llama.cpp clamp at 7 whatever the config says
    HfFolderWriter w("gpt_oss_limit");
    add_gpt_oss_tensors(w);
    json c = gpt_oss_config();
    c["swiglu_limit"] = 1.0;
    w.write(c);
    try {
      convert_folder(w);
      FAIL() << "a swiglu_limit of 1 converted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("swiglu_limit"), std::string::npos) << e.what();
    }
  }
  {
    HfFolderWriter w("gpt_oss_mscale");
    add_gpt_oss_tensors(w);
    json c = gpt_oss_config();
    c["rope_parameters"]["attention_factor"] = 2.0;
    w.write(c);
    try {
      convert_folder(w);
      FAIL() << "a YaRN attention factor of its own converted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_factor"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace jitllm
