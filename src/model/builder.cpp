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
  bool qk_norms = false, fused_qkv = false, fused_ffn = false, post_norms = false, moe = false,
       shared_gate = false, short_conv = false, mla = false;
  for (const LayerWeights& l : w_.layers) {
    moe |= l.is_moe();
    mla |= l.is_mla();
    shared_gate |= l.ffn_gate_inp_shexp != nullptr;
    qk_norms |= !l.attn_q_norm.empty() || !l.attn_k_norm.empty();
    fused_qkv |= l.wqkv != nullptr;
    fused_ffn |= !l.is_moe() && l.ffn_gate == nullptr;  // an MoE layer has no dense FFN
    post_norms |= !l.attn_post_norm.empty() || !l.ffn_post_norm.empty();
    short_conv |= l.shortconv_in != nullptr;
  }
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
      if (fused_qkv) b.qkv = o->alloc(n, int64_t(q) + k + v);  // [n, q + k + v]
      if (fused_ffn) b.gate_up = o->alloc(n, 2 * int64_t(ff));  // [n, 2 * n_ff]
      if (post_norms) b.normed = o->alloc(n, c_.n_embd);        // [n, n_embd]
      if (short_conv) {
        b.conv_bcx = o->alloc(n, 3 * int64_t(c_.n_embd));  // [n, 3 n_embd]: B, C, x
        b.conv_b = o->alloc(n, c_.n_embd);                 // [n, n_embd]: B, then B * x
        b.conv_c = o->alloc(n, c_.n_embd);                 // [n, n_embd]: C, then C * conv
        b.conv_x = o->alloc(n, c_.n_embd);                 // [n, n_embd]: x, then conv
      }
      if (moe) {
        const int64_t k = c_.n_expert_used, s = c_.n_ff_shexp > 0 ? 1 : 0;
        b.moe.logits = o->alloc(n, c_.n_expert);              // [n, n_expert]
        const int64_t pairs = n * k + kMoeTileRows;           // graph/moe.h: tiles read past
        b.moe.xs = o->alloc(pairs, c_.n_embd);                // [pairs, n_embd]
        b.moe.gate = o->alloc(pairs, c_.n_ff_exp);            // [pairs, n_ff_exp]
        b.moe.up = o->alloc(pairs, c_.n_ff_exp);              // [pairs, n_ff_exp]
        b.moe.ys = o->alloc(n * (k + s), c_.n_embd);          // [n * (k + s), n_embd]
        if (shared_gate) b.moe.shared_gate = o->alloc(n, 1);  // [n, 1]
        if (s) {
          b.moe.sgate = o->alloc(n, c_.n_ff_shexp);           // [n, n_ff_shexp]
          b.moe.sup = o->alloc(n, c_.n_ff_shexp);             // [n, n_ff_shexp]
        }
        b.moe_out = o->alloc(n, c_.n_embd);                   // [n, n_embd]
      }
      if (mla) {
        b.mla_q = o->alloc(n, int64_t(c_.n_head) * c_.head_dim_k_mla);
        if (c_.n_lora_q > 0) {
          b.mla_q_a = o->alloc(n, c_.n_lora_q);
          b.mla_q_a_n = o->alloc(n, c_.n_lora_q);
        }
        b.mla_kv_a = o->alloc(n, int64_t(c_.n_lora_kv) + c_.n_rot);
        b.mla_lat = o->alloc(n, c_.n_lora_kv);
        b.mla_nope = o->alloc(n, c_.qk_nope_dim());
        b.mla_pe = o->alloc(n, c_.n_rot);
        b.mla_v = o->alloc(n, int64_t(c_.n_head) * c_.head_dim_v_mla);
        b.mla_vh = o->alloc(n, c_.head_dim_v_mla);
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
  s.scale = c_.attn_scale > 0.0f ? c_.attn_scale : 1.0f / std::sqrt(float(c_.head_dim));
  s.window = c_.window_of(il);
  s.softcap = c_.attn_softcap;
  s.causal = c_.causal;
  if (!layer(il).attn_sinks.empty()) s.sinks = layer(il).attn_sinks.data();
  return s;
}

void GraphBuilder::build_inp_embd() {
  at_->embed(*w_.token_embd, x_);
  dump_(*at_, x_, "inp_embd", -1);
  if (c_.embd_scale != 0.0f) {
    at_->scale(x_, c_.embd_scale);
    dump_(*at_, x_, "inp_scaled", -1);
  }
  if (w_.position_embd) at_->add_table_rows(*w_.position_embd, batch_.pos, x_);
  if (!batch_.types.empty() && w_.token_types)
    at_->add_table_rows(*w_.token_types, batch_.types, x_);
  else if (!w_.token_type0.empty())
    at_->add_bias(x_, w_.token_type0);
  if (!w_.token_embd_norm.empty()) {
    at_->layer_norm(x_, w_.token_embd_norm, w_.token_embd_norm_b, c_.norm_eps, x_);
    dump_(*at_, x_, "inp_norm", -1);
  }
}

