// The llama block graph, written once against the Ops interface. Tensor names passed to dump_
// are llama.cpp's callback names, so dumps can be compared with llama-eval-callback output.
#include "model/llama.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace jitllm {

LlamaModel::LlamaModel(std::shared_ptr<const ModelFile> file, Config config)
    : Model(std::move(file), std::move(config)) {
  weights_ = bind_llama_weights(*file_, config_);
}

void LlamaModel::forward(const OpsRoute& route, const Batch& batch, const KvLayout& kv,
                         float* logits, int32_t* argmax) {
  const Config& c = config_;
  const ModelWeights& w = weights_;
  const int64_t n = int64_t(batch.n_rows());
  const int64_t n_out = int64_t(batch.out_rows.size());
  if (n == 0) return;
  if (!route.embed || !route.head || route.layers.size() != size_t(c.n_layer))
    throw_error("forward: the ops route covers {} of {} layers", route.layers.size(), c.n_layer);

  const RopeParams rope = c.rope_params();
  const float kq_scale = 1.0f / std::sqrt(float(c.head_dim));

  // Every backend of the route sees the batch and gets its buffers, in the same order every step
  // (backends reuse scratch by allocation order): the residual stream on each, the layer
  // buffers on those that run layers.
  struct Buffers {
    Ops* ops = nullptr;
    Act x, cur, q, k, v, attn, gate, up;
  };
  std::vector<Buffers> on;
  for (Ops* o : route.distinct()) {
    o->enter();
    o->begin(batch, kv);
    Buffers b;
    b.ops = o;
    b.x = o->alloc(n, c.n_embd);  // [n, n_embd] residual stream
    if (std::find(route.layers.begin(), route.layers.end(), o) != route.layers.end()) {
      b.cur = o->alloc(n, c.n_embd);    // [n, n_embd]
      b.q = o->alloc(n, c.q_dim());     // [n, n_head * head_dim]
      b.k = o->alloc(n, c.kv_dim());    // [n, n_head_kv * head_dim]
      b.v = o->alloc(n, c.kv_dim());    // [n, n_head_kv * head_dim]
      b.attn = o->alloc(n, c.q_dim());  // [n, n_head * head_dim]
      b.gate = o->alloc(n, c.n_ff);     // [n, n_ff]
      b.up = o->alloc(n, c.n_ff);       // [n, n_ff]
    }
    on.push_back(b);
  }
  auto buffers = [&](Ops* o) -> Buffers& {
    for (Buffers& b : on)
      if (b.ops == o) return b;
    throw_error("forward: a backend outside the route");
  };

  // The residual stream x lives on one backend at a time. At a change of device it, and nothing
  // else, crosses: read to the host, written into the next backend's copy.
  Ops* at = route.embed;
  at->enter();
  Act x = buffers(at).x;
  auto move_to = [&](Ops* to) {
    if (to == at) return;
    crossing_.resize(size_t(x.rows * x.cols));
    at->read(x, crossing_.data());
    to->enter();
    Act moved = buffers(to).x;  // [x.rows, n_embd]: the rows still going on
    moved.rows = x.rows;
    to->write(moved, crossing_.data());
    x = moved;
    at = to;
  };

  at->embed(*w.token_embd, x);
  dump_(*at, x, "inp_embd", -1);

  for (int il = 0; il < c.n_layer; ++il) {
    // Layer il runs on the backend the placement gave it: its norms, attention with its KV, FFN.
    move_to(route.layers[size_t(il)]);
    Ops& ops = *at;
    Buffers& b = buffers(at);
    Act cur = b.cur, q = b.q, k = b.k, v = b.v, attn = b.attn, gate = b.gate, up = b.up;
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
  move_to(route.head);
  Ops& ops = *at;
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
