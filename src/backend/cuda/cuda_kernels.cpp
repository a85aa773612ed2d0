// Launching the generated kernels (compiled on first use through the cubin cache).
#include "backend/cuda/cuda_kernels.h"

#include <algorithm>

#include "backend/cuda/tuning.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

unsigned blocks_for(int64_t count, int per_block, int64_t cap = 65535) {
  return unsigned(std::clamp<int64_t>((count + per_block - 1) / per_block, 1, cap));
}


// The matvec kernel's parameter, laid out as MvSeg / MvArgs in the generated source.
struct MvSegArg {
  uint64_t w, w2, out, res;
  int32_t rows, cta0;
};
struct MvArgs {
  MvSegArg seg[3];
  uint64_t xq, xds, xf;
  int32_t n, nseg, total, pad;
  uint64_t nw, nout, nq, nds, cnt;  // the norm epilogue
  float eps;
  int32_t ncols;
  uint64_t rope, kvrows, koff, voff;  // the rope epilogue
  int32_t hd, nrot, kvf16, pad2;
};
static_assert(sizeof(MvSegArg) == 40 && sizeof(MvArgs) == 256, "must match the kernel's MvArgs");

}  // namespace

DeviceWeight DeviceWeight::upload(const PackedWeight& p) {
  DeviceWeight w;
  w.kind = p.kind;
  w.rows = p.rows;
  w.k = p.k;
  w.scale_offset = p.scale_offset;
  w.buf = DeviceBuffer(p.bytes.size());
  w.buf.upload(p.bytes.data(), p.bytes.size());
  return w;
}

CudaKernels::CudaKernels(const Device& device, Compiler& compiler)
    : device_(device), compiler_(compiler) {
  // Programmatic dependent launch for every kernel (sm_90 and later): a matvec loads its first
  // weight step into registers before it waits for the previous kernel and lets the next one go
  // after its dot products (MatvecSpec::preload). JITLLM_CUDA_PDL=0 turns it off; its value 3
  // names this mode, the one that won (docs/perf/cuda.md, "Tuning measurements").
  pdl_ = device.cc_major() >= 9 && !knobs().pdl.is("0");
}

int CudaKernels::tile_for(int64_t n) {
  // Passes of at most 8 rows with 4 weight rows per warp beat one pass of 32 rows (the activation
  // re-reads of a wide tile come from L2); measurements: docs/cuda.md, "Decode".
  constexpr int kCap = 8;
  int t = 1;
  while (t < n && t < kCap) t *= 2;
  return t;
}

int CudaKernels::rows_per_warp(int nt) {
  // 2 at one row, 4 at 2..8 rows, 2 above (registers): the fastest on the H200's 8B shapes
  // (docs/perf/cuda.md, "Tuning measurements").
  return nt == 1 ? 2 : nt <= 8 ? 4 : 2;
}

int CudaKernels::unroll() { return 4; }

std::string KernelProfile::report() const {
  double total = 0;
  for (const auto& [name, e] : by_name) total += e.ms;
  std::vector<std::pair<std::string, Entry>> v(by_name.begin(), by_name.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::string out = fmt::format("cuda profile: {:.3f} ms in kernels\n", total);
  for (const auto& [name, e] : v)
    out += fmt::format("  {:7.3f} ms {:5.1f}% {:8} x {:8.2f} us  {}\n", e.ms,
                       total > 0 ? 100 * e.ms / total : 0.0, e.count, 1000 * e.ms / double(e.count), name);
  return out;
}

void CudaKernels::run(CUfunction f, unsigned gx, unsigned gy, unsigned block, const Stream& s,
                      void** args, const char* what) {
  run3(f, gx, gy, 1, block, s, args, what);
}

void CudaKernels::run3(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block,
                       const Stream& s, void** args, const char* what) {
  if (pdl_ && !profiling_) {  // may overlap the previous kernel: it waits before reading its output
    launch_pdl(f, gx, gy, gz, block, 0, s, args, what);
    return;
  }
  if (!profiling_) {
    launch(f, gx, gy, gz, block, 0, s, args, what);
    return;
  }
  profile_.timed_launch(f, gx, gy, gz, block, 0, s, args, what);
}

void KernelProfile::timed_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block,
                                 size_t smem, const Stream& s, void** args, const std::string& label) {
  if (!ev0_) {
    ev0_ = std::make_unique<Event>();
    ev1_ = std::make_unique<Event>();
  }
  ev0_->record(s);
  launch(f, gx, gy, gz, block, smem, s, args, label.c_str());
  ev1_->record(s);
  ev1_->sync();
  Entry& e = by_name[label];
  ++e.count;
  e.ms += ev1_->ms_since(*ev0_);
}

