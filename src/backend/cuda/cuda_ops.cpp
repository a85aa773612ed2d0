// CudaOps: the llama graph's ops on one card (see cuda_ops.h).
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/flash_attention.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/mmq.h"
#include "core/error.h"
#include "quant/quant.h"

namespace jitllm::cuda {

namespace {

// Rows of every activation buffer are padded to the largest matvec tile, so a kernel pass may
// read a whole tile of rows (the rows past the real ones are ignored).
constexpr int64_t kRowPad = kMaxMatvecTile;

bool same_rope(const RopeParams& a, const RopeParams& b) {
  return a.n_rot == b.n_rot && a.mode == b.mode && a.freq_base == b.freq_base &&
         a.freq_scale == b.freq_scale && a.freq_factors == b.freq_factors &&
         a.ext_factor == b.ext_factor && a.attn_factor == b.attn_factor &&
         a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow && a.n_ctx_orig == b.n_ctx_orig &&
         a.yarn_truncate == b.yarn_truncate;
}

}  // namespace

CudaOps::CudaOps(int ordinal, std::string cache_dir)
    : device_(ordinal), compiler_(device_, std::move(cache_dir)), kernels_(device_, compiler_) {
  const CudaKnobs& k = knobs();
  // Dumping reads tensors in the middle of a step, which a replayed graph cannot serve.
  graphs_enabled_ = k.graph.on() && !tuning::core_knobs().dump.is_set();
  stats_ = k.stats.on();
  splitk_env_ = k.splitk.number();
  // JITLLM_BATCH_INVARIANT=1: the automatic choice depends on the whole step (its rows, its
  // longest row), so a row's bits could differ between solo and together: never split unless set.
  if (splitk_env_ < 0 && k.batch_invariant.on()) splitk_env_ = 0;
  fuse_ = k.fuse.on();
  if (k.profile.on()) {
    kernels_.set_profiling(true);  // every launch timed and waited for: no graphs
    graphs_enabled_ = false;
  }
  if (k.gemm.on() && cublaslt_available()) {
    gemm_ = std::make_unique<Gemm>(compiler_);
    gemm_min_rows_ = gemm_min_rows();
  }
  // Batched decode on int8 tensor cores (mmq.h). JITLLM_BATCH_INVARIANT=1 keeps the matvec for
  // every step, so N sessions stepped together equal their solo steps bit for bit;
  // JITLLM_CUDA_MMQ=0 turns it off (A/B).
  if (k.mmq.on() && !k.batch_invariant.on()) {
    mmq_ = std::make_unique<Mmq>(compiler_);
    // DQ-MMA launches overlap the kernel before them as the matvec's do (PDL, sm_90+).
    mmq_->dq().set_pdl(kernels_.pdl());
    if (k.profile.on()) mmq_->set_profiling(true);
  }
  // JITLLM_CUDA_FLASH=0: paged attention for every step.
  if (k.flash.on()) flash_ = std::make_unique<FlashAttention>(compiler_);
}

void CudaOps::drop_graphs() {
  for (auto& [rows, exec] : graphs_) driver().cuGraphExecDestroy(exec);
  graphs_.clear();
  last_direct_key_ = -1;
}

void CudaOps::upload(CUdeviceptr dst, const void* src, size_t bytes) {
  // Complete on the card when this returns (copy_to_device: async on copy_stream_, then its
  // sync). Plain cuMemcpyHtoD is not enough: from pageable memory it returns before the DMA
  // lands and is ordered only on the legacy stream, which stream_ (non-blocking) does not wait
  // for. copy_stream_ is never captured, so this also serves capture and replay, where the
  // inputs must be in place before the graph runs. Safe without ordering against stream_:
  // begin() waited for the previous step, and within a step each destination (page tables,
  // the embedding rows, the RoPE table) is written before any kernel reading it is launched.
  // A replayed step stages the bytes instead: read() copies them on stream_ (from pinned memory,
  // so the copies are ordered before the graph launch) without waiting for each.
  if (mode_ == Mode::Replay) {
    staged_.push_back(Staged{dst, stage_host_.size(), bytes});
    const auto* b = static_cast<const uint8_t*>(src);
    stage_host_.insert(stage_host_.end(), b, b + bytes);
    return;
  }
  copy_to_device(dst, src, bytes, copy_stream_);
}

Q8Buffers CudaOps::q8_for(int64_t n, int64_t k) {
  return Q8Buffers{q8_.get(), q8_.get() + CudaKernels::q8_ds_offset(n, k), dq_step_ ? xh_.get() : 0};
}

void CudaOps::ensure_q8(int64_t n, int64_t k) {
  ensure(q8_, CudaKernels::q8_bytes(n, k));
  if (dq_step_) ensure(xh_, xh_bytes(n, k));
}

size_t CudaOps::xh_bytes(int64_t n, int64_t k) {
  // quantize_q8 writes whole matvec tiles of rows, the f16 copy included (tiles of at most 8 rows
  // now, the DQ-MMA kernel's padding too).
  const int64_t t = CudaKernels::tile_for(n);
  return std::max(DqMma::f16_bytes(n, k), size_t((n + t - 1) / t * t) * size_t(k) * 2);
}

void CudaOps::launch_matmul(const TensorInfo& w, Act x, Act out, CUdeviceptr res) {
  const DeviceWeight& d = weight(w);
  if (x.cols != d.k || out.cols != d.rows)
    throw_error("CUDA matmul '{}': [{}, {}] x [{}, {}]^T does not fit an output of {} columns",
                w.name, x.rows, x.cols, d.rows, d.k, out.cols);
  const MatmulSeg one{&d, ptr(out), res};
  if (use_gemm(x.rows)) {  // prefill: tensor cores, the residual added after
    wrote(out);
    if (launching()) {
      gemm_->matmul(d, ptr(x), x.rows, ptr(out), stream_);
      if (res) kernels_.add(res, ptr(out), out.rows * out.cols, stream_);
    }
    return;
  }
  Q8Buffers q8;
  bool reuse = false;
  if (uses_q8_activation(d.kind)) {
    reuse = q8_src_ == x.data && q8_rows_ == x.rows && q8_k_ == d.k;
    if (!reuse) ensure_q8(x.rows, d.k);
    q8 = q8_for(x.rows, d.k);
  }
  wrote(out);
  if (launching()) run_matmuls(std::span<const MatmulSeg>(&one, 1), x, q8, reuse);
  if (uses_q8_activation(d.kind)) quantized(x);
}

bool CudaOps::use_mmq(std::span<const MatmulSeg> segs, int64_t rows) const {
  // The kernel reads activation rows in tiles of 8: the q8 buffer must be padded that far.
  if (!mmq_ || rows < Mmq::min_rows() || rows > kMmqMaxRows || CudaKernels::tile_for(rows) % 8 != 0)
    return false;
  const size_t n = batch_.n_rows();
  const bool decode = n <= kDecodeGraphRows && batch_.out_rows.size() == n;
  return decode && Mmq::supports(segs);
}

void CudaOps::run_matmuls(std::span<const MatmulSeg> segs, Act x, Q8Buffers q8, bool reuse) {
  if (use_mmq(segs, x.rows)) {
    if (!reuse) {
      const int64_t t = CudaKernels::tile_for(x.rows);
      kernels_.quantize_q8(ptr(x), (x.rows + t - 1) / t * t, x.cols, q8, stream_);
    }
    CUdeviceptr xh = q8.h;  // set in a DQ step: every q8 producer of the step also wrote it
    if (!xh && Mmq::use_dq(segs)) {  // sized by the direct step before any capture of this row count
      ensure(xh_, xh_bytes(x.rows, x.cols));
      xh = xh_.get();
    }
    mmq_->matmul_group(segs, x.rows, q8, stream_, xh);
    return;
  }
  kernels_.matmul_group(segs, ptr(x), x.rows, q8, stream_, reuse);
}

CudaOps::~CudaOps() {
  if (mode_ == Mode::Capture) {
    CUgraph g = nullptr;
    driver().cuStreamEndCapture(stream_.get(), &g);
    if (g) driver().cuGraphDestroy(g);
  }
  drop_graphs();
  if (stats_) {
    const CompilerStats& c = compiler_.stats();
    std::fprintf(stderr,
                 "cuda: %s, kernels compiled %lld (%.0f ms), cubins from the disk cache %lld, "
                 "weights %.1f MB, KV pages %zu, graph replays %lld\n",
                 device_.name().c_str(), (long long)c.compiled, c.compile_ms,
                 (long long)c.disk_hits, double(weight_bytes_) / 1e6, kv_pages_.size(),
                 (long long)graph_replays_);
    if (!gemm_) std::fprintf(stderr, "cuda: no prefill GEMM (cuBLASLt missing or disabled)\n");
    if (timed_steps_ > 0)
      std::fprintf(stderr,
                   "cuda: %lld replayed steps: %.1f us/step on the host from begin() to the graph "
                   "launch, %.1f us/step from the launch to the result home\n",
                   (long long)timed_steps_, step_host_us_ / double(timed_steps_),
                   step_wait_us_ / double(timed_steps_));
  }
  if (!kernels_.profile().by_name.empty())
    std::fprintf(stderr, "%s", kernels_.profile().report().c_str());
  if (mmq_ && !mmq_->profile().by_name.empty())
    std::fprintf(stderr, "%s", mmq_->profile().report().c_str());
  if (mmq_ && !mmq_->dq().profile().by_name.empty())
    std::fprintf(stderr, "%s", mmq_->dq().profile().report().c_str());
  try {
    stream_.sync();
  } catch (const Error&) {
    // Destruction must not throw; a failed card is reported by the call that hit it.
  }
}

void CudaOps::ensure(DeviceBuffer& buf, size_t bytes) {
  if (buf.bytes() >= bytes) return;
  if (mode_ != Mode::Direct)
    throw_error("CUDA: internal error: a buffer grew during a captured/replayed step");
  stream_.sync();  // earlier work may still read the old buffer
  grew_ = true;
  drop_graphs();  // captured graphs hold the old addresses
  buf = DeviceBuffer(std::max(bytes, buf.bytes() + buf.bytes() / 2));
  q8_src_ = nullptr;  // a new buffer may reuse the address of the quantized one
}

CUdeviceptr CudaOps::kv_page(uint8_t* host_page) {
  auto it = kv_pages_.find(host_page);
  if (it == kv_pages_.end()) {
    // Only this card's layers: [kv_n_layers_][K,V][page_tokens][kv_dim].
    const int layers = kv_n_layers_ < 0 ? kv_.n_layer : kv_n_layers_;
    it = kv_pages_.emplace(host_page, DeviceBuffer(kv_.plane_bytes() * 2 * size_t(layers))).first;
  }
  return it->second.get();
}

void CudaOps::copy_kv_page(const uint8_t* from, uint8_t* to, const KvLayout& kv) {
  auto src = kv_pages_.find(const_cast<uint8_t*>(from));
  if (src == kv_pages_.end()) return;  // no step ever wrote this page on the card
  device_.make_current();
  abandon_capture();  // the last step threw while capturing (begin() does the rest)
  if (kv.page_bytes() != kv_.page_bytes()) throw_error("CUDA: the KV page layout changed between steps");
  const CUdeviceptr s = src->second.get();  // (kv_page may rehash the map: take the address first)
  const CUdeviceptr d = kv_page(to);
  const int layers = kv_n_layers_ < 0 ? kv_.n_layer : kv_n_layers_;
  check(driver().cuMemcpyDtoDAsync(d, s, kv_.plane_bytes() * 2 * size_t(layers), stream_.get()),
        "cuMemcpyDtoDAsync(KV page)");
}

void CudaOps::set_kv_layers(int first, int count) {
  if (!kv_pages_.empty() && (first != kv_first_layer_ || count != kv_n_layers_))
    throw_error("CUDA: the KV layer range of a card cannot change once it holds pages");
  if (first < 0 || count < 0)
    throw_error("CUDA: bad KV layer range {} + {}", first, count);
  kv_first_layer_ = first;
  kv_n_layers_ = count;
}

void CudaOps::write(Act x, const float* host) {
  // The residual arriving from another device (placement). upload() makes it complete on the
  // card before anything later in this step is launched (or, in a replayed step, stages it for
  // read() to copy ahead of the graph launch).
  upload(ptr(x), host, size_t(x.rows * x.cols) * sizeof(float));
  wrote(x);
}

void CudaOps::begin(const Batch& batch, const KvLayout& kv) {
  if (kv.type != QuantType::F16 && kv.type != QuantType::F32)
    throw_error("CUDA: KV cache type {} is not supported (f16 or f32)", quant_name(kv.type));
  if (!kv.uniform())
    throw_error("CUDA: KV of different widths per layer is not supported (every layer keeps {})",
                kv.kv_dim);
  if (!kv_pages_.empty() && kv.page_bytes() != kv_.page_bytes())
    throw_error("CUDA: the KV page layout changed between steps");
  device_.make_current();  // steps may come from another thread than the constructor's
  step_t0_ = std::chrono::steady_clock::now();
  const bool abandoned = mode_ == Mode::Capture;  // the previous step threw while capturing
  abandon_capture();
  if (!abandoned && mode_ == Mode::Direct && !grew_ && graphs_enabled_)
    last_direct_key_ = batch_.n_rows() > 0 && batch_.out_rows.size() == batch_.n_rows()
                           ? graph_key(batch_.n_rows(), step_splits_) : -1;
  mode_ = Mode::Direct;
  grew_ = false;
  staged_.clear();
  stage_host_.clear();
  // The previous step may have ended without read() (a prefill chunk without logits): its
  // kernels must be done before this step's inputs overwrite the buffers they read.
  stream_.sync();
  batch_ = batch;
  kv_ = kv;
  next_ = 0;
  for (RopeTable& t : ropes_) t.valid = false;
  q8_src_ = nullptr;
  flash_tile_count_ = -1;
  const size_t n = batch.n_rows();
  // A DQ step (a decode step the batched kernels take): every q8 producer of the step also writes
  // the f16 copy the DQ-MMA kernel reads (q8_for), so it needs no conversion launch of its own.
  dq_step_ = mmq_ && DqMma::enabled() && int64_t(n) >= Mmq::min_rows() &&
             n <= size_t(kMmqMaxRows) && n <= size_t(kDecodeGraphRows) && batch.out_rows.size() == n &&
             CudaKernels::tile_for(int64_t(n)) % 8 == 0;
  // Blob: u64 pages[P] | u64 store_rows[n] | i32 row_pt[n] | i32 n_kv[n].
  std::vector<uint64_t> pages;
  std::vector<int32_t> table_start(batch.seqs.size());
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    table_start[s] = int32_t(pages.size());
    for (int64_t p = 0; p < batch.seqs[s].n_pages; ++p)
      pages.push_back(kv_page(batch.seqs[s].pages[p]));
  }
  // The page area has a fixed capacity, so the tables after it keep their addresses (which a
  // captured graph holds) while sessions grow.
  if (pages.size() > page_capacity_) {
    page_capacity_ = std::max<size_t>(64, pages.size() * 2);
    drop_graphs();  // the tables after the page area move
  }
  const size_t P = page_capacity_;
  host_blob_.assign((P + n) * 8 + n * 8, 0);
  auto* u = reinterpret_cast<uint64_t*>(host_blob_.data());
  auto* ints = reinterpret_cast<int32_t*>(host_blob_.data() + (P + n) * 8);
  std::copy(pages.begin(), pages.end(), u);
  for (size_t i = 0; i < n; ++i) {
    const int32_t s = batch.seq[i], pos = batch.pos[i];
    const int64_t page = pos / kv.page_tokens;
    if (s < 0 || size_t(s) >= batch.seqs.size() || page >= batch.seqs[size_t(s)].n_pages)
      throw_error("CUDA: batch row {} (sequence {}, position {}) has no KV page", i, s, pos);
    u[P + i] = pages[size_t(table_start[size_t(s)] + page)] +
               uint64_t(pos % kv.page_tokens) * kv.row_bytes();
    ints[i] = table_start[size_t(s)];
    ints[n + i] = pos + 1;
  }
  ensure(tables_, host_blob_.size());
  pages_ = tables_.get();
  store_rows_ = pages_ + P * 8;
  row_pt_ = pages_ + (P + n) * 8;
  n_kv_ = row_pt_ + n * 4;

