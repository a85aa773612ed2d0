// The llama family (Llama 1/2/3.x with llama3 rope scaling, Mistral, Mixtral, SmolLM2,
// TinyLlama): RMSNorm, RoPE (normal pairs for GGUF llama; partial rotary from the Config), GQA
// attention (Mistral's sliding window where the file has one), a SwiGLU FFN or Mixtral's
// experts, untied or tied output. Tensor and intermediate names are llama.cpp's. The graph also
// serves the families whose layers differ only in what they bind (qwen2's biases, qwen3's q/k
// norms, gemma2/3's post-norms, olmo2's missing pre-norms, phi3's fused projections, the MoE
// families' experts) or in Config values (gemma).
#include <iterator>

#include "core/error.h"
#include "model/builder.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_llama_hparams(const Metadata& md, Config& c) {
  require_equal_head_sizes(c);
  // Mixtral: experts of the llama FFN's width, their chosen weights renormalised.
  if (c.n_expert > 0) read_moe_hparams(md, c, c.n_ff, true);
  // Mistral's sliding window over every layer, where the file has one (jitllm's converter writes
  // it from config.json; llama.cpp's does not, so its Mistral GGUFs attend to everything).
  read_sliding_window(md, c, 0, 0);
}

constexpr LayerTensor kLlamaLayer[] = {  // in the order llama.cpp binds them
    {"attn_norm.weight", &LayerWeights::attn_norm, shapes::embd},
    {"attn_q.weight", &LayerWeights::wq, shapes::q},
    {"attn_k.weight", &LayerWeights::wk, shapes::k},
    {"attn_v.weight", &LayerWeights::wv, shapes::v},
    {"attn_output.weight", &LayerWeights::wo, shapes::o},
    {"ffn_norm.weight", &LayerWeights::ffn_norm, shapes::embd},
    {"ffn_gate.weight", &LayerWeights::ffn_gate, shapes::gate_up},
    {"ffn_up.weight", &LayerWeights::ffn_up, shapes::gate_up},
    {"ffn_down.weight", &LayerWeights::ffn_down, shapes::down},
};

}  // namespace

void require_equal_head_sizes(const Config& c) {
  if (c.head_dim_v != c.head_dim)
    throw_error("metadata: {}.attention.value_length {} differs from key_length {} (not supported)",
                c.arch, c.head_dim_v, c.head_dim);
}

std::vector<LayerTensor> llama_layer_tensors() { return {std::begin(kLlamaLayer), std::end(kLlamaLayer)}; }

void build_llama_graph(GraphBuilder& b) {
  const Config& c = b.config();
  b.build_inp_embd();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = b.layer(il);
    b.begin_layer(il);
    Act cur = b.build_norm(l.attn_norm, "attn_norm", il);
    Act attn = b.build_attn(il, cur, l, b.attn_spec(il), c.rope_params_of(il));
    b.build_residual(il, *l.wo, attn, "attn_out", "ffn_inp", &l.attn_post_norm, "attn_post_norm",
                     &l.bo);
    b.build_ffn_block(il, l);
  }
}

// Mistral, SmolLM2, TinyLlama and Llama 1-3 all ship as general.architecture = llama; the others
// are names some converters use for the same graph.
extern const Family kLlamaFamily{
    .name = "llama",
    .archs = {"llama", "mistral", "smollm", "granite_llama"},
    .read_hparams = read_llama_hparams,
    .layer_tensors = with_moe_tensors(llama_layer_tensors()),
    .build = build_llama_graph,
};

ModelWeights bind_llama_weights(const ModelFile& file, Config& config) {
  return bind_weights(file, config, kLlamaLayer);
}

}  // namespace jitllm