int64_t tc_segments(std::span<const MatmulSeg> segs, int64_t rows_per_cta, TcSegArg (&seg)[3],
                    WeightKind (&kinds)[3]) {
  int64_t ctas = 0;
  for (size_t i = 0; i < segs.size() && i < 3; ++i) {
    const DeviceWeight& w = *segs[i].w;
    kinds[i] = w.kind;
    seg[i] = TcSegArg{w.buf.get(), w.buf.get() + w.scale_offset, segs[i].out, segs[i].res,
                      int32_t(w.rows), int32_t(ctas)};
    ctas += (w.rows + rows_per_cta - 1) / rows_per_cta;
  }
  return ctas;
}

size_t CudaKernels::q8_ds_offset(int64_t n, int64_t k) {
  const int64_t t = tile_for(n);
  const int64_t n_pad = (n + t - 1) / t * t;
  return (size_t(n_pad * k) + 255) / 256 * 256;
}

size_t CudaKernels::q8_bytes(int64_t n, int64_t k) {
  const int64_t t = tile_for(n);
  const int64_t n_pad = (n + t - 1) / t * t;
  return q8_ds_offset(n, k) + size_t(n_pad * (k / 32)) * 8;
}

CUfunction CudaKernels::matvec_fn(const MatvecSpec& spec, const char* entry) {
  if (!entry) entry = spec.swiglu ? "matvec_swiglu" : "matvec";
  const std::string name = spec.name() + " @" + entry;
  if (auto it = matvec_.find(name); it != matvec_.end()) return it->second;
  CUfunction f = compiler_.module(matvec_source(spec), spec.name()).function(entry);
  matvec_.emplace(name, f);
  return f;
}

CUfunction CudaKernels::elementwise_fn(const char* name) {
  if (auto it = ew_.find(name); it != ew_.end()) return it->second;
  if (!elementwise_) elementwise_ = &compiler_.module(elementwise_source(), "elementwise kernels");
  CUfunction f = elementwise_->function(name);
  ew_.emplace(name, f);
  return f;
}

void CudaKernels::quantize_q8(CUdeviceptr x, int64_t n, int64_t k, Q8Buffers q8, const Stream& s) {
  if (k % 32 != 0) throw_error("quantize_q8: row length {} is not a multiple of 32", k);
  long long nblocks = (long long)(n * (k / 32));
  void* args[] = {&x, &q8.q, &q8.ds, &nblocks, &q8.h};
  run(elementwise_fn("quantize_q8"), blocks_for(nblocks, 8, INT32_MAX), 1, 256, s, args,
      "quantize_q8");
}

void CudaKernels::matmul(const DeviceWeight& w, CUdeviceptr x, int64_t n, CUdeviceptr out,
                         Q8Buffers q8, const Stream& s, bool x_quantized) {
  const MatmulSeg seg{&w, out, 0};
  matmul_group(std::span<const MatmulSeg>(&seg, 1), x, n, q8, s, x_quantized);
}

