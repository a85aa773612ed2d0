// Weights of a model bound as views onto an opened model file (no copies of the matrices; the
// small 1-D vectors such as norms are converted to f32 and owned). A family lists the tensors
// of its layers in a table (LayerTensor: GGUF name, slot, expected shape, optional or not); the
// binder here checks every listed tensor's presence, format and shape against the Config and
// names the tensor when one is off: "blk.1.attn_k.weight: expected [256, 128], got [256, 256]".
// Slots a family does not list stay empty (nullptr / no elements).
#pragma once

#include <span>
#include <string>
#include <variant>
#include <vector>

#include "io/model_file.h"
#include "model/config.h"

namespace jitllm {

// Every tensor slot any family binds (llama.cpp's llama_layer keeps the same union of optional
// members). Shapes in ne order (row length first).
struct LayerWeights {
  std::vector<float> attn_norm;          // [n_embd]
  const TensorInfo* wq = nullptr;        // [n_embd, q_dim]
  const TensorInfo* wk = nullptr;        // [n_embd, k_dim]
  const TensorInfo* wv = nullptr;        // [n_embd, v_dim]
  const TensorInfo* wo = nullptr;        // [q_dim, n_embd]
  const TensorInfo* wqkv = nullptr;      // [n_embd, q_dim + k_dim + v_dim] fused (Phi-3), or null
  std::vector<float> bq, bk, bv;         // [q_dim], [k_dim], [v_dim] projection biases (Qwen2)
  std::vector<float> bo;                 // [n_embd] output projection bias (gpt-oss)
  std::vector<float> attn_sinks;         // [n_head] per-head sink logits (gpt-oss)
  // RMSNorms of q and k: [head_dim] per head (Qwen3, Gemma 3) or [q_dim] / [k_dim] over the
  // whole projection (OLMo2); the builder tells them apart by their length.
  std::vector<float> attn_q_norm;
  std::vector<float> attn_k_norm;
  std::vector<float> attn_post_norm;     // [n_embd] norm of the attention output (Gemma 2/3, OLMo2)
  std::vector<float> ffn_norm;           // [n_embd]
  const TensorInfo* ffn_gate = nullptr;  // [n_embd, n_ff]; null when ffn_up holds both halves
  const TensorInfo* ffn_up = nullptr;    // [n_embd, n_ff], or [n_embd, 2 * n_ff] gate then up (Phi-3)
  const TensorInfo* ffn_down = nullptr;  // [n_ff, n_embd]
  std::vector<float> ffn_post_norm;      // [n_embd] norm of the FFN output (Gemma 2/3, OLMo2)
  // BERT's biases and its LayerNorms after each residual (weight and bias, [n_embd] each).
  std::vector<float> ffn_up_b;           // [n_ff]
  std::vector<float> ffn_down_b;         // [n_embd]
  std::vector<float> attn_out_norm, attn_out_norm_b;
  std::vector<float> layer_out_norm, layer_out_norm_b;
  // LFM2's short convolution (layers without KV heads): in_proj [n_embd, 3 * n_embd] (B, C and x
  // in that order), the depthwise kernel [L * n_embd] (L taps per channel), out_proj [n_embd,
  // n_embd].
  const TensorInfo* shortconv_in = nullptr;
  std::vector<float> shortconv_conv;
  const TensorInfo* shortconv_out = nullptr;

  // Mixture of experts (layers with a router; ffn_gate/up/down stay null there).
  const TensorInfo* ffn_gate_inp = nullptr;   // [n_embd, n_expert] the router
  const TensorInfo* ffn_gate_exps = nullptr;  // [n_embd, n_ff_exp, n_expert] stacked experts
  const TensorInfo* ffn_up_exps = nullptr;    // [n_embd, n_ff_exp, n_expert]
  const TensorInfo* ffn_down_exps = nullptr;  // [n_ff_exp, n_embd, n_expert]
  // [n_expert] each expert's matrix of the stacked tensors above, a view of its bytes (its own
  // pages in a .jlm), the way the matmul ops take matrices.
  std::vector<TensorInfo> gate_exp, up_exp, down_exp;
  // Biases (gpt-oss): the router's [n_expert]; the experts' stacked [n_ff_exp, n_expert] (gate,
  // up) and [n_embd, n_expert] (down), and the same cut per expert.
  std::vector<float> ffn_gate_inp_b;
  std::vector<float> ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
  std::vector<std::vector<float>> gate_exp_b, up_exp_b, down_exp_b;
  // Shared expert (Qwen2-MoE): its gate vector [n_embd] (viewed as a [n_embd, 1] matrix in
  // shared_gate_matrix) and its gated FFN.
  const TensorInfo* ffn_gate_inp_shexp = nullptr;
  TensorInfo shared_gate_matrix;
  const TensorInfo* ffn_gate_shexp = nullptr;  // [n_embd, n_ff_shexp]
  const TensorInfo* ffn_up_shexp = nullptr;    // [n_embd, n_ff_shexp]
  const TensorInfo* ffn_down_shexp = nullptr;  // [n_ff_shexp, n_embd]

