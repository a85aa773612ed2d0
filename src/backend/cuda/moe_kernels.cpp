// Launching the mixture-of-experts kernels (moe_source.cpp): routing, gather, combine and the
// indexed and grouped matvecs over a layer's expert tables.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_kernels.h"
#include "core/error.h"
#include "graph/moe.h"

namespace jitllm::cuda {

namespace {

// The indexed matvecs' parameter, laid out as MvIdArgs in the generated source.
struct MvIdArgs {
  uint64_t tab0, tab1, ids, xq, xds, xf, out, nq, nds;
  int32_t rows, xdiv, pad0, pad1;
  uint64_t bias0, bias1;  // [n_expert][rows] f32 added to tab0's / tab1's products, or 0
  float alpha, limit;     // limit > 0: gpt-oss's clamped SwiGLU in the swiglu epilogue
};
static_assert(sizeof(MvIdArgs) == 112, "must match the kernel's MvIdArgs");

}  // namespace

CUfunction CudaKernels::moe_fn(const char* name) {
  if (auto it = ew_.find(name); it != ew_.end()) return it->second;
  if (!moe_) moe_ = &compiler_.module(moe_source(), "moe kernels");
  CUfunction f = moe_->function(name);
  ew_.emplace(name, f);
  return f;
}

void CudaKernels::moe_route(CUdeviceptr logits, int64_t n, int n_expert, int k, bool softmax_all,
                            bool norm, float scale, CUdeviceptr ids, CUdeviceptr weights,
                            const Stream& s) {
  if (n_expert < 1 || n_expert > kMaxRouteExperts || k < 1 || k > kMaxRouteUsed || k > n_expert)
    throw_error("CUDA moe_route: {} of {} experts a row (the card routes up to {} of up to {})", k,
                n_expert, kMaxRouteUsed, kMaxRouteExperts);
  if (n <= 0) return;
  int sa = softmax_all ? 1 : 0, nm = norm ? 1 : 0;
  void* args[] = {&logits, &ids, &weights, &n_expert, &k, &sa, &nm, &scale};
  run(moe_fn("moe_route"), unsigned(n), 1, 32, s, args, "moe_route");
}

void CudaKernels::moe_sort(CUdeviceptr ids, int64_t pairs, int n_expert, int k, CUdeviceptr offset,
                           CUdeviceptr src, CUdeviceptr where, const Stream& s) {
  if (pairs <= 0 || pairs > kMaxSortPairs || n_expert < 1 || n_expert > kMaxRouteExperts)
    throw_error("CUDA moe_sort: {} pairs over {} experts (the card sorts up to {} over up to {})",
                pairs, n_expert, kMaxSortPairs, kMaxRouteExperts);
  int np = int(pairs);
  void* args[] = {&ids, &np, &n_expert, &k, &offset, &src, &where};
  run(moe_fn("moe_sort"), 1, 1, 256, s, args, "moe_sort");
}

void CudaKernels::gather_rows(CUdeviceptr x, CUdeviceptr out, CUdeviceptr rows, int64_t n, int cols,
                              const Stream& s) {
  if (n <= 0) return;
  void* args[] = {&x, &out, &rows, &cols};
  run(moe_fn("gather_rows"), unsigned(n), 1, 256, s, args, "gather_rows");
}

void CudaKernels::moe_combine(CUdeviceptr ys, CUdeviceptr out, CUdeviceptr where, CUdeviceptr w,
                              int64_t n, int k, int cols, CUdeviceptr shared, CUdeviceptr sgate,
                              const Stream& s) {
  if (n <= 0) return;
  void* args[] = {&ys, &out, &where, &w, &k, &cols, &shared, &sgate};
  run(moe_fn("moe_combine"), unsigned(n), 1, 256, s, args, "moe_combine");
}

void CudaKernels::launch_expert_matvec(const ExpertTable& w, const ExpertTable* up,
                                       CUdeviceptr index, int nt, int xdiv, unsigned grid_y,
                                       const char* entry, CUdeviceptr x, Q8Buffers q8,
                                       CUdeviceptr out, Q8Buffers q8_out, float swiglu_limit,
                                       const Stream& s) {
  MatvecSpec spec;
  spec.nseg = up ? 2 : 1;
  spec.kinds[0] = w.kind;
  if (up) spec.kinds[1] = up->kind;
  spec.k = w.k;
  spec.nt = nt;
  // The SwiGLU kernels take 4 rows a warp (a CTA's 32 rows are one q8 block), the plain ones
  // as the matvec of that tile does.
  spec.rpw = up ? 4 : rows_per_warp(nt);
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.swiglu = up != nullptr;
  spec.ids = true;
  MvIdArgs a{};
  a.tab0 = w.tab;
  a.tab1 = up ? up->tab : 0;
  a.ids = index;
  if (uses_q8_activation(w.kind) || (up && uses_q8_activation(up->kind))) {
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.out = out;
  a.nq = q8_out.q;
  a.nds = q8_out.ds;
  a.rows = int32_t(w.rows);
  a.xdiv = xdiv;
  a.bias0 = w.bias;
  a.bias1 = up ? up->bias : 0;
  a.alpha = kSwigluOaiAlpha;
  a.limit = swiglu_limit;
  void* args[] = {&a};
  const int64_t ctas = up ? w.rows / 32 : (w.rows + 4 * spec.rpw - 1) / (4 * spec.rpw);
  run(matvec_fn(spec, entry), unsigned(ctas), grid_y, up ? 256 : 128, s, args, entry);
}

void CudaKernels::matmul_ids(const ExpertTable& w, CUdeviceptr ids, int64_t pairs, int xdiv,
                             CUdeviceptr x, Q8Buffers q8, bool x_quantized, CUdeviceptr out,
                             const Stream& s) {
  if (pairs <= 0) return;
  if (xdiv < 1 || pairs % xdiv != 0) throw_error("matmul_ids: {} pairs of {} a row", pairs, xdiv);
  if (uses_q8_activation(w.kind) && !x_quantized) quantize_q8(x, pairs / xdiv, w.k, q8, s);
  launch_expert_matvec(w, nullptr, ids, 1, xdiv, unsigned(pairs), "matvec_ids", x, q8, out, {}, 0.0f,
                       s);
}

namespace {

void check_gate_up(const CudaKernels::ExpertTable& gate, const CudaKernels::ExpertTable& up,
                   const char* what) {
  if (gate.rows != up.rows || gate.k != up.k || gate.rows % 32 != 0 || gate.n_expert != up.n_expert)
    throw_error("{}: gate [{}, {}] and up [{}, {}] of {} and {} experts (rows a multiple of 32)",
                what, gate.rows, gate.k, up.rows, up.k, gate.n_expert, up.n_expert);
}

}  // namespace

void CudaKernels::matmul_ids_swiglu(const ExpertTable& gate, const ExpertTable& up, CUdeviceptr ids,
                                    int64_t pairs, int xdiv, CUdeviceptr x, Q8Buffers q8,
                                    bool x_quantized, CUdeviceptr out, Q8Buffers q8_out,
                                    float swiglu_limit, const Stream& s) {
  if (pairs <= 0) return;
  check_gate_up(gate, up, "matmul_ids_swiglu");
  if (xdiv < 1 || pairs % xdiv != 0) throw_error("matmul_ids_swiglu: {} pairs of {} a row", pairs, xdiv);
  if ((uses_q8_activation(gate.kind) || uses_q8_activation(up.kind)) && !x_quantized)
    quantize_q8(x, pairs / xdiv, gate.k, q8, s);
  launch_expert_matvec(gate, &up, ids, 1, xdiv, unsigned(pairs), "matvec_ids_swiglu", x, q8, out,
                       q8_out, swiglu_limit, s);
}

double CudaKernels::rows_per_chosen_expert(int64_t n, int k, int n_expert) {
  const double share = double(k) / double(n_expert);
  const double chosen = double(n_expert) * (1.0 - std::pow(1.0 - share, double(n)));
  return double(n) * double(k) / std::max(1.0, chosen);
}

int CudaKernels::grouped_tile(int64_t n, int k, int n_expert) {
  const int64_t rows = int64_t(std::ceil(rows_per_chosen_expert(n, k, n_expert) - 1e-9));
  int t = 1;
  while (t < rows && t < 8) t *= 2;
  return t;
}

void CudaKernels::matmul_grouped(const ExpertTable& w, CUdeviceptr offset, int nt, CUdeviceptr x,
                                 Q8Buffers q8, CUdeviceptr out, const Stream& s) {
  if (nt < 1 || nt > 8) throw_error("matmul_grouped: tile of {} rows (1 to 8)", nt);
  launch_expert_matvec(w, nullptr, offset, nt, 1, unsigned(w.n_expert), "matvec_grouped", x, q8,
                       out, {}, 0.0f, s);
}

void CudaKernels::matmul_grouped_swiglu(const ExpertTable& gate, const ExpertTable& up,
                                        CUdeviceptr offset, int nt, CUdeviceptr x, Q8Buffers q8,
                                        CUdeviceptr out, Q8Buffers q8_out, float swiglu_limit,
                                        const Stream& s) {
  if (nt < 1 || nt > 8) throw_error("matmul_grouped_swiglu: tile of {} rows (1 to 8)", nt);
  check_gate_up(gate, up, "matmul_grouped_swiglu");
  launch_expert_matvec(gate, &up, offset, nt, 1, unsigned(gate.n_expert), "matvec_grouped_swiglu",
                       x, q8, out, q8_out, swiglu_limit, s);
}

}  // namespace jitllm::cuda