bool CudaKernels::rope_epilogue_fits(std::span<const MatmulSeg> segs, int64_t n, int head_dim) const {
  const int nt = tile_for(n);
  const int rpw = rpw_override_ > 0 ? rpw_override_ : rows_per_warp(nt);
  return segs.size() == 3 && rpw % 2 == 0 && head_dim % 2 == 0 && segs[0].w->rows % head_dim == 0 &&
         segs[1].w->rows % head_dim == 0 && segs[1].w->rows == segs[2].w->rows;
}

bool CudaKernels::swiglu_fits(std::span<const MatmulSeg> segs, int64_t n) {
  return segs.size() == 2 && segs[0].w->rows == segs[1].w->rows && segs[0].w->rows % 32 == 0 &&
         segs[0].w->k == segs[1].w->k && n >= 1 && n <= 8 && segs[0].res == 0 && segs[1].res == 0;
}

void CudaKernels::matmul_swiglu(std::span<const MatmulSeg> segs, CUdeviceptr x, int64_t n,
                                Q8Buffers q8, const Stream& s, bool x_quantized, CUdeviceptr out,
                                Q8Buffers q8_out) {
  if (!swiglu_fits(segs, n)) throw_error("matvec: the swiglu epilogue needs gate and up of 32-row blocks");
  const int nt = tile_for(n);
  const int64_t k = segs[0].w->k;
  MatvecSpec spec;
  spec.nseg = 2;
  spec.k = k;
  spec.nt = nt;
  spec.rpw = 4;
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.swiglu = true;
  MvArgs a{};
  bool q8_needed = false;
  for (size_t i = 0; i < 2; ++i) {
    const DeviceWeight& w = *segs[i].w;
    spec.kinds[i] = w.kind;
    q8_needed |= uses_q8_activation(w.kind);
    a.seg[i] = MvSegArg{w.buf.get(), w.buf.get() + w.scale_offset, segs[i].out, 0, int32_t(w.rows), 0};
  }
  if (q8_needed) {
    if (!x_quantized) quantize_q8(x, (n + nt - 1) / nt * nt, k, q8, s);
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.n = int32_t(n);
  a.nseg = 2;
  a.nout = out;
  a.nq = q8_out.q;
  a.nds = q8_out.ds;
  void* args[] = {&a};
  std::string label = "matvec_swiglu";
  if (profiling_) label = spec.name() + fmt::format(" rows {}x2", segs[0].w->rows);
  run(matvec_fn(spec), unsigned(segs[0].w->rows / 32), unsigned((n + nt - 1) / nt), 256, s, args,
      label.c_str());
}

bool CudaKernels::norm_epilogue_fits(std::span<const MatmulSeg> segs, int64_t n, int64_t cols) {
  return segs.size() == 1 && segs[0].res != 0 && segs[0].w->rows == cols && cols % 32 == 0 &&
         n >= 1 && n <= tile_for(n) && n <= kNormCounters;
}

void CudaKernels::matmul_group(std::span<const MatmulSeg> segs, CUdeviceptr x, int64_t n,
                               Q8Buffers q8, const Stream& s, bool x_quantized,
                               const NormEpilogue* norm, const RopeEpilogue* rope) {
  if (n <= 0 || segs.empty()) return;
  if (segs.size() > 3) throw_error("matvec: {} matrices in one launch (at most 3)", segs.size());
  if (norm && !norm_epilogue_fits(segs, n, segs[0].w->rows))
    throw_error("matvec: the norm epilogue needs one residual matrix and one tile of rows");
  if (rope && !rope_epilogue_fits(segs, n, rope->head_dim))
    throw_error("matvec: the rope epilogue needs q, k, v and an even number of rows per warp");
  const int nt = tile_for(n);
  const int64_t k = segs[0].w->k;
  MatvecSpec spec;
  spec.nseg = int(segs.size());
  spec.k = k;
  spec.nt = nt;
  spec.rpw = rpw_override_ > 0 ? rpw_override_ : rows_per_warp(nt);
  spec.unroll = unroll_override_ > 0 ? unroll_override_ : unroll();
  spec.preload = pdl_ && !norm;
  MvArgs a{};
  bool q8_needed = false;
  int64_t ctas = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    const DeviceWeight& w = *segs[i].w;
    if (w.k != k) throw_error("matvec: matrices of row length {} and {} in one launch", k, w.k);
    spec.kinds[i] = w.kind;
    q8_needed |= uses_q8_activation(w.kind);
    a.seg[i] = MvSegArg{w.buf.get(), w.buf.get() + w.scale_offset, segs[i].out, segs[i].res,
                        int32_t(w.rows), int32_t(ctas)};
    ctas += (w.rows + 4 * spec.rpw - 1) / (4 * spec.rpw);
  }
  if (q8_needed) {
    const int64_t n_pad = (n + nt - 1) / nt * nt;
    if (!x_quantized) quantize_q8(x, n_pad, k, q8, s);
    a.xq = q8.q;
    a.xds = q8.ds;
  }
  a.xf = x;
  a.n = int32_t(n);
  a.nseg = spec.nseg;
  a.total = int32_t(ctas);
  if (norm) {
    spec.norm = true;
    a.nw = norm->w;
    a.nout = norm->out;
    a.nq = norm->q8.q;
    a.nds = norm->q8.ds;
    a.cnt = norm->counters;
    a.eps = norm->eps;
    a.ncols = int32_t(segs[0].w->rows);
  }
  if (rope) {
    spec.rope = true;
    a.rope = rope->cache;
    a.kvrows = rope->rows;
    a.koff = rope->koff;
    a.voff = rope->voff;
    a.hd = rope->head_dim;
    a.nrot = rope->n_rot;
    a.kvf16 = rope->f16 ? 1 : 0;
  }
  void* args[] = {&a};
  std::string label = "matvec";
  if (profiling_) {  // per kinds and shape: "matvec q4_k+q4_k+q6_k k=2048 nt=1 ... rows 2048+512+512"
    label = spec.name() + " rows";
    for (size_t i = 0; i < segs.size(); ++i) label += fmt::format("{}{}", i ? "+" : " ", segs[i].w->rows);
    if (segs[0].res) label += " +res";
    if (norm) label += " +norm";
    if (rope) label += " +rope";
  }
  run(matvec_fn(spec), unsigned(ctas), unsigned((n + nt - 1) / nt), 128, s, args, label.c_str());
}