  // Decode steps: replay the graph of this row count and attention kernel, or capture it when the
  // previous step had the same shape and ran without growing a buffer (so this one will not grow
  // one either).
  step_splits_ = attention_splits(batch);
  const bool decode = n <= kDecodeGraphRows && batch.out_rows.size() == n;
  if (graphs_enabled_ && decode && !grew_) {
    if (auto it = graphs_.find(graph_key(n, step_splits_)); it != graphs_.end()) {
      mode_ = Mode::Replay;
      current_graph_ = it->second;
    } else if (last_direct_key_ == graph_key(n, step_splits_)) {
      mode_ = Mode::Capture;
    }
  }
  upload(tables_.get(), host_blob_.data(), host_blob_.size());
  if (mode_ == Mode::Capture)
    check(driver().cuStreamBeginCapture(stream_.get(), CU_STREAM_CAPTURE_MODE_RELAXED),
          "cuStreamBeginCapture");
}

Act CudaOps::alloc(int64_t rows, int64_t cols) {
  if (next_ == scratch_.size()) scratch_.emplace_back();
  DeviceBuffer& buf = scratch_[next_++];
  const int64_t padded = (rows + kRowPad - 1) / kRowPad * kRowPad;
  ensure(buf, size_t(std::max<int64_t>(padded, kRowPad) * cols) * sizeof(float));
  return Act{buf.as<float>(), rows, cols};
}

