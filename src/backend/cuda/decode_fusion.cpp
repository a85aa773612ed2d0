// CudaOps' fused ops (see cuda_ops.h): each chooses its fused kernels from the step's shape, and
// falls back to the launches it replaces (bit for bit the same results: CudaDecodeFusion.*,
// CudaEngine.FusedLaunchesEqualOneKernelPerOp).
//  - qkv_rope_attention: in decode steps of one matvec tile, q/k/v in one matvec launch whose
//    epilogue rotates q and k and stores K and V (no rope_store launch); otherwise q/k/v, then one
//    RoPE + KV store kernel; then attention.
//  - matmul_add: the residual add as the matvec's (or MMQ's) epilogue; after the prefill GEMM an
//    add launch.
//  - gate_up_swiglu: in a batched (DQ) step, gate/up with DQ-MMA's SwiGLU + q8 epilogue
//    (JITLLM_CUDA_DQ_SWIGLU=0: not); otherwise gate/up, then SwiGLU + q8.
#include <algorithm>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mmq.h"
#include "core/error.h"

namespace jitllm::cuda {

void CudaOps::qkv_rope_attention(int il, Act x, const Qkv& w, Act q, Act k, Act v,
                                 const RopeParams& rope, const AttnSpec& spec, Act out) {
  const bool gemm = use_gemm(x.rows);
  if (!fuse_ || !spec.is_plain()) {
    Ops::qkv_rope_attention(il, x, w, q, k, v, rope, spec, out);
    return;
  }
  if (rope.n_rot <= 0 || rope.n_rot > spec.head_dim_k || rope.n_rot % 2 != 0)
    throw_error("rope: n_rot {} must be even and in (0, head_dim {}]", rope.n_rot, spec.head_dim_k);
  const MatmulOut outs[] = {{w.wq, q}, {w.wk, k}, {w.wv, v}};
  if (gemm) {  // prefill: three GEMMs, then RoPE + KV store in one kernel
    Ops::matmul_group(x, outs);
    prepare_rope(rope);
    wrote(q);
    wrote(k);
    attend(il, q, k, v, out, spec, KvStore::RopeStore);
    return;
  }
  const Group g = group(x, outs);
  prepare_rope(rope);
  wrote(q);
  wrote(k);
  const int head_dim = spec.head_dim_k;
  // The epilogue: one tile of rows that the matvec (not MMQ) takes, NORMAL rotation, q and k
  // rows made of whole heads.
  const bool epilogue = x.rows <= 8 && CudaKernels::tile_for(x.rows) >= x.rows &&
                        !use_mmq(g.span(), x.rows) && rope.mode != RopeMode::Neox &&
                        g.segs[0].w->rows == int64_t(spec.n_head) * head_dim &&
                        g.segs[1].w->rows == int64_t(spec.n_head_kv) * head_dim &&
                        kernels_.rope_epilogue_fits(g.span(), x.rows, head_dim);
  if (!epilogue) {
    if (launching()) run_matmuls(g.span(), x, q8_for(x.rows, x.cols), g.reuse);
    if (g.q8) quantized(x);
    attend(il, q, k, v, out, spec, KvStore::RopeStore);
    return;
  }
  const int kl = card_layer(il, spec);  // checked before the epilogue writes the pages
  if (launching()) {
    CudaKernels::RopeEpilogue re;
    re.cache = rope_table();
    re.rows = store_rows_;
    re.koff = kv_.plane_bytes() * uint64_t(2 * kl);
    re.voff = kv_.plane_bytes() * uint64_t(2 * kl + 1);
    re.head_dim = head_dim;
    re.n_rot = rope.n_rot;
    re.f16 = kv_.type == QuantType::F16;
    kernels_.matmul_group(g.span(), ptr(x), x.rows, q8_for(x.rows, x.cols), stream_, g.reuse,
                          nullptr, &re);
  }
  if (g.q8) quantized(x);
  attend(il, q, k, v, out, spec, KvStore::Done);
}

void CudaOps::matmul_add(const TensorInfo& w, Act x, Act out, Act acc) {
  if (!fuse_ || acc.rows != x.rows || acc.cols != out.cols) {
    Ops::matmul_add(w, x, out, acc);
    return;
  }
  launch_matmul(w, x, out, ptr(acc));  // it still writes its own output too
  wrote(acc);
}

void CudaOps::gate_up_swiglu(Act x, const TensorInfo& gate_w, const TensorInfo& up_w, Act gate,
                             Act up, Act out) {
  const bool gemm = use_gemm(x.rows);
  if (!fuse_ || gemm) {
    Ops::gate_up_swiglu(x, gate_w, up_w, gate, up, out);
    return;
  }
  const MatmulOut outs[] = {{&gate_w, gate}, {&up_w, up}};
  const Group g = group(x, outs);
  const std::span<const MatmulSeg> segs = g.span();
  // DQ-MMA's epilogue where it gives the unfused launch's bits (the wide gate/up launch).
  const bool dq_swiglu = dq_step_ && DqMma::swiglu_enabled() && use_mmq(segs, x.rows) &&
                         Mmq::use_dq(segs) && DqMma::swiglu_fits(segs) &&
                         2 * segs[0].w->rows >= DqMma::kWideRows;
  if (dq_swiglu && launching() && launch_dq_swiglu(x, g, gate, up, out)) {
    wrote(out);
    quantized(out);
    return;
  }
  if (launching()) run_matmuls(segs, x, q8_for(x.rows, x.cols), g.reuse);
  if (g.q8) quantized(x);
  swiglu(gate, up, out);
}

bool CudaOps::launch_dq_swiglu(Act x, const Group& g, Act gate, Act up, Act out) {
  if (gate.rows != up.rows || gate.cols != up.cols || out.rows != gate.rows ||
      out.cols != gate.cols)
    return false;
  // The outputs go to the other buffers (the input's q8 and f16 rows are still being read); they
  // must be large enough already unless this step may still grow buffers.
  const size_t need = CudaKernels::q8_bytes(gate.rows, gate.cols), need_h = xh_bytes(gate.rows, gate.cols);
  if (q8_alt_.bytes() < need || xh_alt_.bytes() < need_h) {
    if (mode_ != Mode::Direct) return false;
    ensure(q8_alt_, std::max(need, q8_.bytes()));
    ensure(xh_alt_, std::max(need_h, xh_.bytes()));
  }
  const Q8Buffers in = q8_for(x.rows, x.cols);
  if (!g.reuse) {
    const int64_t t = CudaKernels::tile_for(x.rows);
    kernels_.quantize_q8(ptr(x), (x.rows + t - 1) / t * t, x.cols, in, stream_);
  }
  const Q8Buffers y{q8_alt_.get(), q8_alt_.get() + CudaKernels::q8_ds_offset(gate.rows, gate.cols),
                    xh_alt_.get()};
  mmq_->dq().matmul_swiglu(g.span(), x.rows, in, in.h, ptr(out), y, stream_);
  std::swap(q8_, q8_alt_);  // what ffn_down reads (quantized(out) by the caller)
  std::swap(xh_, xh_alt_);
  return true;
}

}  // namespace jitllm::cuda