void CudaKernels::rms_norm(CUdeviceptr x, CUdeviceptr w, CUdeviceptr out, int64_t n, int64_t dim,
                           float eps, const Stream& s) {
  int d = int(dim);
  void* args[] = {&x, &w, &out, &d, &eps};
  run(elementwise_fn("rms_norm"), unsigned(n), 1, 1024, s, args, "rms_norm");
}

void CudaKernels::rms_norm_q8(CUdeviceptr x, CUdeviceptr w, CUdeviceptr out, Q8Buffers q8,
                              int64_t n, int64_t dim, float eps, const Stream& s) {
  if (dim % 32 != 0) throw_error("rms_norm_q8: row length {} is not a multiple of 32", dim);
  int d = int(dim);
  void* args[] = {&x, &w, &out, &q8.q, &q8.ds, &d, &eps, &q8.h};
  run(elementwise_fn("rms_norm_q8"), unsigned(n), 1, 1024, s, args, "rms_norm_q8");
}

void CudaKernels::rope(CUdeviceptr x, CUdeviceptr cache, int64_t n, int n_heads, int head_dim,
                       int n_rot, bool neox, const Stream& s) {
  int nx = neox ? 1 : 0;
  void* args[] = {&x, &cache, &n_heads, &head_dim, &n_rot, &nx};
  run(elementwise_fn("rope"), unsigned(n), 1, 128, s, args, "rope");
}

void CudaKernels::swiglu(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count,
                         const Stream& s) {
  long long c = count;
  void* args[] = {&gate, &up, &out, &c};
  run(elementwise_fn("swiglu"), blocks_for(count, 256, 4096), 1, 256, s, args, "swiglu");
}