void CudaOps::embed(const TensorInfo& table, Act out) {
  const int64_t n_vocab = table.rows(), k = table.row_length();
  const size_t rb = row_bytes(table.type, k);
  const size_t n = batch_.tokens.size();
  // Prefill and decode steps: only the ids travel, and a captured step replays the lookup with
  // the ids staged before the graph launch.
  if (gemm_ && Gemm::embeds_on_card(table.type) && table.slice_stride == 0) {
    // The rows are made on the card from the table there (the same bits as dequantize_row),
    // instead of n rows dequantized on the host and uploaded.
    for (size_t i = 0; i < n; ++i)
      if (batch_.tokens[i] < 0 || batch_.tokens[i] >= n_vocab)
        throw_error("token id {} is out of range (vocabulary of {})", batch_.tokens[i], n_vocab);
    const DeviceWeight& d = weight(table);
    ensure(embed_ids_, n * sizeof(int32_t));
    upload(embed_ids_.get(), batch_.tokens.data(), n * sizeof(int32_t));
    if (launching()) gemm_->embed(d, embed_ids_.get(), int64_t(n), ptr(out), stream_);
    wrote(out);
    return;
  }
  host_rows_.resize(batch_.tokens.size() * size_t(k));
  for (size_t i = 0; i < batch_.tokens.size(); ++i) {
    const int32_t id = batch_.tokens[i];
    if (id < 0 || id >= n_vocab)
      throw_error("token id {} is out of range (vocabulary of {})", id, n_vocab);
    dequantize_row(table.type, table.data + size_t(id) * rb, host_rows_.data() + i * size_t(k), k);
  }
  upload(ptr(out), host_rows_.data(), host_rows_.size() * sizeof(float));
  wrote(out);
}

