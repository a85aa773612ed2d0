// Host side of the MMQ kernel (see mmq.h): picks the variant for a step, compiles it on first use
// through the cubin cache and launches it.
#include "backend/cuda/mmq.h"

#include "core/error.h"

namespace jitllm::cuda {

namespace {

// The kernel's parameter, laid out as MqArgs in the generated source.
struct MqArgs {
  TcSegArg seg[3];
  uint64_t xq, xds;
  int32_t n, nseg, total, pad;
};
static_assert(sizeof(MqArgs) == 152, "must match the kernel's MqArgs");

}  // namespace

Mmq::Mmq(Compiler& compiler) : compiler_(compiler), dq_(compiler) {}

bool Mmq::supports(std::span<const MatmulSeg> segs) {
  if (segs.empty() || segs.size() > 3) return false;
  for (const MatmulSeg& s : segs) {
    const DeviceWeight& w = *s.w;
    if (w.k != segs[0].w->k || !mmq_supports(w.kind, w.k)) return false;
    // The kernel reads Q4_K as GGUF blocks; a Q4_K repacked with a scale plane of its own is
    // not this layout.
    if (w.kind == WeightKind::Q4_K && w.scale_offset != 0) return false;
  }
  return true;
}

int64_t Mmq::min_rows() { return 8; }

CUfunction Mmq::function(const MmqSpec& spec) {
  const std::string name = spec.name();
  if (auto it = fns_.find(name); it != fns_.end()) return it->second;
  CUfunction f = compiler_.module(mmq_source(spec), name).function("mmq");
  fns_.emplace(name, f);
  return f;
}

void Mmq::matmul_group(std::span<const MatmulSeg> segs, int64_t n, Q8Buffers q8, const Stream& s,
                       CUdeviceptr xh) {
  if (n <= 0 || segs.empty()) return;
  if (xh && use_dq(segs)) {
    dq_.matmul_group(segs, n, q8, xh, s);
    return;
  }
  if (n > kMmqMaxRows) throw_error("mmq: {} activation rows in one launch (at most {})", n, kMmqMaxRows);
  if (!supports(segs)) throw_error("mmq: these matrices have no MMQ kernel (check Mmq::supports first)");
  MmqSpec spec;
  spec.nseg = int(segs.size());
  spec.k = segs[0].w->k;
  spec.nt8 = int((n + 7) / 8);
  // 2 tiles of 16 rows, 8 warps (4 for launches of 65536 rows or more, the head): the H200's best
  // (docs/cuda.md, "Batched decode on int8 tensor cores").
  int64_t rows = 0;
  for (const MatmulSeg& sg : segs) rows += sg.w->rows;
  spec.mt = mt_override_ > 0 ? mt_override_ : 2;
  spec.warps = warps_override_ > 0 ? warps_override_ : rows >= 65536 ? 4 : 8;
  MqArgs a{};
  const int64_t ctas = tc_segments(segs, 16 * spec.mt, a.seg, spec.kinds);
  a.xq = q8.q;
  a.xds = q8.ds;
  a.n = int32_t(n);
  a.nseg = spec.nseg;
  a.total = int32_t(ctas);
  void* args[] = {&a};
  const CUfunction f = function(spec);
  const unsigned block = unsigned(32 * spec.warps);
  if (!profiling_) {
    launch(f, unsigned(ctas), 1, 1, block, 0, s, args, "mmq");
    return;
  }
  std::string label = spec.name() + " rows";
  for (size_t i = 0; i < segs.size(); ++i) label += fmt::format("{}{}", i ? "+" : " ", segs[i].w->rows);
  label += fmt::format(" n={}", n);
  if (segs[0].res) label += " +res";
  profile_.timed_launch(f, unsigned(ctas), 1, 1, block, 0, s, args, label);
}

}  // namespace jitllm::cuda