void CudaKernels::swiglu_q8(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, Q8Buffers q8,
                            int64_t count, const Stream& s) {
  if (count % 32 != 0) throw_error("swiglu_q8: {} values are not whole blocks of 32", count);
  long long nblocks = count / 32;
  void* args[] = {&gate, &up, &out, &q8.q, &q8.ds, &nblocks, &q8.h};
  run(elementwise_fn("swiglu_q8"), blocks_for(nblocks, 8, INT32_MAX), 1, 256, s, args, "swiglu_q8");
}

void CudaKernels::add(CUdeviceptr acc, CUdeviceptr x, int64_t count, const Stream& s) {
  long long c = count;
  void* args[] = {&acc, &x, &c};
  run(elementwise_fn("add"), blocks_for(count, 256, 4096), 1, 256, s, args, "add");
}

void CudaKernels::geglu(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count,
                        const Stream& s) {
  long long c = count;
  void* args[] = {&gate, &up, &out, &c};
  run(elementwise_fn("geglu"), blocks_for(count, 256, 4096), 1, 256, s, args, "geglu");
}

void CudaKernels::swiglu_oai(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count,
                             float alpha, float limit, const Stream& s) {
  long long c = count;
  void* args[] = {&gate, &up, &out, &c, &alpha, &limit};
  run(elementwise_fn("swiglu_oai"), blocks_for(count, 256, 4096), 1, 256, s, args, "swiglu_oai");
}

void CudaKernels::add_rows(CUdeviceptr x, CUdeviceptr bias, int64_t n, int dim, const Stream& s) {
  long long c = n * dim;
  void* args[] = {&x, &bias, &c, &dim};
  run(elementwise_fn("add_rows"), blocks_for(c, 256, 4096), 1, 256, s, args, "add_rows");
}

void CudaKernels::scale(CUdeviceptr x, float v, int64_t count, const Stream& s) {
  long long c = count;
  void* args[] = {&x, &v, &c};
  run(elementwise_fn("scale"), blocks_for(count, 256, 4096), 1, 256, s, args, "scale");
}

void CudaKernels::softcap(CUdeviceptr x, float cap, int64_t count, const Stream& s) {
  long long c = count;
  void* args[] = {&x, &cap, &c};
  run(elementwise_fn("softcap"), blocks_for(count, 256, 4096), 1, 256, s, args, "softcap");
}

void CudaKernels::copy_cols(CUdeviceptr x, CUdeviceptr out, int64_t n, int x_cols, int first,
                            int cols, const Stream& s) {
  long long c = n * cols;
  void* args[] = {&x, &out, &c, &x_cols, &first, &cols};
  run(elementwise_fn("copy_cols"), blocks_for(c, 256, 4096), 1, 256, s, args, "copy_cols");
}

void CudaKernels::weighted_sum_rows(CUdeviceptr x, CUdeviceptr out, CUdeviceptr rows,
                                    CUdeviceptr coef, int64_t n, int cols, int terms,
                                    const Stream& s) {
  void* args[] = {&x, &out, &rows, &coef, &cols, &terms};
  run(elementwise_fn("weighted_sum_rows"), unsigned(n), 1, 256, s, args, "weighted_sum_rows");
}

void CudaKernels::store_kv(CUdeviceptr src, CUdeviceptr rows, uint64_t offset, int64_t n, int dim,
                           bool f16, const Stream& s) {
  int h = f16 ? 1 : 0;
  unsigned long long off = offset;
  void* args[] = {&src, &rows, &off, &dim, &h};
  run(elementwise_fn("store_kv"), unsigned(n), 1, 128, s, args, "store_kv");
}