CUdeviceptr CudaOps::host_vector(const std::vector<float>& w) { return host_vector(w.data(), w.size()); }

CUdeviceptr CudaOps::host_vector(const float* w, size_t n) {
  auto it = norms_.find(w);
  if (it == norms_.end()) {
    DeviceBuffer b(n * sizeof(float));
    b.upload(w, n * sizeof(float));
    it = norms_.emplace(w, std::move(b)).first;
  }
  return it->second.get();
}

void CudaOps::rms_norm(Act x, const std::vector<float>& w, float eps, Act out) {
  const CUdeviceptr wd = host_vector(w);
  if (int64_t(w.size()) != x.cols)
    throw_error("CUDA rms_norm: {} weights for rows of {}", w.size(), x.cols);
  if (fuse_ && x.cols % 32 == 0) {
    // The matvec after a norm reads the int8 copy: quantize it here instead of in a launch of its
    // own (same bits).
    ensure_q8(x.rows, x.cols);
    if (launching())
      kernels_.rms_norm_q8(ptr(x), wd, ptr(out), q8_for(x.rows, x.cols), x.rows,
                           x.cols, eps, stream_);
    wrote(out);
    quantized(out);
    return;
  }
  if (launching()) kernels_.rms_norm(ptr(x), wd, ptr(out), x.rows, x.cols, eps, stream_);
  wrote(out);
}

