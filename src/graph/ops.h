// The backend-neutral op interface the family graphs (model/archs/*.cpp, through the builders in
// model/builder.h) are written against. A backend (backend/cpu/cpu_ops.h, backend/cuda/cuda_ops.h)
// implements `Ops` over its own memory; the graph never touches data directly, so the same graph
// runs everywhere. This layer includes no backend.
//
// Two kinds of ops: primitives (one operation each) and fused ops (a chain of primitives that a
// backend may run as fewer kernels). Each fused op's default implementation here is its plain
// twin: the primitives in order, which is what the CPU runs and what a backend's fused kernel is
// tested against. The builder chooses a fused op where the family's layer has that shape, so no
// fusion depends on the order in which a family file happens to call things.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "graph/act.h"
#include "graph/attention.h"
#include "graph/batch.h"
#include "graph/kv.h"
#include "graph/logits_pick.h"
#include "graph/moe.h"
#include "graph/rope.h"
#include "io/tensor_info.h"

namespace jitllm {

class Ops {
 public:
  virtual ~Ops() = default;

  // Starts a step: binds the batch (positions, token ids, KV) and recycles the scratch.
  virtual void begin(const Batch& batch, const KvLayout& kv) = 0;
  // Scratch activation valid until the next begin().
  virtual Act alloc(int64_t rows, int64_t cols) = 0;

  // --- primitives
  // out[i] = row batch.tokens[i] of `table` (the embedding lookup).
  virtual void embed(const TensorInfo& table, Act out) = 0;
  virtual void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) = 0;
  // out = x . w^T : x [n, k], w [k, rows] (ne order), out [n, rows].
  virtual void matmul(const TensorInfo& w, Act x, Act out) = 0;
  // out_i = x . w_i^T for matrices that share their input (q/k/v, gate/up). One call lets a
  // backend quantize x once and run the matrices as one pass (one dispatch, no idle tail per
  // matrix); the default runs them one by one.
  struct MatmulOut {
    const TensorInfo* w;
    Act out;
  };
  virtual void matmul_group(Act x, std::span<const MatmulOut> outs) {
    for (const MatmulOut& o : outs) matmul(*o.w, x, o.out);
  }
  // In place, x: [n, n_heads * head_dim], positions from the batch.
  virtual void rope(Act x, int n_heads, int head_dim, const RopeParams& params) = 0;
  // Stores k [n, spec.k_dim()] and v [n, spec.v_dim()] at the batch rows' positions in layer
  // `il` of their sequences, then attention of q [n, spec.q_dim()] over each row's sequence into
  // out [n, spec.out_dim()]. A backend refuses the spec fields it does not implement.
  virtual void attention(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec) = 0;
  virtual void swiglu(Act gate, Act up, Act out) = 0;  // out = silu(gate) * up
  // gpt-oss's clamped SwiGLU (llama.cpp's swiglu_oai): g = min(gate, limit),
  // u = clamp(up, -limit, limit), out = g * sigmoid(alpha * g) * (u + 1); out may be gate.
  virtual void swiglu_oai(Act gate, Act up, Act out, float alpha, float limit) = 0;
  // out = gelu(gate) * up with GELU's tanh approximation (Gemma's GeGLU); out may be gate.
  virtual void geglu(Act gate, Act up, Act out) = 0;
  virtual void add(Act acc, Act x) = 0;                // acc += x
  // x[r] += bias for every row r: a projection's bias (Qwen2's q/k/v). bias: [x.cols].
  virtual void add_bias(Act x, const std::vector<float>& bias) = 0;
  // x *= s in place (Gemma's embedding scale).
  virtual void scale(Act x, float s) = 0;
  // x = cap * tanh(x / cap) in place (Gemma 2's final logit soft-capping).
  virtual void softcap(Act x, float cap) = 0;
  // out[r, c] = x[r, first + c] for c < out.cols: one part of a fused projection's output (the
  // q, k and v of Phi-3's attn_qkv, the gate and up halves of its ffn_up).
  virtual void copy_cols(Act x, int64_t first, Act out) = 0;
  // The encoders' ops (BERT); the defaults refuse, naming the op, on a backend without them.
  // LayerNorm of each row of x into out (may be x): (x - mean) / sqrt(var + eps) * w + b, with w
  // or b empty: none.
  virtual void layer_norm(Act x, const std::vector<float>& w, const std::vector<float>& b,
                          float eps, Act out);
  // out = gelu(x) with the error function, BERT's activation (out may be x).
  virtual void gelu(Act x, Act out);
  // x[i] += row ids[i] of `table` ([x.cols, rows]): learned position embeddings (ids the
  // positions). ids are host memory.
  virtual void add_table_rows(const TensorInfo& table, std::span<const int32_t> ids, Act x);
  // The hybrids' ops (LFM2); the defaults refuse, naming the op, on a backend without them.
  // acc *= x elementwise (LFM2's gates: B * x, C * conv).
  virtual void mul(Act acc, Act x);
  // A depthwise causal convolution over each sequence's positions (LFM2's short convolution):
  // stores x [n, cols] at the rows' positions in layer il's cache (its K plane, one row of cols
  // per position: the state lives with the KV, so forks and prefix reuse carry it), then
  // out[i, c] = sum_{j < L} kernel[c * L + j] * row(pos_i - (L - 1) + j)[c], rows before
  // position 0 zero. kernel: host [cols * L].
  virtual void short_conv(int il, Act x, const std::vector<float>& kernel, int L, Act out);
  // out[r, first + c] = x[r, c] for c < x.cols: the other way, x written into part of each row of
  // out (MLA assembles each head's absorbed query and its rotated part side by side).
  virtual void copy_cols_into(Act x, Act out, int64_t first) = 0;
  // out[j] = x[rows[j]].
  virtual void select_rows(Act x, std::span<const int32_t> rows, Act out) = 0;
  // out[r] = sum over j < t of coef[r * t + j] * x[rows[r * t + j]], t = rows.size() / out.rows:
  // each row's experts' outputs weighted and summed (MoE). rows and coef are host memory.
  virtual void weighted_sum_rows(Act x, std::span<const int32_t> rows, std::span<const float> coef,
                                 Act out) = 0;

