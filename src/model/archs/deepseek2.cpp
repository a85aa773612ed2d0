// The deepseek2 family (DeepSeek-V2, V2-Lite; DeepSeek-V3/R1, Kimi-K2 and Moonlight ship as the
// same GGUF architecture with sigmoid routing and a selection bias): multi-head latent attention
// (q directly or through a LoRA; one latent of kv_lora_rank and a shared rotated key part of
// rope.dimension_count per position, which is all the cache keeps; builder_mla.cpp) and, past the
// first leading_dense_block_count layers, a mixture of experts with shared experts, chosen by
// softmax (V2) or sigmoid plus exp_probs_b (V3), optionally among the best expert groups, the
// weights renormalised and scaled as the file says. RoPE on pairs (2i, 2i + 1), llama.cpp's NORM
// mode; the attention scale carries DeepSeek's YaRN mscale rule (read_mla_scales). Names and
// keys are llama.cpp b10472's, with either kv_b form: the split attn_k_b / attn_v_b, or older
// converters' attn_kv_b (with their metadata of n_head KV heads), split when bound.
#include <cmath>

#include "core/error.h"
#include "model/builder.h"
#include "model/family.h"

namespace jitllm {

namespace {

// llama.cpp's yarn get_mscale: 1 for no scaling, else 0.1 * m * ln(factor) + 1.
float yarn_mscale(float factor, float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f; }

// The cos/sin magnitude and the attention scale as llama.cpp sets them for deepseek2
// (llama-context.cpp's yarn_attn_factor, then the graph's kq_scale): the YaRN attention factor
// get_mscale(f, mscale) / get_mscale(f, mscale_all_dim) (mscale = mscale_all_dim unless that is
// 1, the only mscale llama.cpp's files can say), and scores scaled by mscale'^2 / sqrt(q/k head)
// with mscale' = that factor times get_mscale(f, mscale_all_dim). The file's yarn_log_multiplier
// is 0.1 * mscale_all_dim (llama.cpp's converter writes it so).
void read_mla_scales(const Metadata& md, Config& c) {
  const std::string a = c.arch + ".";
  const float rope_attn_factor = float(md.get_f64_or(a + "rope.scaling.attn_factor", 1.0));
  const float log_mul = float(md.get_f64_or(a + "rope.scaling.yarn_log_multiplier", 0.0)) / 0.1f;
  const float factor = 1.0f / c.rope_freq_scale;
  float attn_factor = 1.0f;
  if (c.yarn_ext_factor != 0.0f) {
    if (log_mul != 0.0f) {
      const float mscale = log_mul != 1.0f ? log_mul : 1.0f;
      attn_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, log_mul);
    } else {
      attn_factor = yarn_mscale(factor, 1.0f);
    }
    // The rotation multiplies by 1 + 0.1 ln(factor) itself under YaRN (graph/rope.cpp, ggml).
    attn_factor /= 1.0f + 0.1f * std::log(factor);
  }
  attn_factor *= rope_attn_factor;
  c.yarn_attn_factor = attn_factor;
  const float org = attn_factor * (1.0f + 0.1f * std::log(factor));
  const float mscale = org * (1.0f + 0.1f * log_mul * std::log(factor));
  c.attn_scale = mscale * mscale / std::sqrt(float(c.head_dim_k_mla));
}

void read_deepseek2_hparams(const Metadata& md, Config& c) {
  const std::string a = c.arch + ".";
  c.rope_mode = RopeMode::Normal;
  if (md.has(a + "attention.temperature_scale"))
    throw_error("metadata key '{}attention.temperature_scale': attention temperature tuning is not "
                "supported",
                a);
  c.n_lora_q = int(md.get_i64_or(a + "attention.q_lora_rank", 0));
  c.n_lora_kv = int(md.get_i64(a + "attention.kv_lora_rank"));
  const bool split = md.has(a + "attention.key_length_mla") && md.has(a + "attention.value_length_mla");
  if (split) {
    c.head_dim_k_mla = int(md.get_i64(a + "attention.key_length_mla"));
    c.head_dim_v_mla = int(md.get_i64(a + "attention.value_length_mla"));
  } else {
    // Older converters (attn_kv_b unsplit) describe the decompressed heads: n_head KV heads of
    // key_length / value_length. The graph is the same absorbed MQA (weights.cpp splits kv_b).
    if (c.n_head_kv != c.n_head || !c.n_head_kv_per_layer.empty())
      throw_error("metadata: {}attention.head_count_kv {} differs from head_count {} in the unsplit "
                  "attn_kv_b form",
                  a, c.n_head_kv, c.n_head);
    c.head_dim_k_mla = c.head_dim;
    c.head_dim_v_mla = c.head_dim_v;
    c.n_head_kv = 1;
    c.head_dim = c.n_lora_kv + c.n_rot;
    c.head_dim_v = c.n_lora_kv;
  }
  c.n_layer_dense_lead = int(md.get_i64_or(a + "leading_dense_block_count", 0));
  if (c.n_lora_q < 0 || c.n_lora_kv <= 0 || c.head_dim_v_mla <= 0 || c.head_dim_k_mla <= c.n_rot ||
      c.n_layer_dense_lead < 0 || c.n_layer_dense_lead > c.n_layer)
    throw_error("metadata: {0}attention.q_lora_rank {1}, kv_lora_rank {2}, key_length_mla {3} (rope "
                "{4}), value_length_mla {5}, leading_dense_block_count {6} are not a DeepSeek shape",
                a, c.n_lora_q, c.n_lora_kv, c.head_dim_k_mla, c.n_rot, c.head_dim_v_mla,
                c.n_layer_dense_lead);
  // The absorbed MQA llama.cpp's converter describes: one KV head of latent + rope, V the latent.
  if (c.n_head_kv != 1 || !c.n_head_kv_per_layer.empty() || c.head_dim != c.n_lora_kv + c.n_rot ||
      c.head_dim_v != c.n_lora_kv)
    throw_error("metadata: {0}attention.head_count_kv {1}, key_length {2}, value_length {3}: MLA's "
                "absorbed form has 1 KV head of kv_lora_rank + rope ({4}) and V of kv_lora_rank ({5})",
                a, c.n_head_kv, c.head_dim, c.head_dim_v, c.n_lora_kv + c.n_rot, c.n_lora_kv);
  if (c.n_expert > 0) {
    read_moe_hparams(md, c, 0, false);
    c.n_ff_shexp = c.n_ff_exp * int(md.get_i64_or(a + "expert_shared_count", 0));
  }
  read_mla_scales(md, c);
}

// What a deepseek2 layer keeps per position: the latent and k_pe, one plane (V is its prefix).
LayerKv deepseek2_layer_memory(const Config& c, int) { return LayerKv{c.n_lora_kv + c.n_rot, 0}; }

std::vector<LayerTensor> deepseek2_layer_tensors() {
  using enum LayerPart;
  std::vector<LayerTensor> t = with_moe_tensors({
      {"attn_norm.weight", &LayerWeights::attn_norm, shapes::embd},
      {"attn_q.weight", &LayerWeights::wq, shapes::mla_q, true},
      {"attn_q_a.weight", &LayerWeights::wq_a, shapes::mla_q_a, true},
      {"attn_q_a_norm.weight", &LayerWeights::attn_q_a_norm, shapes::mla_q_a_norm, true},
      {"attn_q_b.weight", &LayerWeights::wq_b, shapes::mla_q_b, true},
      {"attn_kv_a_mqa.weight", &LayerWeights::wkv_a_mqa, shapes::mla_kv_a},
      {"attn_kv_a_norm.weight", &LayerWeights::attn_kv_a_norm, shapes::mla_kv_a_norm},
      {"attn_k_b.weight", &LayerWeights::wk_b, shapes::mla_k_b, true},
      {"attn_v_b.weight", &LayerWeights::wv_b, shapes::mla_v_b, true},
      {"attn_kv_b.weight", &LayerWeights::wkv_b, shapes::mla_kv_b, true},  // older converters
      {"attn_output.weight", &LayerWeights::wo, shapes::mla_o},
      {"ffn_norm.weight", &LayerWeights::ffn_norm, shapes::embd},
      {"ffn_gate.weight", &LayerWeights::ffn_gate, shapes::gate_up},
      {"ffn_up.weight", &LayerWeights::ffn_up, shapes::gate_up},
      {"ffn_down.weight", &LayerWeights::ffn_down, shapes::down},
  });
  t.push_back({"exp_probs_b.bias", &LayerWeights::ffn_exp_probs_b, shapes::experts, true, Moe});
  return t;
}

void build_deepseek2_graph(GraphBuilder& b) {
  const Config& c = b.config();
  b.build_inp_embd();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    b.begin_layer(il);
    Act cur = b.build_norm(l.attn_norm, "attn_norm", il);
    AttnSpec spec = b.attn_spec(il);
    spec.v_in_k = true;
    const Act attn = b.build_mla_attn(il, cur, l, spec, c.rope_params_of(il));
    b.build_residual(il, *l.wo, attn, "attn_out", "ffn_inp");
    if (!l.is_moe() && il >= c.n_layer_dense_lead && c.n_expert > 0)
      throw_error("layer {}: past the {} leading dense layers but no router (ffn_gate_inp)", il,
                  c.n_layer_dense_lead);
    b.build_ffn_block(il, l);  // an MoE layer's shared experts are part of its moe_ffn
  }
}

}  // namespace

extern const Family kDeepseek2Family{
    .name = "deepseek2",
    .archs = {"deepseek2"},
    .read_hparams = read_deepseek2_hparams,
    .layer_tensors = deepseek2_layer_tensors(),
    .layer_memory = deepseek2_layer_memory,
    .build = build_deepseek2_graph,
};

}  // namespace jitllm
