// GraphBuilder (see builder.h).
#include "model/builder.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace jitllm {

GraphBuilder::GraphBuilder(const Config& config, const ModelWeights& weights, const OpsRoute& route,
                           const Batch& batch, const KvLayout& kv, TensorDumper& dump,
                           std::vector<float>& crossing)
    : c_(config), w_(weights), route_(route), batch_(batch), dump_(dump), crossing_(crossing) {
  const int64_t n = int64_t(batch.n_rows());
  n_out_ = int64_t(batch.out_rows.size());
  if (!route.embed || !route.head || route.layers.size() != size_t(c_.n_layer))
    throw_error("forward: the ops route covers {} of {} layers", route.layers.size(), c_.n_layer);
  int q = 0, k = 0, v = 0, out = 0, ff = 0;
  bool qk_norms = false;
  for (const LayerWeights& l : w_.layers) qk_norms |= !l.attn_q_norm.empty() || !l.attn_k_norm.empty();
  for (int il = 0; il < c_.n_layer; ++il) {
    q = std::max(q, c_.q_dim_of(il));
    k = std::max(k, c_.k_dim_of(il));
    v = std::max(v, c_.v_dim_of(il));
    out = std::max(out, c_.n_head_of(il) * c_.head_dim_v);
    ff = std::max(ff, c_.n_ff_of(il));
  }
  for (Ops* o : route.distinct()) {
    o->enter();
    o->begin(batch, kv);
    Buffers b;
    b.ops = o;
    b.x = o->alloc(n, c_.n_embd);  // [n, n_embd] residual stream
    if (std::find(route.layers.begin(), route.layers.end(), o) != route.layers.end()) {
      b.cur = o->alloc(n, c_.n_embd);  // [n, n_embd]
      b.q = o->alloc(n, q);            // [n, n_head * head_dim]
      b.k = o->alloc(n, k);            // [n, n_head_kv * head_dim]
      b.v = o->alloc(n, v);            // [n, n_head_kv * head_dim_v]
      b.attn = o->alloc(n, out);       // [n, n_head * head_dim_v]
      b.gate = o->alloc(n, ff);        // [n, n_ff]
      b.up = o->alloc(n, ff);          // [n, n_ff]
      if (qk_norms) {
        b.q_normed = o->alloc(n, q);  // [n, n_head * head_dim]
        b.k_normed = o->alloc(n, k);  // [n, n_head_kv * head_dim]
      }
    }
    buffers_.push_back(b);
  }
  at_ = route.embed;
  at_->enter();
  x_ = on(at_).x;
}

GraphBuilder::Buffers& GraphBuilder::on(Ops* o) {
  for (Buffers& b : buffers_)
    if (b.ops == o) return b;
  throw_error("forward: a backend outside the route");
}

void GraphBuilder::move_to(Ops* to) {
  if (to == at_) return;
  crossing_.resize(size_t(x_.rows * x_.cols));
  at_->read(x_, crossing_.data());
  to->enter();
  Act moved = on(to).x;  // [x.rows, n_embd]: the rows still going on
  moved.rows = x_.rows;
  to->write(moved, crossing_.data());
  x_ = moved;
  at_ = to;
}

AttnSpec GraphBuilder::attn_spec(int il) const {
  AttnSpec s;
  s.n_head = c_.n_head_of(il);
  s.n_head_kv = c_.n_head_kv_of(il);
  s.head_dim_k = c_.head_dim;
  s.head_dim_v = c_.head_dim_v;
  s.scale = 1.0f / std::sqrt(float(c_.head_dim));
  return s;
}

void GraphBuilder::build_inp_embd() {
  at_->embed(*w_.token_embd, x_);
  dump_(*at_, x_, "inp_embd", -1);
}

void GraphBuilder::begin_layer(int il) { move_to(route_.layers[size_t(il)]); }

Act GraphBuilder::build_norm(const std::vector<float>& w, const char* name, int il) {
  Act cur = view(on(at_).cur, x_.rows, c_.n_embd);
  if (!live()) return cur;
  at_->rms_norm(x_, w, c_.rms_eps, cur);
  dump_(*at_, cur, name, il);
  return cur;
}

