// GraphBuilder: the shared pieces every family's graph is made of (build_norm, build_attn,
// build_residual, build_ffn, build_output), over the backend-neutral ops. It owns what no family
// should write twice:
//  - the device crossing: the residual stream lives on one backend at a time; at a change of
//    device it, and nothing else, crosses (read to the host, written into the next backend's
//    copy), once per change;
//  - the step's buffers, allocated on every backend of the route in the same order every step
//    (backends reuse scratch by allocation order), sized for the widest layer;
//  - the choice of fused ops (graph/ops.h): a family's layer of the plain shape gets the fused
//    op, anything else (or a dump of the intermediates) the primitives in order;
//  - the output rows: after the last layer's attention only the rows whose logits are wanted go
//    on (llama.cpp's inp_out_ids); with none wanted (a prefill chunk) the step ends there, its
//    KV stored;
//  - the named dumps (model/dump.h), with llama.cpp's callback names.
#pragma once

#include <vector>

#include "graph/ops.h"
#include "model/config.h"
#include "model/dump.h"
#include "model/weights.h"

namespace jitllm {

class GraphBuilder {
 public:
  GraphBuilder(const Config& config, const ModelWeights& weights, const OpsRoute& route,
               const Batch& batch, const KvLayout& kv, TensorDumper& dump,
               std::vector<float>& crossing);

  const Config& config() const { return c_; }
  const ModelWeights& weights() const { return w_; }
  const LayerWeights& layer(int il) const { return w_.layers[size_t(il)]; }
  // The attention of layer il as the Config describes it (causal, 1/sqrt(head_dim) scale), with
  // the layer's sinks where it has them.
  AttnSpec attn_spec(int il) const;

  // x = the token embeddings, on the embedding's backend ("inp_embd"), times the Config's
  // embd_scale where it has one ("inp_scaled"); an encoder's learned positions and token types
  // (the batch's, else type 0) added and its LayerNorm applied ("inp_norm").
  void build_inp_embd();
  // Moves the residual stream to the backend that runs layer il (a no-op on one backend).
  void begin_layer(int il);
  // The residual stream [rows still going on, n_embd].
  Act x() const { return x_; }
  // RMSNorm of the residual stream into the layer scratch [rows, n_embd]; with no weights (a
  // family without this norm) the residual stream itself.
  Act build_norm(const std::vector<float>& w, const char* name, int il);
  // q/k/v of `cur` ([rows, n_embd]) from separate or fused projections, plus their biases where
  // the layer has them; the RMSNorms of q and k where it has them, per head or over the whole
  // projection ("Qcur_normed", "Kcur_normed"); RoPE on q and k; the KV store of layer il and
  // attention: the attention output [rows, spec.out_dim()] ("Qcur", "Kcur", "Vcur", "kqv_out").
  Act build_attn(int il, Act cur, const LayerWeights& l, const AttnSpec& spec, const RopeParams& rope);
  // Multi-head latent attention (builder_mla.cpp; Config::is_mla) in llama.cpp's absorbed form:
  // q (direct or through its LoRA) split per head into its nope and rope parts; the latent and
  // the shared rope part from wkv_a_mqa, the latent RMS-normed; RoPE on the rope parts only; each
  // head's q_nope absorbed through its wk_b into the latent space. Attention is then MQA over
  // rows [latent, k_pe] that the cache keeps (spec: one KV head of n_lora_kv + n_rot, V the
  // first n_lora_kv of each row), and each head's output [n_lora_kv] goes through its wv_b.
  // Returns [rows, n_head * head_dim_v_mla], the input of attn_output ("q", "kv_cmpr",
  // "Qcur", "Kcur", "kqv_out" as llama.cpp names them).
  Act build_mla_attn(int il, Act cur, const LayerWeights& l, const AttnSpec& spec,
                     const RopeParams& rope);
  // x += in . w^T (+ bias where one is given and not empty: gpt-oss's attn_output.bias)
  // ("<name>" the product, "<sum_name>" the new x), or, with a post-norm (Gemma 2/3, OLMo2),
  // x += rms_norm(in . w^T) ("<post_name>" the normed product). In the last layer, the first
  // residual keeps only the output rows (see above).
  void build_residual(int il, const TensorInfo& w, Act in, const char* name, const char* sum_name,
                      const std::vector<float>* post_norm = nullptr, const char* post_name = nullptr,
                      const std::vector<float>* bias = nullptr);
  // The gated FFN's first half, act(cur . gate^T) * (cur . up^T) [rows, n_ff(il)], act SiLU or
  // the Config's GELU-tanh, gate and up separate or fused in ffn_up ("ffn_swiglu"/"ffn_geglu").
  Act build_ffn(int il, Act cur, const LayerWeights& l);
  // A mixture-of-experts FFN (Ops::moe_ffn) with the Config's routing over cur ([rows, n_embd]),
  // with the layer's router and expert biases and the Config's clamped SwiGLU where it has them:
  // the weighted sum of each row's experts and the shared expert [rows, n_embd]
  // ("ffn_moe_logits" the router's logits, "ffn_moe_out" the sum).
  Act build_moe_ffn(int il, Act cur, const LayerWeights& l);
  // x += y (an FFN output already projected: the MoE FFN's), or x += rms_norm(y) with a
  // post-norm; "<sum_name>" the new x.
  void build_residual_sum(int il, Act y, const char* sum_name,
                          const std::vector<float>* post_norm = nullptr, const char* post_name = nullptr);
  // The FFN half of a block: the layer's ffn_norm, then its experts (build_moe_ffn) or its
  // gated FFN, added to x with the layer's post-FFN norm where it has one ("ffn_norm",
  // "ffn_out", "ffn_post_norm", "l_out").
  void build_ffn_block(int il, const LayerWeights& l);
  // Output norm and matrix on the head's backend, the Config's final soft-capping, then the
  // logits or greedy ids home ("result_norm", "result_output"); with `hidden` set, the output
  // rows' normed hidden states [out_rows, n_embd] home instead (embeddings).
  void build_output(float* logits, int32_t* argmax, float* hidden = nullptr,
                    const LogitsPicks* picks = nullptr);
  // x = LayerNorm(x) by w and bias (BERT's norms after each residual), "<name>".
  void build_layer_norm(const std::vector<float>& w, const std::vector<float>& bias, const char* name, int il);
  // An ungated FFN's first half: gelu(cur . up^T + up bias) [rows, n_ff(il)] ("ffn_gelu").
  Act build_ffn_gelu(int il, Act cur, const LayerWeights& l);
  // LFM2's short convolution block up to its out_proj: B, C, x = cur . in_proj^T; C * conv(B * x)
  // over each sequence's positions with the layer's state (Ops::short_conv) [rows, n_embd]
  // ("shortconv_in", "shortconv_conv").
  Act build_short_conv(int il, Act cur, const LayerWeights& l);
  // False once the step has nothing left to compute (no output rows after the last attention).
  bool live() const { return x_.rows > 0; }