  // --- fused ops (defaults: the plain twins)
  // The attention half of a block without q/k norms or biases: q, k, v = x . wq/wk/wv^T; RoPE on
  // q and k; the KV store and attention of layer il into out [n, spec.out_dim()].
  struct Qkv {
    const TensorInfo* wq = nullptr;
    const TensorInfo* wk = nullptr;
    const TensorInfo* wv = nullptr;
  };
  virtual void qkv_rope_attention(int il, Act x, const Qkv& w, Act q, Act k, Act v,
                                  const RopeParams& rope, const AttnSpec& spec, Act out);
  // A residual matmul: out = x . w^T, then acc += out (out keeps the product).
  virtual void matmul_add(const TensorInfo& w, Act x, Act out, Act acc);
  // A gated FFN's first half: out = silu(x . gate_w^T) * (x . up_w^T); gate and up are scratch
  // for the two products ([n, n_ff] each; out may be gate).
  virtual void gate_up_swiglu(Act x, const TensorInfo& gate_w, const TensorInfo& up_w, Act gate,
                              Act up, Act out);
  // A mixture-of-experts FFN (graph/moe.h) over x [n, n_embd] into out [n, n_embd]: the router's
  // logits (kept in s.logits), each row's r.n_used experts (SiLU-gated FFNs) weighted as r says,
  // plus the shared expert. The default (graph/moe.cpp) routes on the host with route_experts
  // after reading the logits, runs each chosen expert once over all its rows and never reads an
  // expert no row chose.
  virtual void moe_ffn(Act x, const MoeExperts& w, const MoeRouting& r, const MoeScratch& s, Act out);

  // --- results and crossings
  // Copies x to host memory (rows * cols floats).
  virtual void read(Act x, float* host) = 0;
  // Copies rows * cols floats from host memory into x: the residual stream arriving from another
  // device. Complete (or, in a replayed step, ordered before the step's work) when it returns.
  virtual void write(Act x, const float* host) = 0;
  // Called by the graph before it issues ops on this backend after ops on another one (a split
  // model): a backend that keeps per-thread state (a CUDA context) makes itself current.
  virtual void enter() {}
  // host[i] = the column of the largest value of row i of x (the greedy token of a logits row):
  // the lowest column among equal maxima, as std::max_element and the sampler's greedy pick
  // (rows holding NaN are not ordered). A backend that keeps x on a device can do this there
  // and bring home only the ids; this default reads x and scans it on the host.
  virtual void argmax_rows(Act x, int32_t* host);
  // picks.out[i] = what picks.rows[i] asks of row i of x (graph/logits_pick.h): a sampler's
  // candidates. A backend that keeps x on a device selects there and brings home only those;
  // this default reads x and picks on the host (pick_row, the twin every backend equals).
  virtual void pick_logits(Act x, const LogitsPicks& picks);
  // Copies the KV this backend keeps for the positions of host page `from` into those of page
  // `to` (a forked session, runtime/session_fork.h), between steps. The default copies the host
  // page itself (kv.page_bytes()); a backend that keeps KV on a device copies its device pages.
  virtual void copy_kv_page(const uint8_t* from, uint8_t* to, const KvLayout& kv);
};

// Which backend runs each part of one model's graph (runtime/placement.h decides; the builder
// reads it in one place per layer). Several entries may point to the same Ops.
struct OpsRoute {
  Ops* embed = nullptr;      // the token embedding lookup
  std::vector<Ops*> layers;  // [n_layer] the whole block: norms, attention with its KV, FFN
  Ops* head = nullptr;       // output norm + output matrix
  // Everything on one backend.
  static OpsRoute single(Ops& ops, int n_layer) {
    return OpsRoute{&ops, std::vector<Ops*>(size_t(n_layer), &ops), &ops};
  }
  // Each backend once, in the order the graph first uses it.
  std::vector<Ops*> distinct() const {
    std::vector<Ops*> out;
    auto add = [&](Ops* o) {
      for (Ops* e : out)
        if (e == o) return;
      out.push_back(o);
    };
    add(embed);
    for (Ops* o : layers) add(o);
    add(head);
    return out;
  }
};

}  // namespace jitllm
