// The llama block graph, written once against the Ops interface. Tensor names passed to dump_
// are llama.cpp's callback names, so dumps can be compared with llama-eval-callback output.
#include "model/llama.h"

#include <cmath>

#include "core/error.h"

namespace jitllm {

LlamaModel::LlamaModel(std::shared_ptr<const ModelFile> file, Config config)
    : Model(std::move(file), std::move(config)) {
  weights_ = bind_llama_weights(*file_, config_);
}

void LlamaModel::forward(Ops& ops, const Batch& batch, const KvLayout& kv, float* logits,
                         int32_t* argmax) {
  const Config& c = config_;
  const ModelWeights& w = weights_;
  const int64_t n = int64_t(batch.n_rows());
  const int64_t n_out = int64_t(batch.out_rows.size());
  if (n == 0) return;
  ops.begin(batch, kv);

  const RopeParams rope = c.rope_params();
  const float kq_scale = 1.0f / std::sqrt(float(c.head_dim));

  Act x = ops.alloc(n, c.n_embd);       // [n, n_embd] residual stream
  Act cur = ops.alloc(n, c.n_embd);     // [n, n_embd]
  Act q = ops.alloc(n, c.q_dim());      // [n, n_head * head_dim]
  Act k = ops.alloc(n, c.kv_dim());     // [n, n_head_kv * head_dim]
  Act v = ops.alloc(n, c.kv_dim());     // [n, n_head_kv * head_dim]
  Act attn = ops.alloc(n, c.q_dim());   // [n, n_head * head_dim]
  Act gate = ops.alloc(n, c.n_ff);      // [n, n_ff]
  Act up = ops.alloc(n, c.n_ff);        // [n, n_ff]

  ops.embed(*w.token_embd, x);
  dump_(ops, x, "inp_embd", -1);

  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = w.layers[size_t(il)];
    ops.rms_norm(x, l.attn_norm, c.rms_eps, cur);
    dump_(ops, cur, "attn_norm", il);

    const Ops::MatmulOut qkv[] = {{l.wq, q}, {l.wk, k}, {l.wv, v}};
    ops.matmul_group(cur, qkv);
    ops.rope(q, c.n_head, c.head_dim, rope);
    ops.rope(k, c.n_head_kv, c.head_dim, rope);
    dump_(ops, q, "Qcur", il);
    dump_(ops, k, "Kcur", il);
    dump_(ops, v, "Vcur", il);

    ops.attention(il, q, k, v, attn, c.n_head, c.n_head_kv, c.head_dim, kq_scale);
    dump_(ops, attn, "kqv_out", il);
    ops.matmul(*l.wo, attn, cur);
    dump_(ops, cur, "attn_out", il);

    // After the last layer's attention only the rows whose logits are wanted go on (as
    // llama.cpp does with inp_out_ids): a prefill skips the last FFN for the other rows.
    if (il == c.n_layer - 1 && n_out < n) {
      Act xs = ops.alloc(n_out, c.n_embd), cs = ops.alloc(n_out, c.n_embd);
      ops.select_rows(x, batch.out_rows, xs);
      ops.select_rows(cur, batch.out_rows, cs);
      x = xs;
      cur = cs;
      gate.rows = up.rows = n_out;
    }
    ops.add(x, cur);
    dump_(ops, x, "ffn_inp", il);

    ops.rms_norm(x, l.ffn_norm, c.rms_eps, cur);
    dump_(ops, cur, "ffn_norm", il);
    const Ops::MatmulOut gate_up[] = {{l.ffn_gate, gate}, {l.ffn_up, up}};
    ops.matmul_group(cur, gate_up);
    ops.swiglu(gate, up, gate);
    dump_(ops, gate, "ffn_swiglu", il);
    ops.matmul(*l.ffn_down, gate, cur);
    dump_(ops, cur, "ffn_out", il);
    ops.add(x, cur);
    dump_(ops, x, "l_out", il);
  }
  if (n_out == 0) return;
  Act norm = ops.alloc(n_out, c.n_embd);
  ops.rms_norm(x, w.output_norm, c.rms_eps, norm);
  dump_(ops, norm, "result_norm", -1);
  Act out = ops.alloc(n_out, c.n_vocab);  // [n_out, n_vocab]
  ops.matmul(*w.output, norm, out);
  dump_(ops, out, "result_output", -1);
  if (argmax)
    ops.argmax_rows(out, argmax);
  else
    ops.read(out, logits);
}

}  // namespace jitllm
