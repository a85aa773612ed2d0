// The gpt-oss family (gpt-oss-20b, gpt-oss-120b; llama.cpp's LLM_ARCH_OPENAI_MOE, GGUF
// architecture "gpt-oss"): the llama block with biases on q/k/v/o, a learned sink logit per head
// in every attention's softmax, sliding-window attention on every other layer (layer 0 slides,
// llama.cpp's default period 2), NEOX rotation with YaRN, and a mixture of experts in every
// layer: the top k of the router's biased logits, softmax over those k, experts with biases and
// the clamped SwiGLU (graph/ops.h swiglu_oai). The norm before the experts is stored as
// post_attention_norm (llama.cpp's name); it is the FFN's pre-norm and binds as ffn_norm.

#include <iterator>

#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

// llama.cpp and transformers fix the clamp at 7 for this architecture (config.json's swiglu_limit
// is not read by either; the converter refuses another value).
constexpr float kSwigluLimit = 7.0f;

void read_gpt_oss_hparams(const Metadata& md, Config& c) {
  c.rope_mode = RopeMode::Neox;
  require_equal_head_sizes(c);
  const std::string a = c.arch + ".";
  if (!md.has(a + "attention.sliding_window"))
    throw_error("metadata key '{}attention.sliding_window' is missing (gpt-oss slides every other "
                "layer)",
                a);
  read_sliding_window(md, c, 0, 2);
  c.rope_freq_base_swa = float(md.get_f64_or(a + "rope.freq_base_swa", 0.0));
  read_moe_hparams(md, c, 0, false);
  if (md.has(a + "expert_weights_norm") && md.get_bool(a + "expert_weights_norm"))
    throw_error("metadata key '{}expert_weights_norm': gpt-oss's softmax over the chosen already "
                "sums to 1",
                a);
  c.expert_gating = MoeGating::SoftmaxChosen;
  c.expert_swiglu_limit = kSwigluLimit;
}

std::vector<LayerTensor> gpt_oss_layer_tensors() {
  using enum LayerPart;
  // The MoE tensors as every family with experts names them (with_moe_tensors), then gpt-oss's
  // biases and sinks.
  std::vector<LayerTensor> t = with_moe_tensors({
      {"attn_norm.weight", &LayerWeights::attn_norm, shapes::embd},
      {"attn_q.weight", &LayerWeights::wq, shapes::q},
      {"attn_k.weight", &LayerWeights::wk, shapes::k},
      {"attn_v.weight", &LayerWeights::wv, shapes::v},
      {"attn_output.weight", &LayerWeights::wo, shapes::o},
      {"post_attention_norm.weight", &LayerWeights::ffn_norm, shapes::embd},
  });
  const LayerTensor extras[] = {
      {"attn_q.bias", &LayerWeights::bq, shapes::q_dim},
      {"attn_k.bias", &LayerWeights::bk, shapes::k_dim},
      {"attn_v.bias", &LayerWeights::bv, shapes::v_dim},
      {"attn_output.bias", &LayerWeights::bo, shapes::embd},
      {"attn_sinks.weight", &LayerWeights::attn_sinks, shapes::heads},
      {"ffn_gate_inp.bias", &LayerWeights::ffn_gate_inp_b, shapes::experts, false, Moe},
      {"ffn_gate_exps.bias", &LayerWeights::ffn_gate_exps_b, shapes::gate_up_exps_b, false, Moe},
      {"ffn_up_exps.bias", &LayerWeights::ffn_up_exps_b, shapes::gate_up_exps_b, false, Moe},
      {"ffn_down_exps.bias", &LayerWeights::ffn_down_exps_b, shapes::down_exps_b, false, Moe},
  };
  t.insert(t.end(), std::begin(extras), std::end(extras));
  return t;
}

}  // namespace

extern const Family kGptOssFamily{
    .name = "gpt-oss",
    .archs = {"gpt-oss"},
    .read_hparams = read_gpt_oss_hparams,
    .layer_tensors = gpt_oss_layer_tensors(),
    .build = build_llama_graph,  // biases, sinks and the experts' extras come with the weights
};

}  // namespace jitllm
