// CudaOps' epilogue fusion for decode steps (see cuda_ops.h, "Epilogue fusion"): which held
// launches take the RoPE + KV store epilogue (q/k/v) or the RMSNorm + q8 epilogue (a residual
// matvec), so a llama layer's decode step needs no rope_store and no rms_norm_q8 launch; in a
// batched (DQ) step, gate/up with DQ-MMA's SwiGLU epilogue (JITLLM_CUDA_DQ_SWIGLU=0: not).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mmq.h"

namespace jitllm::cuda {

bool CudaOps::epilogue_on(const char* which) {
  // JITLLM_CUDA_FUSE_EPILOGUE: "all", "none" or a comma list of rope, norm, swiglu; default
  // "rope", the one that made decode faster on the H200 (docs/cuda.md, "Decode, session 3").
  // Read at every use (a few per layer), so tests that override it see it at once.
  const std::string& e = knobs().fuse_epilogue.text();
  if (e.empty()) return false;
  const std::string v = "," + e + ",";
  return v == ",all," || v.find(std::string(",") + which + ",") != std::string::npos;
}

void CudaOps::flush_group() {
  if (!held_group_) return;
  const HeldGroup g = *held_group_;
  held_group_.reset();
  run_matmuls(std::span<const MatmulSeg>(g.segs, g.n), g.x, q8_for(g.x.rows, g.x.cols), g.reuse);
}

bool CudaOps::hold_group(std::span<const MatmulSeg> segs, Act x, bool reuse) {
  // q, k, v (three matrices) or gate, up (two, swiglu_fits) of a step small enough for one
  // matvec tile; steps that the batched kernel (MMQ) takes keep their launch, except gate, up in
  // a DQ step (DqMma::matmul_swiglu, unless JITLLM_CUDA_DQ_SWIGLU=0).
  const bool dq_swiglu = fuse_ && dq_step_ && segs.size() == 2 && DqMma::swiglu_enabled() &&
                         use_mmq(segs, x.rows) && Mmq::use_dq(segs) && DqMma::swiglu_fits(segs) &&
                         2 * segs[0].w->rows >= DqMma::kWideRows;  // the unfused launch's bits
  if (!dq_swiglu && (!fuse_ || x.rows > 8 || CudaKernels::tile_for(x.rows) < x.rows ||
      !((segs.size() == 3 && epilogue_on("rope")) ||
        // (not in a DQ step: the epilogue's quantizer writes no f16 copy for a DQ-MMA ffn_down)
        (segs.size() == 2 && epilogue_on("swiglu") && !dq_step_ && CudaKernels::swiglu_fits(segs, x.rows))) ||
      use_mmq(segs, x.rows)))
    return false;
  HeldGroup g;
  for (size_t i = 0; i < segs.size(); ++i) g.segs[i] = segs[i];
  g.n = segs.size();
  g.x = x;
  g.reuse = reuse;
  held_group_ = g;
  return true;
}

bool CudaOps::launch_fused_rope(Act q, Act k, Act v, int n_head, int n_head_kv, int head_dim,
                                uint64_t koff, uint64_t voff, bool f16) {
  if (!held_group_) return false;
  const HeldGroup& g = *held_group_;
  const std::span<const MatmulSeg> segs(g.segs, g.n);
  const bool fits =
      g.n == 3 && g.segs[0].out == ptr(q) && g.segs[1].out == ptr(k) && g.segs[2].out == ptr(v) &&
      held_ropes_.size() == 2 && held_ropes_[0].x.data == q.data &&
      held_ropes_[1].x.data == k.data && held_ropes_[0].n_heads == n_head &&
      held_ropes_[1].n_heads == n_head_kv && held_ropes_[0].head_dim == head_dim &&
      held_ropes_[1].head_dim == head_dim && rope_params_.mode != RopeMode::Neox &&
      g.segs[0].w->rows == int64_t(n_head) * head_dim &&
      g.segs[1].w->rows == int64_t(n_head_kv) * head_dim &&
      kernels_.rope_epilogue_fits(segs, g.x.rows, head_dim);
  if (!fits) return false;
  CudaKernels::RopeEpilogue re;
  re.cache = rope_cache_.get();
  re.rows = store_rows_;
  re.koff = koff;
  re.voff = voff;
  re.head_dim = head_dim;
  re.n_rot = rope_params_.n_rot;
  re.f16 = f16;
  const HeldGroup h = g;
  held_group_.reset();
  held_ropes_.clear();
  kernels_.matmul_group(std::span<const MatmulSeg>(h.segs, h.n), ptr(h.x), h.x.rows,
                        q8_for(h.x.rows, h.x.cols), stream_, h.reuse, nullptr, &re);
  return true;
}

bool CudaOps::launch_fused_norm(Act x, CUdeviceptr w, float eps, Act out) {
  if (!held_matmul_ || !held_matmul_->res || held_matmul_->acc.data != x.data ||
      held_matmul_->acc.rows != x.rows || !fuse_ || !epilogue_on("norm") || x.cols % 32 != 0)
    return false;
  const HeldMatmul& h = *held_matmul_;
  const MatmulSeg seg{h.w, ptr(h.out), h.res};
  const std::span<const MatmulSeg> segs(&seg, 1);
  // (Not in a DQ step: the epilogue's quantizer writes no f16 copy.)
  if (!CudaKernels::norm_epilogue_fits(segs, x.rows, x.cols) || use_mmq(segs, x.rows) || dq_step_)
    return false;
  // q8_ holds the matvec's quantized input and receives the norm's output: it must already be
  // large enough for both (growing it here would lose the input).
  if (q8_.bytes() < CudaKernels::q8_bytes(x.rows, x.cols) ||
      (uses_q8_activation(h.w->kind) && q8_.bytes() < CudaKernels::q8_bytes(h.x.rows, h.w->k)))
    return false;
  if (!norm_counters_.get()) {
    if (mode_ != Mode::Direct) return false;  // allocated outside a capture
    norm_counters_ = DeviceBuffer(size_t(CudaKernels::kNormCounters) * 4);
    check(driver().cuMemsetD8Async(norm_counters_.get(), 0, norm_counters_.bytes(), stream_.get()),
          "cuMemsetD8Async");
  }
  CudaKernels::NormEpilogue ne;
  ne.w = w;
  ne.out = ptr(out);
  ne.counters = norm_counters_.get();
  ne.q8 = q8_for(x.rows, x.cols);
  ne.eps = eps;
  const HeldMatmul m = h;
  held_matmul_.reset();
  flush_ropes();
  // q8_ was sized (and q8_reuse_ decided) when the matmul was called; nothing ran in between.
  const bool reuse = uses_q8_activation(m.w->kind) && q8_reuse_;
  kernels_.matmul_group(segs, ptr(m.x), m.x.rows, q8_for(m.x.rows, m.w->k), stream_, reuse, &ne);
  return true;
}

bool CudaOps::launch_dq_swiglu(Act gate, Act up, Act out) {
  const HeldGroup g = *held_group_;
  const std::span<const MatmulSeg> segs(g.segs, g.n);
  if (g.n != 2 || g.segs[0].out != ptr(gate) || g.segs[1].out != ptr(up) || gate.rows != up.rows ||
      gate.cols != up.cols || out.rows != gate.rows || out.cols != gate.cols || !DqMma::swiglu_fits(segs))
    return false;
  // The outputs go to the other buffers (the input's q8 and f16 rows are still being read); they
  // must be large enough already unless this step may still grow buffers.
  const size_t need = CudaKernels::q8_bytes(gate.rows, gate.cols), need_h = xh_bytes(gate.rows, gate.cols);
  if (q8_alt_.bytes() < need || xh_alt_.bytes() < need_h) {
    if (mode_ != Mode::Direct) return false;
    ensure(q8_alt_, std::max(need, q8_.bytes()));
    ensure(xh_alt_, std::max(need_h, xh_.bytes()));
  }
  held_group_.reset();
  const Q8Buffers in = q8_for(g.x.rows, g.x.cols);
  if (!g.reuse) {
    const int64_t t = CudaKernels::tile_for(g.x.rows);
    kernels_.quantize_q8(ptr(g.x), (g.x.rows + t - 1) / t * t, g.x.cols, in, stream_);
  }
  const Q8Buffers y{q8_alt_.get(), q8_alt_.get() + CudaKernels::q8_ds_offset(gate.rows, gate.cols),
                    xh_alt_.get()};
  mmq_->dq().matmul_swiglu(segs, g.x.rows, in, in.h, ptr(out), y, stream_);
  std::swap(q8_, q8_alt_);  // what ffn_down reads (quantized(out) by the caller)
  std::swap(xh_, xh_alt_);
  return true;
}

bool CudaOps::launch_fused_swiglu(Act gate, Act up, Act out) {
  if (!held_group_) return false;
  if (dq_step_) return launch_dq_swiglu(gate, up, out);
  const HeldGroup g = *held_group_;
  const std::span<const MatmulSeg> segs(g.segs, g.n);
  if (g.n != 2 || g.segs[0].out != ptr(gate) || g.segs[1].out != ptr(up) || gate.rows != up.rows ||
      gate.cols != up.cols || out.rows != gate.rows || out.cols != gate.cols ||
      !CudaKernels::swiglu_fits(segs, gate.rows))
    return false;
  // The output's q8 goes to the other buffer (the input's blocks in q8_ are still being read);
  // it must be large enough already unless this step may still grow buffers.
  const size_t need = CudaKernels::q8_bytes(gate.rows, gate.cols);
  if (q8_alt_.bytes() < need) {
    if (mode_ != Mode::Direct) return false;
    ensure(q8_alt_, std::max(need, q8_.bytes()));
  }
  held_group_.reset();
  const Q8Buffers out_q8{q8_alt_.get(), q8_alt_.get() + CudaKernels::q8_ds_offset(gate.rows, gate.cols)};
  kernels_.matmul_swiglu(segs, ptr(g.x), g.x.rows, q8_for(g.x.rows, g.x.cols), stream_, g.reuse,
                         ptr(out), out_q8);
  std::swap(q8_, q8_alt_);  // what the next matvec reads (quantized(out) by the caller)
  return true;
}

}  // namespace jitllm::cuda