 private:
  struct Buffers {
    Ops* ops = nullptr;
    Act x, cur, q, k, v, attn, gate, up;  // widest-layer scratch, see builder.cpp
    Act q_normed, k_normed;               // only for families with q/k norms
    Act qkv;                              // [n, q + k + v] only for fused q/k/v projections
    Act gate_up;                          // [n, 2 * n_ff] only for fused gate/up projections
    Act normed;                           // [n, n_embd] only for families with post-norms
    MoeScratch moe;                       // only for models with experts (graph/moe.h)
    Act moe_out;                          // [n, n_embd] only for models with experts
    Act conv_bcx, conv_b, conv_c, conv_x; // [n, 3 n_embd], [n, n_embd] x 3: only for LFM2
    // Only for multi-head latent attention (builder_mla.cpp), widest layer's:
    Act mla_q;      // [n, n_head * head_dim_k_mla] q of the decompressed heads
    Act mla_q_a;    // [n, n_lora_q] q's LoRA, then normed in mla_q_a_n (when n_lora_q > 0)
    Act mla_q_a_n;  // [n, n_lora_q]
    Act mla_kv_a;   // [n, n_lora_kv + n_rot] the latent and the shared rope part
    Act mla_lat;    // [n, n_lora_kv] the normed latent; then per head its absorbed q / its output
    Act mla_nope;   // [n, qk_nope] one head's q_nope
    Act mla_pe;     // [n, n_rot] one head's q_pe, or k_pe
    Act mla_v;      // [n, n_head * head_dim_v_mla] every head's v
    Act mla_vh;     // [n, head_dim_v_mla] one head's v
  };
  Buffers& on(Ops* o);
  void move_to(Ops* to);
  static Act view(Act buf, int64_t rows, int64_t cols) { return Act{buf.data, rows, cols}; }

  const Config& c_;
  const ModelWeights& w_;
  const OpsRoute& route_;
  const Batch& batch_;
  TensorDumper& dump_;
  std::vector<float>& crossing_;
  std::vector<Buffers> buffers_;
  Ops* at_ = nullptr;  // the backend holding the residual stream
  Act x_;
  int64_t n_out_ = 0;
  bool selected_ = false;  // the output rows were selected (the last layer's first residual)
};

}  // namespace jitllm