  // DeepSeek-V3's expert selection bias [n_expert] (exp_probs_b.bias): added for the choice only.
  std::vector<float> ffn_exp_probs_b;

  // Multi-head latent attention (deepseek2; Config::is_mla), llama.cpp's names and shapes: q
  // directly (wq, [n_embd, n_head * head_dim_k_mla]) or through a LoRA, the latent with the
  // shared rope part, and the per-head halves of kv_b in the split form llama.cpp writes.
  const TensorInfo* wq_a = nullptr;       // [n_embd, n_lora_q]
  std::vector<float> attn_q_a_norm;       // [n_lora_q]
  const TensorInfo* wq_b = nullptr;       // [n_lora_q, n_head * head_dim_k_mla]
  const TensorInfo* wkv_a_mqa = nullptr;  // [n_embd, n_lora_kv + n_rot]
  std::vector<float> attn_kv_a_norm;      // [n_lora_kv]
  const TensorInfo* wk_b = nullptr;       // [qk_nope, n_lora_kv, n_head]: q_nope -> latent
  const TensorInfo* wv_b = nullptr;       // [n_lora_kv, head_dim_v_mla, n_head]: latent -> v
  // Older converters' unsplit form: per head qk_nope rows of k_b then head_dim_v_mla of v_b.
  const TensorInfo* wkv_b = nullptr;      // [n_lora_kv, n_head * (qk_nope + head_dim_v_mla)]
  // [n_head] head h's matrix of wk_b ([qk_nope, n_lora_kv]) and of wv_b ([n_lora_kv,
  // head_dim_v_mla]) as the matmul ops take them: views of their bytes, or from wkv_b its v rows
  // as a view and its k rows transposed into k_b_owned (F32, [n_head][n_lora_kv][qk_nope]).
  std::vector<TensorInfo> k_b_head, v_b_head;
  std::vector<float> k_b_owned;