void GraphBuilder::build_layer_norm(const std::vector<float>& w, const std::vector<float>& bias,
                                    const char* name, int il) {
  if (!live()) return;
  at_->layer_norm(x_, w, bias, c_.norm_eps, x_);
  dump_(*at_, x_, name, il);
}

Act GraphBuilder::build_ffn_gelu(int il, Act cur, const LayerWeights& l) {
  const Act up = view(on(at_).up, cur.rows, c_.n_ff_of(il));
  if (!live()) return up;
  Ops& ops = *at_;
  ops.matmul(*l.ffn_up, cur, up);
  if (!l.ffn_up_b.empty()) ops.add_bias(up, l.ffn_up_b);
  ops.gelu(up, up);
  dump_(ops, up, "ffn_gelu", il);
  return up;
}

void GraphBuilder::begin_layer(int il) { move_to(route_.layers[size_t(il)]); }

Act GraphBuilder::build_norm(const std::vector<float>& w, const char* name, int il) {
  if (w.empty()) return x_;  // a layer without this norm (OLMo2) reads the residual stream itself
  Act cur = view(on(at_).cur, x_.rows, c_.n_embd);
  if (!live()) return cur;
  at_->rms_norm(x_, w, c_.rms_eps, cur);
  dump_(*at_, cur, name, il);
  return cur;
}

namespace {

// RMSNorm of q or k ([n, heads * head_dim]) by `w`: per head when w has head_dim values (the rows
// read as [n * heads, head_dim]), over each whole row when it has heads * head_dim (OLMo2).
void qk_norm(Ops& ops, Act x, const std::vector<float>& w, int heads, int head_dim, float eps,
             Act out, const char* name, int il) {
  if (int64_t(w.size()) == head_dim)
    ops.rms_norm(Act{x.data, x.rows * heads, head_dim}, w, eps, Act{out.data, x.rows * heads, head_dim});
  else if (int64_t(w.size()) == x.cols)
    ops.rms_norm(x, w, eps, out);
  else
    throw_error("layer {}: {} has {} weights for heads of {} and rows of {}", il, name, w.size(),
                head_dim, x.cols);
}

}  // namespace

Act GraphBuilder::build_attn(int il, Act cur, const LayerWeights& l, const AttnSpec& spec,
                             const RopeParams& rope) {
  Buffers& b = on(at_);
  const int64_t n = cur.rows;
  Act q = view(b.q, n, spec.q_dim()), k = view(b.k, n, spec.k_dim());
  const Act v = view(b.v, n, spec.v_dim()), out = view(b.attn, n, spec.out_dim());
  Ops& ops = *at_;
  const bool qk_norms = !l.attn_q_norm.empty() || !l.attn_k_norm.empty();
  const bool biases = !l.bq.empty() || !l.bk.empty() || !l.bv.empty();
  if (!dump_.enabled() && !qk_norms && !biases && !l.wqkv && rope.n_rot > 0) {
    ops.qkv_rope_attention(il, cur, Ops::Qkv{l.wq, l.wk, l.wv}, q, k, v, rope, spec, out);
  } else {  // the same ops one by one (so each intermediate can be read), or with the extras
    if (l.wqkv) {  // one product, then its q, k and v columns
      const Act qkv = view(b.qkv, n, int64_t(spec.q_dim()) + spec.k_dim() + spec.v_dim());
      ops.matmul(*l.wqkv, cur, qkv);
      dump_(ops, qkv, "wqkv", il);
      ops.copy_cols(qkv, 0, q);
      ops.copy_cols(qkv, spec.q_dim(), k);
      ops.copy_cols(qkv, int64_t(spec.q_dim()) + spec.k_dim(), v);
    } else {
      const Ops::MatmulOut qkv[] = {{l.wq, q}, {l.wk, k}, {l.wv, v}};
      ops.matmul_group(cur, qkv);
    }
    if (!l.bq.empty()) ops.add_bias(q, l.bq);
    if (!l.bk.empty()) ops.add_bias(k, l.bk);
    if (!l.bv.empty()) ops.add_bias(v, l.bv);
    if (!l.attn_q_norm.empty()) {
      const Act qn = view(b.q_normed, n, spec.q_dim());
      qk_norm(ops, q, l.attn_q_norm, spec.n_head, spec.head_dim_k, c_.rms_eps, qn, "attn_q_norm", il);
      dump_(ops, qn, "Qcur_normed", il);
      q = qn;
    }
    if (!l.attn_k_norm.empty()) {
      const Act kn = view(b.k_normed, n, spec.k_dim());
      qk_norm(ops, k, l.attn_k_norm, spec.n_head_kv, spec.head_dim_k, c_.rms_eps, kn, "attn_k_norm", il);
      dump_(ops, kn, "Kcur_normed", il);
      k = kn;
    }
    if (rope.n_rot > 0) {  // (none with learned positions)
      ops.rope(q, spec.n_head, spec.head_dim_k, rope);
      ops.rope(k, spec.n_head_kv, spec.head_dim_k, rope);
    }
    dump_(ops, q, "Qcur", il);
    dump_(ops, k, "Kcur", il);
    dump_(ops, v, "Vcur", il);
    ops.attention(il, q, k, v, out, spec);
  }
  dump_(ops, out, "kqv_out", il);
  return out;
}