const DeviceWeight& CudaOps::weight(const TensorInfo& w) {
  auto it = weights_.find(w.data);
  if (it != weights_.end()) return it->second;
  if (w.slice_stride != 0)
    throw_error("CUDA: tensor '{}' is stored in slices; sliced tensors are not supported yet", w.name);
  const PackedWeight p = pack_weight(w.type, w.data, w.rows(), w.row_length());
  DeviceWeight d = DeviceWeight::upload(p);
  weight_bytes_ += d.buf.bytes();
  return weights_.emplace(w.data, std::move(d)).first->second;
}

bool CudaOps::use_gemm(int64_t rows) const {
  // Decode steps (every row wants logits, at most kDecodeGraphRows rows) keep the matvec
  // kernels, so a step of many sessions equals their solo steps bit for bit, captured or not.
  const size_t n = batch_.n_rows();
  const bool decode = n <= kDecodeGraphRows && batch_.out_rows.size() == n;
  return gemm_ && rows >= gemm_min_rows_ && mode_ == Mode::Direct && !decode;
}

void CudaOps::matmul(const TensorInfo& w, Act x, Act out) { launch_matmul(w, x, out, 0); }

CudaOps::Group CudaOps::group(Act x, std::span<const MatmulOut> outs) {
  Group g;
  for (const MatmulOut& o : outs) {
    const DeviceWeight& d = weight(*o.w);
    if (x.cols != d.k || o.out.cols != d.rows || o.out.rows != x.rows)
      throw_error("CUDA matmul '{}': [{}, {}] x [{}, {}]^T does not fit an output of {} columns",
                  o.w->name, x.rows, x.cols, d.rows, d.k, o.out.cols);
    g.segs[g.n++] = MatmulSeg{&d, ptr(o.out), 0};
    g.q8 |= uses_q8_activation(d.kind);
    wrote(o.out);
  }
  if (g.q8) {
    g.reuse = q8_src_ == x.data && q8_rows_ == x.rows && q8_k_ == x.cols;
    if (!g.reuse) ensure_q8(x.rows, x.cols);
  }
  return g;
}

