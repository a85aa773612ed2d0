// Launching the mixture-of-experts kernels (moe_source.cpp): routing, gather, combine and the
// indexed matvecs over a layer's expert tables.

#include <cmath>

#include "backend/cuda/cuda_kernels.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

// The indexed matvecs' parameter, laid out as MvIdArgs in the generated source.
struct MvIdArgs {
  uint64_t tab0, tab1, ids, xq, xds, xf, out, nq, nds;
  int32_t rows, xdiv, pad0, pad1;
};
static_assert(sizeof(MvIdArgs) == 88, "must match the kernel's MvIdArgs");

constexpr int kIdsRowsPerWarp = 2;  // matvec_ids: one activation row a pass, as the NT 1 matvec

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

void CudaKernels::matmul_ids(const ExpertTable& w, CUdeviceptr ids, int64_t pairs, int xdiv,
                             CUdeviceptr x, Q8Buffers q8, bool x_quantized, CUdeviceptr out,
                             const Stream& s) {
  if (pairs <= 0) return;
  if (xdiv < 1 || pairs % xdiv != 0) throw_error("matmul_ids: {} pairs of {} a row", pairs, xdiv);
  MatvecSpec spec;
  spec.kinds[0] = w.kind;
  spec.k = w.k;
  spec.nt = 1;
  spec.rpw = kIdsRowsPerWarp;
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.ids = true;
  MvIdArgs a{};
  a.tab0 = w.tab;
  a.ids = ids;
  if (uses_q8_activation(w.kind)) {
    if (!x_quantized) quantize_q8(x, pairs / xdiv, w.k, q8, s);
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.out = out;
  a.rows = int32_t(w.rows);
  a.xdiv = xdiv;
  void* args[] = {&a};
  const int64_t ctas = (w.rows + 4 * spec.rpw - 1) / (4 * spec.rpw);
  run(matvec_fn(spec, "matvec_ids"), unsigned(ctas), unsigned(pairs), 128, s, args, "matvec_ids");
}

void CudaKernels::matmul_ids_swiglu(const ExpertTable& gate, const ExpertTable& up, CUdeviceptr ids,
                                    int64_t pairs, int xdiv, CUdeviceptr x, Q8Buffers q8,
                                    bool x_quantized, CUdeviceptr out, Q8Buffers q8_out,
                                    const Stream& s) {
  if (pairs <= 0) return;
  if (gate.rows != up.rows || gate.k != up.k || gate.rows % 32 != 0)
    throw_error("matmul_ids_swiglu: gate [{}, {}] and up [{}, {}] (rows a multiple of 32)", gate.rows,
                gate.k, up.rows, up.k);
  if (xdiv < 1 || pairs % xdiv != 0) throw_error("matmul_ids_swiglu: {} pairs of {} a row", pairs, xdiv);
  MatvecSpec spec;
  spec.nseg = 2;
  spec.kinds[0] = gate.kind;
  spec.kinds[1] = up.kind;
  spec.k = gate.k;
  spec.nt = 1;
  spec.rpw = 4;
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.swiglu = true;
  spec.ids = true;
  MvIdArgs a{};
  a.tab0 = gate.tab;
  a.tab1 = up.tab;
  a.ids = ids;
  if (uses_q8_activation(gate.kind) || uses_q8_activation(up.kind)) {
    if (!x_quantized) quantize_q8(x, pairs / xdiv, gate.k, q8, s);
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.out = out;
  a.nq = q8_out.q;
  a.nds = q8_out.ds;
  a.rows = int32_t(gate.rows);
  a.xdiv = xdiv;
  void* args[] = {&a};
  run(matvec_fn(spec, "matvec_ids_swiglu"), unsigned(gate.rows / 32), unsigned(pairs), 256, s, args,
      "matvec_ids_swiglu");
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
  MatvecSpec spec;
  spec.kinds[0] = w.kind;
  spec.k = w.k;
  spec.nt = nt;
  spec.rpw = rows_per_warp(nt);
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.ids = true;
  MvIdArgs a{};
  a.tab0 = w.tab;
  a.ids = offset;
  if (uses_q8_activation(w.kind)) {
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.out = out;
  a.rows = int32_t(w.rows);
  a.xdiv = 1;
  void* args[] = {&a};
  const int64_t ctas = (w.rows + 4 * spec.rpw - 1) / (4 * spec.rpw);
  run(matvec_fn(spec, "matvec_grouped"), unsigned(ctas), unsigned(w.n_expert), 128, s, args,
      "matvec_grouped");
}

void CudaKernels::matmul_grouped_swiglu(const ExpertTable& gate, const ExpertTable& up,
                                        CUdeviceptr offset, int nt, CUdeviceptr x, Q8Buffers q8,
                                        CUdeviceptr out, Q8Buffers q8_out, const Stream& s) {
  if (nt < 1 || nt > 8) throw_error("matmul_grouped_swiglu: tile of {} rows (1 to 8)", nt);
  if (gate.rows != up.rows || gate.k != up.k || gate.rows % 32 != 0 || gate.n_expert != up.n_expert)
    throw_error("matmul_grouped_swiglu: gate [{}, {}] and up [{}, {}] (rows a multiple of 32)",
                gate.rows, gate.k, up.rows, up.k);
  MatvecSpec spec;
  spec.nseg = 2;
  spec.kinds[0] = gate.kind;
  spec.kinds[1] = up.kind;
  spec.k = gate.k;
  spec.nt = nt;
  spec.rpw = 4;
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.swiglu = true;
  spec.ids = true;
  MvIdArgs a{};
  a.tab0 = gate.tab;
  a.tab1 = up.tab;
  a.ids = offset;
  if (uses_q8_activation(gate.kind) || uses_q8_activation(up.kind)) {
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.out = out;
  a.nq = q8_out.q;
  a.nds = q8_out.ds;
  a.rows = int32_t(gate.rows);
  a.xdiv = 1;
  void* args[] = {&a};
  run(matvec_fn(spec, "matvec_grouped_swiglu"), unsigned(gate.rows / 32), unsigned(gate.n_expert),
      256, s, args, "matvec_grouped_swiglu");
}

}  // namespace jitllm::cuda
