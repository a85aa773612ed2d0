// Host side of the MMQ kernel (see mmq.h): picks the variant for a step, compiles it on first use
// through the cubin cache and launches it.
#include "backend/cuda/mmq.h"

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/env_knob.h"
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

int64_t Mmq::min_rows() {
  static const int64_t m = std::clamp(env_int("JITLLM_CUDA_MMQ_MIN_ROWS", 8), 1, kMmqMaxRows);
  return m;
}

CUfunction Mmq::function(const MmqSpec& spec) {
  const std::string name = spec.name();
  if (auto it = fns_.find(name); it != fns_.end()) return it->second;
  CUfunction f = compiler_.module(mmq_source(spec), name).function("mmq");
  if (const size_t smem = mmq_smem_bytes(spec); smem > 0)
    check(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)),
          "cuFuncSetAttribute(max dynamic shared memory)");
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
  // Defaults measured on the H200 (docs/cuda.md, "Batched decode on int8 tensor cores"): 2 tiles
  // of 16 rows, 8 warps (4 for the head: 128256 x 4096 Q6_K at n = 32, 456 us vs 638; the other
  // 8B shapes within 6% either way). JITLLM_CUDA_MMQ_MT / _WARPS / _PIPE / _ACT for benches.
  static const int mt_env = std::clamp(env_int("JITLLM_CUDA_MMQ_MT", 2), 1, 4);
  static const int warps_env = std::clamp(env_int("JITLLM_CUDA_MMQ_WARPS", 0), 0, 16);
  int64_t rows = 0;
  for (const MatmulSeg& sg : segs) rows += sg.w->rows;
  spec.mt = mt_override_ > 0 ? mt_override_ : mt_env;
  spec.warps = warps_override_ > 0 ? warps_override_ : warps_env > 0 ? warps_env : rows >= 65536 ? 4 : 8;
  // The second register set fits (no spills, nvcc -Xptxas -v: 126-255 registers) while MT <= 2
  // and MT x NT8 <= 8. It and the activation copies below are correct (tests: same bits) but not
  // yet timed on the card, so they are off by default.
  static const int pipe_env = env_int("JITLLM_CUDA_MMQ_PIPE", 0);
  spec.pipe = (pipe_override_ >= 0 ? pipe_override_ : pipe_env) != 0 && spec.mt <= 2 &&
              spec.mt * spec.nt8 <= 8;
  // Activation copies in shared memory while they fit beside the reduction tile (227 KB a CTA).
  static const int act_env = env_int("JITLLM_CUDA_MMQ_ACT", 0);
  spec.act = (act_override_ >= 0 ? act_override_ : act_env) != 0;
  if (spec.act) {
    for (size_t i = 0; i < segs.size(); ++i) spec.kinds[i] = segs[i].w->kind;
    spec.act = mmq_smem_bytes(spec) <= 200 * 1024;
  }
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
  const size_t smem = mmq_smem_bytes(spec);
  if (!profiling_) {
    launch(f, unsigned(ctas), 1, 1, block, smem, s, args, "mmq");
    return;
  }
  std::string label = spec.name() + " rows";
  for (size_t i = 0; i < segs.size(); ++i) label += fmt::format("{}{}", i ? "+" : " ", segs[i].w->rows);
  label += fmt::format(" n={}", n);
  if (segs[0].res) label += " +res";
  profile_.timed_launch(f, unsigned(ctas), 1, 1, block, smem, s, args, label);
}

}  // namespace jitllm::cuda