void CudaOps::matmul_group(Act x, std::span<const MatmulOut> outs) {
  const bool gemm = use_gemm(x.rows);
  if (!fuse_ || gemm || outs.size() > 3 || outs.empty()) {
    Ops::matmul_group(x, outs);
    return;
  }
  const Group g = group(x, outs);
  if (launching()) run_matmuls(g.span(), x, q8_for(x.rows, x.cols), g.reuse);
  if (g.q8) quantized(x);
}

void CudaOps::prepare_rope(const RopeParams& p) {
  rope_at_ = 0;
  while (rope_at_ < ropes_.size() && !same_rope(p, ropes_[rope_at_].params)) ++rope_at_;
  if (rope_at_ == ropes_.size()) ropes_.push_back(RopeTable{p, DeviceBuffer{}, false});
  RopeTable& table = ropes_[rope_at_];
  if (table.valid) return;
  const size_t n = batch_.n_rows();
  float corr[2] = {0, 0};
  if (p.ext_factor != 0.0f) yarn_corr_dims(p, corr);
  host_rows_.resize(n * size_t(p.n_rot));
  for (size_t t = 0; t < n; ++t)
    rope_cache(float(batch_.pos[t]), p, corr, host_rows_.data() + t * size_t(p.n_rot));
  ensure(table.cache, host_rows_.size() * sizeof(float));
  upload(table.cache.get(), host_rows_.data(), host_rows_.size() * sizeof(float));
  table.valid = true;
}

void CudaOps::rope(Act x, int n_heads, int head_dim, const RopeParams& p) {
  if (p.n_rot <= 0 || p.n_rot > head_dim || p.n_rot % 2 != 0)
    throw_error("rope: n_rot {} must be even and in (0, head_dim {}]", p.n_rot, head_dim);
  prepare_rope(p);
  if (launching())
    kernels_.rope(ptr(x), rope_table(), x.rows, n_heads, head_dim, p.n_rot,
                  p.mode == RopeMode::Neox, stream_);
  wrote(x);
}

void CudaOps::swiglu(Act gate, Act up, Act out) {
  if (fuse_ && gate.cols % 32 == 0) {  // quantized here for the ffn_down matvec
    ensure_q8(gate.rows, gate.cols);
    if (launching())
      kernels_.swiglu_q8(ptr(gate), ptr(up), ptr(out), q8_for(gate.rows, gate.cols),
                         gate.rows * gate.cols, stream_);
    wrote(out);
    quantized(out);
    return;
  }
  if (launching()) kernels_.swiglu(ptr(gate), ptr(up), ptr(out), gate.rows * gate.cols, stream_);
  wrote(out);
}