  bool is_moe() const { return ffn_gate_inp != nullptr; }
  bool is_mla() const { return wkv_a_mqa != nullptr; }
};

struct ModelWeights {
  const TensorInfo* token_embd = nullptr;  // [n_embd, n_vocab]
  std::vector<float> output_norm;          // [n_embd]
  const TensorInfo* output = nullptr;      // [n_embd, n_vocab]; == token_embd when tied
  bool tied_embeddings = false;
  // Encoders (BERT): learned positions [n_embd, n_ctx_train]; token type 0's row [n_embd]
  // (added to every token: inputs here are of one type); the embeddings' LayerNorm; a
  // cross-encoder's classification head: tanh(x . cls^T + cls_b) . cls_out^T + cls_out_b, cls
  // [n_embd, n_embd] (the pooler; null in llama.cpp's files: then x . cls_out^T + cls_out_b),
  // cls_out [n_embd, n_class] (null: no head).
  const TensorInfo* position_embd = nullptr;
  std::vector<float> token_type0;
  const TensorInfo* token_types = nullptr;  // [n_embd, n_types] (null: none)
  int64_t n_token_types = 0;                // its rows
  std::vector<float> token_embd_norm, token_embd_norm_b;
  const TensorInfo* cls = nullptr;
  std::vector<float> cls_b;
  const TensorInfo* cls_out = nullptr;
  std::vector<float> cls_out_b;
  std::vector<LayerWeights> layers;
  // What was bound from the file, for costs and placement (runtime/backends.cpp): every tensor of
  // layer il ([n_layer]), and those of the head (output norm, output matrix unless tied).
  std::vector<std::vector<const TensorInfo*>> layer_tensors;
  std::vector<const TensorInfo*> head_tensors;
  // Where the experts come from when they are paged (Model::page_experts); null: the views in
  // gate_exp / up_exp / down_exp, resident.
  ExpertPages* expert_pages = nullptr;
};

// Expected shape of a layer tensor from the Config (ne order).
using LayerShape = std::vector<int64_t> (*)(const Config& c, int il);
namespace shapes {
std::vector<int64_t> embd(const Config& c, int il);      // [n_embd]
std::vector<int64_t> head_dim(const Config& c, int il);  // [head_dim]
std::vector<int64_t> q(const Config& c, int il);         // [n_embd, q_dim(il)]
std::vector<int64_t> k(const Config& c, int il);         // [n_embd, k_dim(il)]
std::vector<int64_t> v(const Config& c, int il);         // [n_embd, v_dim(il)]
std::vector<int64_t> o(const Config& c, int il);         // [n_head(il) * head_dim_v, n_embd]
std::vector<int64_t> gate_up(const Config& c, int il);   // [n_embd, n_ff(il)]
std::vector<int64_t> down(const Config& c, int il);      // [n_ff(il), n_embd]
std::vector<int64_t> q_dim(const Config& c, int il);     // [q_dim(il)]
std::vector<int64_t> k_dim(const Config& c, int il);     // [k_dim(il)]
std::vector<int64_t> v_dim(const Config& c, int il);     // [v_dim(il)]
std::vector<int64_t> qkv(const Config& c, int il);       // [n_embd, q_dim + k_dim + v_dim]
std::vector<int64_t> gate_up_fused(const Config& c, int il);  // [n_embd, 2 * n_ff(il)]
std::vector<int64_t> router(const Config& c, int il);         // [n_embd, n_expert]
std::vector<int64_t> gate_up_exps(const Config& c, int il);   // [n_embd, n_ff_exp, n_expert]
std::vector<int64_t> down_exps(const Config& c, int il);      // [n_ff_exp, n_embd, n_expert]
std::vector<int64_t> gate_up_shexp(const Config& c, int il);  // [n_embd, n_ff_shexp]
std::vector<int64_t> down_shexp(const Config& c, int il);     // [n_ff_shexp, n_embd]
std::vector<int64_t> heads(const Config& c, int il);          // [n_head(il)]
std::vector<int64_t> experts(const Config& c, int il);        // [n_expert]
std::vector<int64_t> gate_up_exps_b(const Config& c, int il); // [n_ff_exp, n_expert]
std::vector<int64_t> down_exps_b(const Config& c, int il);    // [n_embd, n_expert]
std::vector<int64_t> ff(const Config& c, int il);             // [n_ff(il)]
std::vector<int64_t> conv_in(const Config& c, int il);        // [n_embd, 3 * n_embd]
std::vector<int64_t> conv_kernel(const Config& c, int il);    // [shortconv_l_cache, n_embd]
std::vector<int64_t> embd_square(const Config& c, int il);    // [n_embd, n_embd]
// Multi-head latent attention (Config::is_mla).
std::vector<int64_t> mla_q(const Config& c, int il);          // [n_embd, n_head * head_dim_k_mla]
std::vector<int64_t> mla_q_a(const Config& c, int il);        // [n_embd, n_lora_q]
std::vector<int64_t> mla_q_a_norm(const Config& c, int il);   // [n_lora_q]
std::vector<int64_t> mla_q_b(const Config& c, int il);        // [n_lora_q, n_head * head_dim_k_mla]
std::vector<int64_t> mla_kv_a(const Config& c, int il);       // [n_embd, n_lora_kv + n_rot]
std::vector<int64_t> mla_kv_a_norm(const Config& c, int il);  // [n_lora_kv]
std::vector<int64_t> mla_k_b(const Config& c, int il);        // [qk_nope, n_lora_kv, n_head]
std::vector<int64_t> mla_v_b(const Config& c, int il);        // [n_lora_kv, head_dim_v_mla, n_head]
std::vector<int64_t> mla_kv_b(const Config& c, int il);       // [n_lora_kv, n_head * (qk_nope + v)]
std::vector<int64_t> mla_o(const Config& c, int il);          // [n_head * head_dim_v_mla, n_embd]
}  // namespace shapes

// Which layers a table entry belongs to: every layer, the dense FFN layers, or the layers with
// a router (blk.N.ffn_gate_inp.weight in the file, in a model with experts).
enum class LayerPart { Any, Dense, Moe };

// One tensor of every layer of a family: "blk.N." + name, bound into `slot`.
struct LayerTensor {
  const char* name;  // e.g. "attn_q.weight"
  // A matrix is bound as a view; a vector (norms, biases, sinks; any shape) as its f32 values.
  std::variant<const TensorInfo* LayerWeights::*, std::vector<float> LayerWeights::*> slot;
  LayerShape shape;
  bool optional = false;
  LayerPart part = LayerPart::Any;
};

// `table` for a family with experts: its dense FFN entries (ffn_gate/ffn_up/ffn_down) marked
// LayerPart::Dense, then the MoE FFN's tensors as llama.cpp names them (router, stacked experts,
// optional shared expert) marked LayerPart::Moe, so one table serves both kinds of layer.
std::vector<LayerTensor> with_moe_tensors(std::vector<LayerTensor> table);

// Binds the model-wide tensors (token_embd, output_norm, output or tied, rope_freqs, Phi-3's
// rope_factors_short/long) and, for each layer, the family's table. Completes `config` from the
// tensors where metadata left a gap (n_vocab from token_embd; rope factors). A layer must end up
// with q, k and v projections, separate or fused.
ModelWeights bind_weights(const ModelFile& file, Config& config, std::span<const LayerTensor> layer);

// The llama family's tensors (model/archs/llama.cpp).
ModelWeights bind_llama_weights(const ModelFile& file, Config& config);

}  // namespace jitllm