void CudaKernels::rope_store(const RopeStoreCall& c, const Stream& s) {
  CUdeviceptr q = c.q, k = c.k, v = c.v, cache = c.cache, rows = c.rows;
  int nh = c.n_head, nkv = c.n_head_kv, hd = c.head_dim, nr = c.n_rot, nx = c.neox ? 1 : 0;
  int f16 = c.f16 ? 1 : 0;
  unsigned long long koff = c.koff, voff = c.voff;
  void* args[] = {&q, &k, &v, &cache, &nh, &nkv, &hd, &nr, &nx, &rows, &koff, &voff, &f16};
  run(elementwise_fn("rope_store"), unsigned(c.n), 1, 512, s, args, "rope_store");
}

namespace {
constexpr int64_t kArgmaxChunks = 64;  // CTAs per logits row (128256 columns: ~2K each)
}

size_t CudaKernels::argmax_scratch_bytes(int64_t cap) {
  return size_t(cap) * (4 + size_t(kArgmaxChunks) * 8);  // counters, values, columns
}

void CudaKernels::argmax_rows(CUdeviceptr x, int64_t n, int64_t cols, CUdeviceptr scratch,
                              int64_t cap, CUdeviceptr ids, const Stream& s) {
  if (n <= 0) return;
  if (n > cap) throw_error("argmax_rows: {} rows for scratch of {}", n, cap);
  if (cols <= 0 || cols > INT32_MAX) throw_error("argmax_rows: {} columns", cols);
  const int64_t chunks = std::min<int64_t>(kArgmaxChunks, (cols + 255) / 256);
  CUdeviceptr count = scratch, part_v = scratch + size_t(cap) * 4;
  CUdeviceptr part_i = part_v + size_t(cap * kArgmaxChunks) * 4;
  long long c = cols;
  void* args[] = {&x, &c, &part_v, &part_i, &count, &ids};
  run(elementwise_fn("argmax_rows"), unsigned(chunks), unsigned(n), 256, s, args, "argmax_rows");
}

int CudaKernels::attention_keys_per_step() {
  // 4 by default: 32 sessions of 128-token prompts decode faster than with 1 (the H200:
  // docs/cuda-sessions-together.md, session 7).
  return knobs().attn_keys.get();
}

void CudaKernels::attention(const AttentionCall& a, const Stream& s) {
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    throw_error("attention: {} query heads do not group over {} KV heads", a.n_head, a.n_head_kv);
  if (a.q8.q && a.head_dim % 32 != 0)
    throw_error("attention: quantized output needs a head size that is a multiple of 32, not {}",
                a.head_dim);
  const int keys = a.keys_per_step > 0 ? a.keys_per_step : attention_keys_per_step();
  if (keys != 1 && keys != 2 && keys != 4 && keys != 8)
    throw_error("attention: {} keys per warp step (JITLLM_CUDA_ATTN_KEYS or the call) is not 1, 2, 4 or 8", keys);
  const int group = a.n_head / a.n_head_kv;
  const auto key = std::make_tuple(a.head_dim, a.kv_f16, keys);
  auto it = attention_.find(key);
  if (it == attention_.end()) {
    const Module& m = compiler_.module(attention_source(a.head_dim, a.kv_f16, keys),
                                       fmt::format("attention head_dim={} keys={}", a.head_dim, keys));
    it = attention_.emplace(key, m.function("attention")).first;
  }
  CUdeviceptr q = a.q, out = a.out, pages = a.pages, row_pt = a.row_pt, n_kv = a.n_kv;
  CUdeviceptr xq = a.q8.q, xds = a.q8.ds, xh = a.q8.h;
  unsigned long long koff = a.koff, voff = a.voff;
  int pt = a.page_tokens, rb = a.row_bytes, nh = a.n_head, grp = group;
  float scale = a.scale, softcap = a.softcap;
  int window = a.window;
  CUdeviceptr sinks = a.sinks;
  void* args[] = {&q, &out, &pages, &row_pt, &n_kv, &koff, &voff, &pt, &rb, &nh, &grp, &scale,
                  &xq, &xds, &xh, &window, &softcap, &sinks};
  run(it->second, unsigned(a.n_rows), unsigned(a.n_head), 128, s, args, "attention");
}

}  // namespace jitllm::cuda