void CudaOps::add(Act acc, Act x) {
  if (launching()) kernels_.add(ptr(acc), ptr(x), acc.rows * acc.cols, stream_);
  wrote(acc);
}

void CudaOps::geglu(Act gate, Act up, Act out) {
  if (launching()) kernels_.geglu(ptr(gate), ptr(up), ptr(out), gate.rows * gate.cols, stream_);
  wrote(out);
}

void CudaOps::swiglu_oai(Act gate, Act up, Act out, float alpha, float limit) {
  if (launching())
    kernels_.swiglu_oai(ptr(gate), ptr(up), ptr(out), gate.rows * gate.cols, alpha, limit, stream_);
  wrote(out);
}

void CudaOps::add_bias(Act x, const std::vector<float>& bias) {
  if (int64_t(bias.size()) != x.cols)
    throw_error("CUDA add_bias: {} values for rows of {}", bias.size(), x.cols);
  const CUdeviceptr b = host_vector(bias);
  if (launching()) kernels_.add_rows(ptr(x), b, x.rows, int(x.cols), stream_);
  wrote(x);
}

void CudaOps::scale(Act x, float s) {
  if (launching()) kernels_.scale(ptr(x), s, x.rows * x.cols, stream_);
  wrote(x);
}

void CudaOps::softcap(Act x, float cap) {
  if (launching()) kernels_.softcap(ptr(x), cap, x.rows * x.cols, stream_);
  wrote(x);
}

void CudaOps::copy_cols(Act x, int64_t first, Act out) {
  if (first < 0 || first + out.cols > x.cols)
    throw_error("CUDA copy_cols: columns [{}, {}) of rows of {}", first, first + out.cols, x.cols);
  if (launching())
    kernels_.copy_cols(ptr(x), ptr(out), out.rows, int(x.cols), int(first), int(out.cols), stream_);
  wrote(out);
}

void CudaOps::copy_cols_into(Act, Act, int64_t) {
  // Only multi-head latent attention assembles rows so, and the card refuses its attention.
  throw_error("CUDA copy_cols_into (multi-head latent attention) is not implemented");
}

void CudaOps::weighted_sum_rows(Act x, std::span<const int32_t> rows, std::span<const float> coef,
                                Act out) {
  if (out.rows == 0) return;
  const size_t terms = rows.size() / size_t(out.rows);
  if (terms == 0 || rows.size() != terms * size_t(out.rows) || coef.size() != rows.size() ||
      out.cols != x.cols)
    throw_error("CUDA weighted_sum_rows: {} rows and {} weights for {} output rows of {}",
                rows.size(), coef.size(), out.rows, out.cols);
  for (const int32_t r : rows)
    if (r < 0 || r >= x.rows) throw_error("CUDA weighted_sum_rows: row {} of {}", r, x.rows);
  // [2][rows.size()]: the row indices (as int32 bits), then the weights.
  const Act index = alloc(2, int64_t(rows.size()));
  upload(ptr(index), rows.data(), rows.size() * sizeof(int32_t));
  upload(ptr(index) + rows.size() * sizeof(float), coef.data(), coef.size() * sizeof(float));
  if (launching())
    kernels_.weighted_sum_rows(ptr(x), ptr(out), ptr(index), ptr(index) + rows.size() * sizeof(float),
                               out.rows, int(out.cols), int(terms), stream_);
  wrote(out);
}

void CudaOps::select_rows(Act x, std::span<const int32_t> rows, Act out) {
  const size_t row = size_t(x.cols) * sizeof(float);
  wrote(out);
  if (!launching()) return;
  for (size_t j = 0; j < rows.size(); ++j)
    check(driver().cuMemcpyDtoDAsync(ptr(out) + j * row, ptr(x) + size_t(rows[j]) * row, row,
                                     stream_.get()),
          "cuMemcpyDtoDAsync");
}

void CudaOps::abandon_capture() {
  if (mode_ != Mode::Capture) return;
  CUgraph g = nullptr;
  driver().cuStreamEndCapture(stream_.get(), &g);
  if (g) driver().cuGraphDestroy(g);
  mode_ = Mode::Direct;
}