void GraphBuilder::build_residual(int il, const TensorInfo& w, Act in, const char* name,
                                  const char* sum_name, const std::vector<float>* post_norm,
                                  const char* post_name, const std::vector<float>* bias) {
  if (!live()) return;
  Ops& ops = *at_;
  Act cur = view(on(at_).cur, in.rows, c_.n_embd);
  const bool select = il == c_.n_layer - 1 && !selected_ && n_out_ < x_.rows;
  if (select && n_out_ == 0 && !dump_.enabled()) {
    x_.rows = 0;  // no logits wanted: the KV of every layer is stored, nothing is left to do
    return;
  }
  const bool normed = post_norm && !post_norm->empty();
  const bool biased = bias && !bias->empty();
  if (select || dump_.enabled() || normed || biased) {
    ops.matmul(w, in, cur);
    if (biased) ops.add_bias(cur, *bias);
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
    if (normed) {
      const Act out = view(on(at_).normed, cur.rows, c_.n_embd);
      ops.rms_norm(cur, *post_norm, c_.rms_eps, out);
      dump_(ops, out, post_name, il);
      cur = out;
    }
    ops.add(x_, cur);
  } else {
    ops.matmul_add(w, in, cur, x_);
  }
  dump_(ops, x_, sum_name, il);
}

Act GraphBuilder::build_ffn(int il, Act cur, const LayerWeights& l) {
  Buffers& b = on(at_);
  const int64_t ff = c_.n_ff_of(il);
  const Act gate = view(b.gate, cur.rows, ff), up = view(b.up, cur.rows, ff);
  if (!live()) return gate;
  Ops& ops = *at_;
  const char* name = c_.ffn_gelu ? "ffn_geglu" : "ffn_swiglu";
  if (!l.ffn_gate) {  // ffn_up holds gate then up (Phi-3)
    const Act both = view(b.gate_up, cur.rows, 2 * ff);
    ops.matmul(*l.ffn_up, cur, both);
    ops.copy_cols(both, 0, gate);
    ops.copy_cols(both, ff, up);
  } else if (!dump_.enabled() && !c_.ffn_gelu) {
    ops.gate_up_swiglu(cur, *l.ffn_gate, *l.ffn_up, gate, up, gate);
    dump_(ops, gate, name, il);
    return gate;
  } else {
    const Ops::MatmulOut gate_up[] = {{l.ffn_gate, gate}, {l.ffn_up, up}};
    ops.matmul_group(cur, gate_up);
  }
  if (c_.ffn_gelu)
    ops.geglu(gate, up, gate);
  else
    ops.swiglu(gate, up, gate);
  dump_(ops, gate, name, il);
  return gate;
}

Act GraphBuilder::build_short_conv(int il, Act cur, const LayerWeights& l) {
  Buffers& b = on(at_);
  const int64_t n = cur.rows, d = c_.n_embd;
  const Act bcx = view(b.conv_bcx, n, 3 * d), bb = view(b.conv_b, n, d), cc = view(b.conv_c, n, d),
            xx = view(b.conv_x, n, d);
  if (!live()) return cc;
  Ops& ops = *at_;
  ops.matmul(*l.shortconv_in, cur, bcx);
  dump_(ops, bcx, "shortconv_in", il);
  ops.copy_cols(bcx, 0, bb);
  ops.copy_cols(bcx, d, cc);
  ops.copy_cols(bcx, 2 * d, xx);
  ops.mul(bb, xx);  // B * x
  ops.short_conv(il, bb, l.shortconv_conv, c_.shortconv_l_cache, xx);
  dump_(ops, xx, "shortconv_conv", il);
  ops.mul(cc, xx);  // C * conv
  return cc;
}

