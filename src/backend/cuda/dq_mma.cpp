// Host side of the DQ-MMA kernel (see dq_mma.h): picks the variant for a step, compiles it on
// first use through the cubin cache and launches the q8 -> f16 conversion and the kernel.
#include "backend/cuda/dq_mma.h"

#include <algorithm>

#include "backend/cuda/tuning.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

// The kernel's parameter, laid out as DqArgs in the generated source.
struct DqArgs {
  TcSegArg seg[3];
  uint64_t xh;
  int32_t n, nseg, total, pad;
  uint64_t yout, yq, yds, yh;  // the swiglu epilogue's outputs
  uint64_t part, cnt;          // unused (zero): the kernel text keeps them (KSPLIT 1)
};
static_assert(sizeof(DqArgs) == 192, "must match the kernel's DqArgs");

}  // namespace

DqMma::DqMma(Compiler& compiler) : compiler_(compiler) {}

bool DqMma::supports(std::span<const MatmulSeg> segs) {
  if (segs.empty() || segs.size() > 3) return false;
  for (const MatmulSeg& s : segs) {
    const DeviceWeight& w = *s.w;
    if (w.k != segs[0].w->k || !dq_mma_supports(w.kind, w.k)) return false;
    if (w.kind == WeightKind::Q4_K && w.scale_offset != 0) return false;  // not the GGUF layout
  }
  return true;
}

bool DqMma::enabled() { return knobs().dqmma.on(); }

size_t DqMma::f16_bytes(int64_t n, int64_t k) { return size_t((n + 7) / 8 * 8) * size_t(k) * 2; }

CUfunction DqMma::function(const DqMmaSpec& spec) {
  const std::string name = spec.name();
  auto it = fns_.find(name);
  if (it == fns_.end()) {
    CUfunction f = compiler_.module(dq_mma_source(spec), name).function("dqmma");
    check(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      int(dq_mma_smem_bytes(spec))),
          "cuFuncSetAttribute(max dynamic shared memory)");
    it = fns_.emplace(name, f).first;
  }
  last_variant_ = &it->first;  // (map keys stay put)
  return it->second;
}

void DqMma::run(CUfunction f, unsigned grid, unsigned grid_y, unsigned block, size_t smem,
                const Stream& s, void** args, const std::string& label) {
  if (pdl_ && !profiling_) {
    launch_pdl(f, grid, grid_y, 1, block, smem, s, args, "dqmma");
    return;
  }
  if (!profiling_) {
    launch(f, grid, grid_y, 1, block, smem, s, args, "dqmma");
    return;
  }
  profile_.timed_launch(f, grid, grid_y, 1, block, smem, s, args, label);
}

void DqMma::matmul_group(std::span<const MatmulSeg> segs, int64_t n, Q8Buffers q8, CUdeviceptr xh,
                         const Stream& s) {
  if (n <= 0 || segs.empty()) return;
  if (n > 64) throw_error("dqmma: {} activation rows in one launch (at most 64)", n);
  if (!supports(segs)) throw_error("dqmma: these matrices have no kernel (check DqMma::supports first)");
  const int64_t k = segs[0].w->k;
  DqMmaSpec spec;
  spec.nseg = int(segs.size());
  spec.k = k;
  spec.nt8 = int((n + 7) / 8);
  // The shapes that were faster on the H200 (docs/cuda.md, session 4, "Batched decode on f16
  // tensor cores"): launches of >= 16384 rows (grouped gate/up, the head) with each warp owning
  // 16 rows of the whole row length, smaller ones with the row length split over the warps; 2
  // tiles of 16 rows per warp for 2..4 activation tiles, 1 otherwise (registers: two steps of
  // weights, MT x NT8 accumulators).
  int64_t total_rows = 0;
  for (const MatmulSeg& sg : segs) total_rows += sg.w->rows;
  const bool wide = total_rows >= kWideRows;
  spec.splitk = splitk_override_ >= 0 ? splitk_override_ != 0 : !wide;
  // A ring of 2 steps per warp (longer rings were slower; 2 tiles per warp need it: a longer ring
  // of 2 tiles spills).
  spec.stages = stages_override_ > 0 ? stages_override_ : 2;
  spec.mt = mt_override_ > 0 ? mt_override_ : spec.splitk && spec.nt8 >= 2 && spec.nt8 <= 4 && spec.stages == 2 ? 2 : 1;
  // Warps per CTA: 8 for the wide launches (the CTA's staged activation serves 128 rows) and for
  // long rows split over the warps (ffn_down, K = 14336 on the 8B: K >= 8192), 4 for the other
  // split ones (docs/perf/cuda.md, "Tuning measurements").
  spec.warps = warps_override_ > 0 ? warps_override_ : spec.splitk && k >= 8192 ? 8 : spec.splitk ? 4 : 8;
  const int64_t rows_per_cta = 16 * spec.mt * (spec.splitk ? 1 : spec.warps);
  DqArgs a{};
  const int64_t ctas = tc_segments(segs, rows_per_cta, a.seg, spec.kinds);
  a.xh = xh;
  a.n = int32_t(n);
  a.nseg = spec.nseg;
  a.total = int32_t(ctas);
  // The f16 copy of the activation, padded rows included (they are read, never stored), unless
  // the kernel that quantized x wrote it (q8.h: CudaOps in a DQ step).
  if (q8.h != xh) {
    if (!to_f16_) to_f16_ = compiler_.module(q8_to_f16_source(), "q8_to_f16").function("q8_to_f16");
    long long groups = (long long)((n + 7) / 8 * 8) * k / 8;
    CUdeviceptr xq = q8.q, xds = q8.ds, xhp = xh;
    void* cargs[] = {&xq, &xds, &xhp, &groups};
    run(to_f16_, unsigned((groups + 255) / 256), 1, 256, 0, s, cargs, "q8_to_f16");
  }
  void* args[] = {&a};
  std::string label = "dqmma";
  if (profiling_) {
    label = spec.name() + " rows";
    for (size_t i = 0; i < segs.size(); ++i) label += fmt::format("{}{}", i ? "+" : " ", segs[i].w->rows);
    label += fmt::format(" n={}{}", n, segs[0].res ? " +res" : "");
  }
  run(function(spec), unsigned(ctas), 1, unsigned(32 * spec.warps), dq_mma_smem_bytes(spec), s,
      args, label);
}

}  // namespace jitllm::cuda