Act GraphBuilder::build_attn(int il, Act cur, const LayerWeights& l, const AttnSpec& spec,
                             const RopeParams& rope) {
  Buffers& b = on(at_);
  const int64_t n = cur.rows;
  Act q = view(b.q, n, spec.q_dim()), k = view(b.k, n, spec.k_dim());
  const Act v = view(b.v, n, spec.v_dim()), out = view(b.attn, n, spec.out_dim());
  Ops& ops = *at_;
  const bool qk_norms = !l.attn_q_norm.empty() || !l.attn_k_norm.empty();
  if (!dump_.enabled() && !qk_norms) {
    ops.qkv_rope_attention(il, cur, Ops::Qkv{l.wq, l.wk, l.wv}, q, k, v, rope, spec, out);
  } else {  // the same ops one by one (so each intermediate can be read), or with q/k norms
    Act qr = q, kr = k;  // what RoPE and attention take
    const Ops::MatmulOut qkv[] = {{l.wq, q}, {l.wk, k}, {l.wv, v}};
    ops.matmul_group(cur, qkv);
    // Per-head norms: the rows of q [n, n_head * head_dim] read as [n * n_head, head_dim].
    if (!l.attn_q_norm.empty()) {
      qr = view(b.q_normed, n, spec.q_dim());
      ops.rms_norm(Act{q.data, n * spec.n_head, spec.head_dim_k}, l.attn_q_norm, c_.rms_eps,
                   Act{qr.data, n * spec.n_head, spec.head_dim_k});
      dump_(ops, qr, "Qcur_normed", il);
    }
    if (!l.attn_k_norm.empty()) {
      kr = view(b.k_normed, n, spec.k_dim());
      ops.rms_norm(Act{k.data, n * spec.n_head_kv, spec.head_dim_k}, l.attn_k_norm, c_.rms_eps,
                   Act{kr.data, n * spec.n_head_kv, spec.head_dim_k});
      dump_(ops, kr, "Kcur_normed", il);
    }
    q = qr;
    k = kr;
    ops.rope(q, spec.n_head, spec.head_dim_k, rope);
    ops.rope(k, spec.n_head_kv, spec.head_dim_k, rope);
    dump_(ops, q, "Qcur", il);
    dump_(ops, k, "Kcur", il);
    dump_(ops, v, "Vcur", il);
    ops.attention(il, q, k, v, out, spec);
  }
  dump_(ops, out, "kqv_out", il);
  return out;
}

void GraphBuilder::build_residual(int il, const TensorInfo& w, Act in, const char* name,
                                  const char* sum_name) {
  if (!live()) return;
  Ops& ops = *at_;
  Act cur = view(on(at_).cur, in.rows, c_.n_embd);
  const bool select = il == c_.n_layer - 1 && !selected_ && n_out_ < x_.rows;
  if (select && n_out_ == 0 && !dump_.enabled()) {
    x_.rows = 0;  // no logits wanted: the KV of every layer is stored, nothing is left to do
    return;
  }
  if (select || dump_.enabled()) {
    ops.matmul(w, in, cur);
    dump_(ops, cur, name, il);
    if (select) {
      selected_ = true;
      if (n_out_ == 0) {
        x_.rows = 0;
        return;
      }
      Act xs = ops.alloc(n_out_, c_.n_embd), cs = ops.alloc(n_out_, c_.n_embd);
      ops.select_rows(x_, batch_.out_rows, xs);
      ops.select_rows(cur, batch_.out_rows, cs);
      x_ = xs;
      cur = cs;
    }
    ops.add(x_, cur);
  } else {
    ops.matmul_add(w, in, cur, x_);
  }
  dump_(ops, x_, sum_name, il);
}

Act GraphBuilder::build_ffn_swiglu(int il, Act cur, const TensorInfo& gate_w, const TensorInfo& up_w) {
  Buffers& b = on(at_);
  const Act gate = view(b.gate, cur.rows, c_.n_ff_of(il)), up = view(b.up, cur.rows, c_.n_ff_of(il));
  if (!live()) return gate;
  Ops& ops = *at_;
  if (!dump_.enabled()) {
    ops.gate_up_swiglu(cur, gate_w, up_w, gate, up, gate);
  } else {
    const Ops::MatmulOut gate_up[] = {{&gate_w, gate}, {&up_w, up}};
    ops.matmul_group(cur, gate_up);
    ops.swiglu(gate, up, gate);
  }
  dump_(ops, gate, "ffn_swiglu", il);
  return gate;
}

void GraphBuilder::build_output(float* logits, int32_t* argmax) {
  if (n_out_ == 0) return;
  move_to(route_.head);
  Ops& ops = *at_;
  Act norm = ops.alloc(n_out_, c_.n_embd);
  ops.rms_norm(x_, w_.output_norm, c_.rms_eps, norm);
  dump_(ops, norm, "result_norm", -1);
  Act out = ops.alloc(n_out_, c_.n_vocab);  // [n_out, n_vocab]
  ops.matmul(*w_.output, norm, out);
  dump_(ops, out, "result_output", -1);
  if (argmax)
    ops.argmax_rows(out, argmax);
  else
    ops.read(out, logits);
}

}  // namespace jitllm
