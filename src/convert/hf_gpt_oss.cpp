// gpt-oss from Hugging Face (GptOssForCausalLM): config.json -> "gpt-oss.*" keys as llama.cpp's
// converter writes them (the expert width from intermediate_size, the sliding window, YaRN with
// its betas) plus ours (the layers' sliding pattern where layer_types is not the default, `truncate`),
// and the tensors: biases on q/k/v/o, the sinks, the router with its bias, and the experts as
// transformers stores them unquantized — gate_up_proj [n_expert, hidden, 2 * width] with gate and
// up interleaved column by column, down_proj [n_expert, width, hidden] — split and transposed into
// GGUF's stacked ffn_{gate,up,down}_exps; or, in OpenAI's published checkpoints, the experts as
// MXFP4 blocks and scales (gate_up_proj_blocks [n_expert, 2 * width, hidden / 32, 16] with gate and
// up interleaved by row, down_proj_blocks [n_expert, hidden, width / 32, 16]), repacked losslessly
// into ggml's MXFP4 blocks as llama.cpp's converter does. No q/k row permutation (NEOX rope).
#include "convert/hf_arch.h"
#include "core/error.h"

namespace jitllm {
namespace {

void gpt_oss_metadata(const nlohmann::json& c, Metadata& m) {
  llama_like_metadata(c, m, "gpt-oss");
  const std::string a = "gpt-oss.";
  m.set(a + "expert_feed_forward_length", Value::u32(uint32_t(config_hparam(c, "intermediate_size"))));
  m.set(a + "attention.sliding_window", Value::u32(uint32_t(config_hparam(c, "sliding_window"))));
  // transformers' default pattern and llama.cpp's (period 2): even layers slide. Only another
  // pattern is written (one bool a layer), so the default files read in llama.cpp as its own.
  auto even = [](int64_t il) { return il % 2 == 0; };
  const std::vector<bool> sliding = sliding_layers(c, even);
  for (size_t il = 0; il < sliding.size(); ++il)
    if (sliding[il] != even(int64_t(il))) {
      set_sliding_pattern(m, "gpt-oss", sliding);
      break;
    }
  // transformers' GptOssExperts and llama.cpp both clamp at 7 whatever the config says.
  if (auto limit = config_number_opt(c, "swiglu_limit"); limit && *limit != 7.0)
    throw_error("config.json: swiglu_limit is {}; gpt-oss's experts clamp at 7 (transformers and "
                "llama.cpp fix it), another limit is not supported",
                *limit);
  if (!config_bool_or(c, "attention_bias", true))
    throw_error("config.json: attention_bias is false; gpt-oss's attention has biases");
}

const HfLayerTensor kGptOssLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
};

const HfLayerTensor kGptOssAttention[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
};

std::optional<HfTensorMapping> gpt_oss_map_tensor(const std::string& name, const nlohmann::json& c) {
  using Columns = HfTensorMapping::Columns;
  std::string index, rest;
  if (split_layer_tensor(name, index, rest)) {
    const std::string blk = "blk." + index + ".";
    auto f32 = [&](const char* gguf) {
      HfTensorMapping m{blk + gguf};
      m.f32 = true;
      return m;
    };
    // gate (even columns) and up (odd columns) of one interleaved tensor.
    auto split = [&](const char* what, bool transpose, bool as_f32) {
      HfTensorMapping gate{blk + "ffn_gate_exps." + what}, up{blk + "ffn_up_exps." + what};
      gate.columns = Columns::Even;
      up.columns = Columns::Odd;
      gate.transpose = up.transpose = transpose;
      gate.f32 = up.f32 = as_f32;
      gate.also.push_back(up);
      return gate;
    };
    if (rest == "self_attn.sinks") return f32("attn_sinks.weight");
    if (rest == "mlp.router.weight") return f32("ffn_gate_inp.weight");
    if (rest == "mlp.router.bias") return f32("ffn_gate_inp.bias");
    if (rest == "mlp.experts.gate_up_proj") return split("weight", true, false);
    if (rest == "mlp.experts.gate_up_proj_bias") return split("bias", false, true);
    if (rest == "mlp.experts.down_proj") {
      HfTensorMapping down{blk + "ffn_down_exps.weight"};
      down.transpose = true;
      return down;
    }
    if (rest == "mlp.experts.down_proj_bias") return f32("ffn_down_exps.bias");
    // OpenAI's MXFP4 experts: blocks and scales of one GGUF tensor each (gate and up by row).
    const bool blocks = rest.ends_with("_blocks"), scales = rest.ends_with("_scales");
    if (blocks || scales) {
      const auto part = blocks ? HfTensorMapping::Mxfp4::Blocks : HfTensorMapping::Mxfp4::Scales;
      const std::string stem = rest.substr(0, rest.size() - 7);  // without _blocks / _scales
      if (stem == "mlp.experts.gate_up_proj") {
        HfTensorMapping gate{blk + "ffn_gate_exps.weight"}, up{blk + "ffn_up_exps.weight"};
        gate.mxfp4 = up.mxfp4 = part;
        gate.rows = Columns::Even;
        up.rows = Columns::Odd;
        gate.also.push_back(up);
        return gate;
      }
      if (stem == "mlp.experts.down_proj") {
        HfTensorMapping down{blk + "ffn_down_exps.weight"};
        down.mxfp4 = part;
        return down;
      }
    }
  }
  return map_tensor_by_table(name, c, {kGptOssAttention, kGptOssLayer}, "gpt-oss");
}

}  // namespace

extern const HfArchitecture kHfGptOss{"gpt-oss", gpt_oss_metadata, gpt_oss_map_tensor, nullptr};

}  // namespace jitllm