namespace jitllm::cuda {

bool DqMma::swiglu_enabled() {
  // On: faster than gate/up then swiglu_q8 on the H200 (docs/cuda-sessions-together.md).
  return knobs().dq_swiglu.on();
}

bool DqMma::swiglu_fits(std::span<const MatmulSeg> segs) {
  return segs.size() == 2 && supports(segs) && segs[0].w->kind == segs[1].w->kind &&
         segs[0].w->rows == segs[1].w->rows && segs[0].w->rows % 32 == 0 && segs[0].res == 0 &&
         segs[1].res == 0;
}

void DqMma::matmul_swiglu(std::span<const MatmulSeg> segs, int64_t n, Q8Buffers q8, CUdeviceptr xh,
                          CUdeviceptr out, Q8Buffers y, const Stream& s) {
  if (n <= 0) return;
  if (n > 64) throw_error("dqmma: {} activation rows in one launch (at most 64)", n);
  if (!swiglu_fits(segs)) throw_error("dqmma: the swiglu epilogue needs gate and up of one kind and shape");
  DqMmaSpec spec;
  spec.nseg = 2;
  spec.k = segs[0].w->k;
  spec.nt8 = int((n + 7) / 8);
  spec.mt = 1;
  spec.swiglu = true;
  // Warps: half on gate, half on up rows (8: 64 rows of each per CTA; 4 was slower); tune() may
  // pick 4 (whole q8 blocks of 32 rows per CTA either way).
  spec.warps = warps_override_ == 4 ? 4 : 8;
  spec.stages = stages_override_ > 0 ? stages_override_ : 2;
  const int64_t rows_per_cta = 16 * spec.mt * (spec.warps / 2);
  DqArgs a{};
  // Both segments get the same tiles: the CTA count is one matrix's.
  tc_segments(segs, rows_per_cta, a.seg, spec.kinds);
  const int64_t ctas = (segs[0].w->rows + rows_per_cta - 1) / rows_per_cta;
  a.seg[1].cta0 = 0;
  a.xh = xh;
  a.n = int32_t(n);
  a.nseg = 2;
  a.total = int32_t(ctas);
  a.yout = out;
  a.yq = y.q;
  a.yds = y.ds;
  a.yh = y.h;
  if (q8.h != xh) throw_error("dqmma swiglu: the activation's f16 copy must be written by its quantizer");
  void* args[] = {&a};
  std::string label = "dqmma";
  if (profiling_) label = spec.name() + fmt::format(" rows {} n={}", segs[0].w->rows, n);
  run(function(spec), unsigned(ctas), 1, unsigned(32 * spec.warps), dq_mma_smem_bytes(spec), s, args, label);
}

}  // namespace jitllm::cuda