void CudaOps::finish_step() {
  if (mode_ == Mode::Capture) {
    CUgraph g = nullptr;
    mode_ = Mode::Direct;  // whatever happens next, the stream is no longer capturing
    check(driver().cuStreamEndCapture(stream_.get(), &g), "cuStreamEndCapture");
    CUgraphExec exec = nullptr;
    const CUresult r = driver().cuGraphInstantiateWithFlags(&exec, g, 0);
    driver().cuGraphDestroy(g);
    check(r, "cuGraphInstantiateWithFlags");
    graphs_[graph_key(batch_.n_rows(), step_splits_)] = exec;
    current_graph_ = exec;
    mode_ = Mode::Replay;
  }
  if (mode_ == Mode::Replay) {
    if (!staged_.empty()) {
      if (!stage_pinned_ || stage_pinned_->bytes() < stage_host_.size())
        stage_pinned_ = std::make_unique<PinnedBuffer>(stage_host_.size() * 2);
      auto* pin = static_cast<uint8_t*>(stage_pinned_->get());
      std::memcpy(pin, stage_host_.data(), stage_host_.size());
      for (const Staged& st : staged_)
        check(driver().cuMemcpyHtoDAsync(st.dst, pin + st.offset, st.bytes, stream_.get()),
              "cuMemcpyHtoDAsync");
      staged_.clear();
      stage_host_.clear();
    }
    check(driver().cuGraphLaunch(current_graph_, stream_.get()), "cuGraphLaunch");
    step_launched_ = std::chrono::steady_clock::now();
    ++graph_replays_;
  }
}

void CudaOps::read(Act x, float* host) {
  finish_step();
  check(driver().cuMemcpyDtoHAsync(host, ptr(x), size_t(x.rows * x.cols) * sizeof(float),
                                   stream_.get()),
        "cuMemcpyDtoHAsync");
  sync_step();
}

void CudaOps::sync_step() {
  // Replayed steps are timed (JITLLM_CUDA_STATS): the host's part before the graph launch vs
  // the launch to the result being home (the copy into pageable host memory already waits for
  // the graph, so the second part is the card's time plus the copy).
  stream_.sync();
  if (mode_ == Mode::Replay) {
    const auto t2 = std::chrono::steady_clock::now();
    step_host_us_ += std::chrono::duration<double, std::micro>(step_launched_ - step_t0_).count();
    step_wait_us_ += std::chrono::duration<double, std::micro>(t2 - step_launched_).count();
    ++timed_steps_;
  }
}

void CudaOps::argmax_rows(Act x, int32_t* host) {
  // The graph (when there is one) ends at the logits; the pick runs after it, outside the graph,
  // so one captured graph serves steps that read logits and steps that read only the ids.
  finish_step();
  if (x.rows > argmax_cap_) {
    stream_.sync();  // not part of any graph: growing it drops none
    argmax_cap_ = std::max<int64_t>(x.rows, 64);
    argmax_buf_ = DeviceBuffer(CudaKernels::argmax_scratch_bytes(argmax_cap_) + size_t(argmax_cap_) * 4);
    check(driver().cuMemsetD8Async(argmax_buf_.get(), 0, argmax_buf_.bytes(), stream_.get()),
          "cuMemsetD8Async");  // the counters start at zero
  }
  const CUdeviceptr ids = argmax_buf_.get() + CudaKernels::argmax_scratch_bytes(argmax_cap_);
  kernels_.argmax_rows(ptr(x), x.rows, x.cols, argmax_buf_.get(), argmax_cap_, ids, stream_);
  check(driver().cuMemcpyDtoHAsync(host, ids, size_t(x.rows) * 4, stream_.get()),
        "cuMemcpyDtoHAsync");
  sync_step();
}

std::unique_ptr<Ops> make_cuda_ops(const std::string& devices) {
  int ordinal = 0;
  if (devices == "cuda") {
    ordinal = 0;
  } else if (devices.rfind("cuda:", 0) == 0 && devices.size() > 5 &&
             devices.find_first_not_of("0123456789", 5) == std::string::npos && devices.size() < 9) {
    ordinal = std::stoi(devices.substr(5));
  } else {
    throw_error("-devices {}: unknown device (use cpu, cuda or cuda:N)", devices);
  }
  std::string why;
  if (!available(&why)) throw_error("-devices {}: no usable CUDA device: {}", devices, why);
  return std::make_unique<CudaOps>(ordinal);
}

}  // namespace jitllm::cuda
