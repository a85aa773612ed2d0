// GraphBuilder::build_mla_attn (see builder.h): DeepSeek's multi-head latent attention in the
// absorbed form llama.cpp runs (src/models/deepseek2.cpp, is_mla), so what a position leaves in
// the cache is its normalised latent and its rotated shared key part, n_lora_kv + n_rot values,
// whatever the head count. Per head, q_nope . k_nope = q_nope . (W_kb latent) = (W_kb^T q_nope)
// . latent: q is carried into the latent space instead of expanding every cached position, and
// the output's latent mix goes through W_vb after the softmax. The heads' small products run one
// by one (n_head matmuls of the per-head views); a batched form is the card's later work.
#include <cmath>

#include "core/error.h"
#include "model/builder.h"

namespace jitllm {

Act GraphBuilder::build_mla_attn(int il, Act cur, const LayerWeights& l, const AttnSpec& spec,
                                 const RopeParams& rope) {
  Buffers& b = on(at_);
  const int64_t n = cur.rows;
  const int n_head = c_.n_head_of(il), hk = c_.head_dim_k_mla, hv = c_.head_dim_v_mla;
  const int nope = c_.qk_nope_dim(), n_rot = c_.n_rot, rank = c_.n_lora_kv;
  if (spec.n_head != n_head || spec.n_head_kv != 1 || spec.head_dim_k != rank + n_rot ||
      spec.head_dim_v != rank || !spec.v_in_k)
    throw_error("layer {}: MLA attention over {} heads of {} / {} (KV heads {}, V in K {}), expected "
                "{} heads of {} + {} / {} with V in K",
                il, spec.n_head, spec.head_dim_k, spec.head_dim_v, spec.n_head_kv, spec.v_in_k,
                n_head, rank, n_rot, rank);
  const Act q = view(b.mla_q, n, int64_t(n_head) * hk);            // [n, n_head * hk]
  const Act kv_a = view(b.mla_kv_a, n, int64_t(rank) + n_rot);     // [n, rank + n_rot]
  const Act lat = view(b.mla_lat, n, rank);                        // [n, rank]
  const Act q_nope = view(b.mla_nope, n, nope), pe = view(b.mla_pe, n, n_rot);
  const Act qa = view(b.q, n, spec.q_dim());                       // [n, n_head * (rank + n_rot)]
  const Act ka = view(b.k, n, spec.k_dim());                       // [n, rank + n_rot]
  const Act out = view(b.attn, n, int64_t(n_head) * rank);         // [n, n_head * rank]
  const Act v = view(b.mla_v, n, int64_t(n_head) * hv), vh = view(b.mla_vh, n, hv);
  Ops& ops = *at_;

  if (l.wq) {
    ops.matmul(*l.wq, cur, q);
  } else {
    const Act q_a = view(b.mla_q_a, n, c_.n_lora_q), q_a_n = view(b.mla_q_a_n, n, c_.n_lora_q);
    ops.matmul(*l.wq_a, cur, q_a);
    ops.rms_norm(q_a, l.attn_q_a_norm, c_.rms_eps, q_a_n);
    ops.matmul(*l.wq_b, q_a_n, q);
  }
  dump_(ops, q, "q", il);
  ops.matmul(*l.wkv_a_mqa, cur, kv_a);
  dump_(ops, kv_a, "kv_cmpr_pe", il);

  // K row: [normed latent, rotated k_pe]; V is its first `rank` values.
  const Act raw = view(b.attn, n, rank);  // the output buffer, free until the attention
  ops.copy_cols(kv_a, 0, raw);
  ops.rms_norm(raw, l.attn_kv_a_norm, c_.rms_eps, lat);
  dump_(ops, lat, "kv_cmpr", il);
  ops.copy_cols_into(lat, ka, 0);
  ops.copy_cols(kv_a, rank, pe);
  ops.rope(pe, 1, n_rot, rope);
  dump_(ops, pe, "k_pe", il);
  ops.copy_cols_into(pe, ka, rank);

  // Q row of head h: [W_kb_h^T q_nope_h, rotated q_pe_h].
  for (int h = 0; h < n_head; ++h) {
    const int64_t at = int64_t(h) * (rank + n_rot);
    ops.copy_cols(q, int64_t(h) * hk, q_nope);
    ops.matmul(l.k_b_head[size_t(h)], q_nope, lat);  // [n, rank]
    ops.copy_cols_into(lat, qa, at);
    ops.copy_cols(q, int64_t(h) * hk + nope, pe);
    ops.rope(pe, 1, n_rot, rope);
    ops.copy_cols_into(pe, qa, at + rank);
  }
  dump_(ops, qa, "Qcur", il);
  dump_(ops, ka, "Kcur", il);
  ops.attention(il, qa, ka, Act{ka.data, n, 0}, out, spec);
  dump_(ops, out, "kqv_out", il);

  // Each head's latent mix through its W_vb: [n, rank] -> [n, hv].
  for (int h = 0; h < n_head; ++h) {
    ops.copy_cols(out, int64_t(h) * rank, lat);
    ops.matmul(l.v_b_head[size_t(h)], lat, vh);
    ops.copy_cols_into(vh, v, int64_t(h) * hv);
  }
  dump_(ops, v, "kqv", il);
  return v;
}

}  // namespace jitllm