Act GraphBuilder::build_moe_ffn(int il, Act cur, const LayerWeights& l) {
  Buffers& b = on(at_);
  const Act out = view(b.moe_out, cur.rows, c_.n_embd);
  if (!live()) return out;
  if (l.ffn_gate_shexp && c_.n_ff_shexp <= 0)
    throw_error("layer {}: a shared expert but no {}.expert_shared_feed_forward_length", il, c_.arch);
  MoeExperts e;
  e.router = l.ffn_gate_inp;
  e.gate = l.gate_exp;
  e.up = l.up_exp;
  e.down = l.down_exp;
  if (l.ffn_gate_shexp) {
    e.shared_gate = l.ffn_gate_inp_shexp ? &l.shared_gate_matrix : nullptr;
    e.shared_ffn_gate = l.ffn_gate_shexp;
    e.shared_ffn_up = l.ffn_up_shexp;
    e.shared_ffn_down = l.ffn_down_shexp;
  }
  if (!l.ffn_gate_inp_b.empty()) e.router_bias = &l.ffn_gate_inp_b;
  e.gate_bias = l.gate_exp_b;
  e.up_bias = l.up_exp_b;
  e.down_bias = l.down_exp_b;
  e.swiglu_limit = c_.expert_swiglu_limit;
  e.pages = w_.expert_pages;
  e.layer = il;
  MoeRouting r = c_.moe_routing();
  if (!l.ffn_exp_probs_b.empty()) r.selection_bias = l.ffn_exp_probs_b.data();
  Ops& ops = *at_;
  ops.moe_ffn(cur, e, r, b.moe, out);
  dump_(ops, view(b.moe.logits, cur.rows, c_.n_expert), "ffn_moe_logits", il);
  dump_(ops, out, "ffn_moe_out", il);
  return out;
}

void GraphBuilder::build_residual_sum(int il, Act y, const char* sum_name,
                                      const std::vector<float>* post_norm, const char* post_name) {
  if (!live()) return;
  if (il == c_.n_layer - 1 && !selected_ && n_out_ < x_.rows)
    throw_error("forward: layer {}'s output rows were never selected", il);
  Ops& ops = *at_;
  if (post_norm && !post_norm->empty()) {
    const Act out = view(on(at_).normed, y.rows, c_.n_embd);
    ops.rms_norm(y, *post_norm, c_.rms_eps, out);
    dump_(ops, out, post_name, il);
    y = out;
  }
  ops.add(x_, y);
  dump_(ops, x_, sum_name, il);
}

void GraphBuilder::build_ffn_block(int il, const LayerWeights& l) {
  const Act cur = build_norm(l.ffn_norm, "ffn_norm", il);
  if (l.is_moe()) {
    const Act moe = build_moe_ffn(il, cur, l);
    build_residual_sum(il, moe, "l_out", &l.ffn_post_norm, "ffn_post_norm");
    return;
  }
  const Act ffn = build_ffn(il, cur, l);
  build_residual(il, *l.ffn_down, ffn, "ffn_out", "l_out", &l.ffn_post_norm, "ffn_post_norm");
}

void GraphBuilder::build_output(float* logits, int32_t* argmax, float* hidden,
                                const LogitsPicks* picks) {
  if (n_out_ == 0) return;
  move_to(route_.head);
  Ops& ops = *at_;
  Act norm = x_;
  if (!w_.output_norm.empty()) {
    norm = ops.alloc(n_out_, c_.n_embd);
    ops.rms_norm(x_, w_.output_norm, c_.rms_eps, norm);
    dump_(ops, norm, "result_norm", -1);
  }
  if (hidden) return ops.read(norm, hidden);
  if (!w_.output)
    throw_error("{} is an encoder: it gives embeddings, not logits", c_.name.empty() ? c_.arch : c_.name);
  Act out = ops.alloc(n_out_, c_.n_vocab);  // [n_out, n_vocab]
  ops.matmul(*w_.output, norm, out);
  if (c_.final_softcap > 0.0f) ops.softcap(out, c_.final_softcap);
  dump_(ops, out, "result_output", -1);
  if (picks)
    ops.pick_logits(out, *picks);
  else if (argmax)
    ops.argmax_rows(out, argmax);
  else
    ops.read(out, logits);
}

}  // namespace jitllm
