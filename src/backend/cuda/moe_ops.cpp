// CudaOps::moe_ffn: a mixture-of-experts FFN routed on the card (see cuda_ops.h), and the
// layer's expert tables the indexed matvecs read.
#include <cstring>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/tuning.h"
#include "core/error.h"
#include "graph/moe.h"

namespace jitllm::cuda {

namespace {

Act rows_of(Act a, int64_t first, int64_t count) { return Act{a.data + first * a.cols, count, a.cols}; }

}  // namespace

const CudaOps::MoeTables& CudaOps::moe_tables(const MoeExperts& w) {
  if (auto it = moe_tables_.find(w.gate.data()); it != moe_tables_.end()) return it->second;
  const size_t n_expert = w.gate.size();
  if (n_expert == 0 || w.up.size() != n_expert || w.down.size() != n_expert)
    throw_error("CUDA moe: {} gate, {} up and {} down experts", w.gate.size(), w.up.size(),
                w.down.size());
  MoeTables t;
  CudaKernels::ExpertTable* tables[3] = {&t.gate, &t.up, &t.down};
  const std::span<const TensorInfo> parts[3] = {w.gate, w.up, w.down};
  std::vector<uint64_t> host(3 * n_expert * 2);  // [3][n_expert] (weights, scale plane)
  for (size_t m = 0; m < 3; ++m) {
    for (size_t e = 0; e < n_expert; ++e) {
      const DeviceWeight& d = weight(parts[m][e]);
      CudaKernels::ExpertTable& tab = *tables[m];
      if (e == 0) {
        tab.kind = d.kind;
        tab.rows = d.rows;
        tab.k = d.k;
      } else if (d.kind != tab.kind || d.rows != tab.rows || d.k != tab.k) {
        throw_error("CUDA moe: expert {} of '{}' is [{}, {}] {}, expert 0 [{}, {}] {}", e,
                    parts[m][e].name, d.k, d.rows, weight_kind_name(d.kind), tab.k, tab.rows,
                    weight_kind_name(tab.kind));
      }
      host[(m * n_expert + e) * 2] = d.buf.get();
      host[(m * n_expert + e) * 2 + 1] = d.buf.get() + d.scale_offset;
    }
  }
  t.buf = DeviceBuffer(host.size() * sizeof(uint64_t));
  t.buf.upload(host.data(), host.size() * sizeof(uint64_t));
  for (size_t m = 0; m < 3; ++m) {
    tables[m]->tab = t.buf.get() + m * n_expert * 2 * sizeof(uint64_t);
    tables[m]->n_expert = int(n_expert);
  }
  // gpt-oss's expert biases, [n_expert][rows] each, beside the tables.
  const std::span<const std::vector<float>> biases[3] = {w.gate_bias, w.up_bias, w.down_bias};
  for (size_t m = 0; m < 3; ++m) {
    if (biases[m].empty()) continue;
    if (biases[m].size() != n_expert)
      throw_error("CUDA moe: {} expert biases for {} experts", biases[m].size(), n_expert);
    std::vector<float> flat;
    for (const std::vector<float>& b : biases[m]) {
      if (int64_t(b.size()) != tables[m]->rows)
        throw_error("CUDA moe: an expert bias of {} for rows of {}", b.size(), tables[m]->rows);
      flat.insert(flat.end(), b.begin(), b.end());
    }
    t.bias[m] = DeviceBuffer(flat.size() * sizeof(float));
    t.bias[m].upload(flat.data(), flat.size() * sizeof(float));
    tables[m]->bias = t.bias[m].get();
  }
  if (t.gate.rows != t.up.rows || t.gate.rows != t.down.k || t.gate.k != t.down.rows)
    throw_error("CUDA moe: experts gate [{}, {}], up [{}, {}], down [{}, {}] do not chain",
                t.gate.k, t.gate.rows, t.up.k, t.up.rows, t.down.k, t.down.rows);
  return moe_tables_.emplace(w.gate.data(), std::move(t)).first->second;
}

void CudaOps::moe_ffn(Act x, const MoeExperts& w, const MoeRouting& r, const MoeScratch& s, Act out) {
  const int64_t n = x.rows, cols = x.cols;
  const int k = r.n_used, n_expert = r.n_expert;
  if (w.pages)  // the engine pages experts for the host only (runtime/expert_cache.h)
    throw_error("CUDA: layer {}'s experts are paged from disk, which runs on the host only",
                w.layer);
  if (n_expert > CudaKernels::kMaxRouteExperts || k > CudaKernels::kMaxRouteUsed ||
      !r.plain_choice()) {
    // Beyond what the routing kernel holds (or a sigmoid, group-limited or biased choice, which
    // it does not implement): the plain twin, which routes on the host (its read of the logits
    // cannot be captured, so the decode graphs go).
    if (mode_ != Mode::Direct)
      throw_error("CUDA: a host-routed MoE layer in a captured decode step");
    if (graphs_enabled_) {
      graphs_enabled_ = false;
      drop_graphs();
    }
    Ops::moe_ffn(x, w, r, s, out);
    return;
  }
  const MoeTables& t = moe_tables(w);
  if (t.gate.k != cols || int64_t(w.gate.size()) != n_expert)
    throw_error("CUDA moe: {} experts of row length {} for {} experts over rows of {}",
                w.gate.size(), t.gate.k, n_expert, cols);
  const int64_t ff = t.gate.rows, pairs = n * k;
  const int terms = k + (w.has_shared() ? 1 : 0);
  const Act ys{s.ys.data, n * terms, cols};  // each pair's expert output, then the shared one's

  const Act logits{s.logits.data, n, n_expert};
  matmul(*w.router, x, logits);
  if (w.router_bias) add_bias(logits, *w.router_bias);
  const Act route = alloc(2, pairs);  // [2][pairs]: expert ids (int32 bits), their weights
  const CUdeviceptr ids = ptr(route), weights = ids + size_t(pairs) * sizeof(float);
  if (launching())
    kernels_.moe_route(ptr(logits), n, n_expert, k, r.gating == MoeGating::Softmax, r.norm_weights,
                       r.weights_scale, ids, weights, stream_);
  wrote(route);

  CUdeviceptr where = 0;  // pair -> its row of ys (0: ys is in pair order)
  const bool q = uses_q8_activation(t.gate.kind) || uses_q8_activation(t.up.kind);
  // silu(gate) * up of each pair in s.gate, quantized for the down matvec into s.up (its f32
  // rows hold the int8 [pairs][ff] and the (d, d sum) [pairs][ff / 32] with room to spare).
  const int64_t padded = pairs + kMoeTileRows;
  const Act act{s.gate.data, padded, ff};
  const Q8Buffers q8a{ptr(s.up), ptr(s.up) + (size_t(padded * ff) + 255) / 256 * 256, 0};
  // Steps of kDecodeGraphRows rows or fewer stay on the card: grouped from JITLLM_CUDA_MOE_GROUPED
  // rows (never with JITLLM_BATCH_INVARIANT=1, so a step gives its sessions' solo bits), per pair
  // below. Longer (prompt) steps take the host grouping and the GEMMs, which measured twice as
  // fast as the grouped matvecs on qwen3-30b-a3b's 512-row steps (docs/perf/cuda.md).
  const bool card_only = n <= int64_t(kDecodeGraphRows);
  const bool grouped = card_only && n >= knobs().moe_grouped.get() && !knobs().batch_invariant.on();
  if (grouped) {
    // The pairs sorted by expert on the card, their rows gathered in that order (xs, and in q8_
    // for the quantized kinds), each chosen expert run once over its rows in tiles of nt.
    const int nt = CudaKernels::grouped_tile(n, k, n_expert);
    const Act sort = alloc(1, n_expert + 1 + 2 * pairs);  // int32 offset [E + 1], src, where
    const CUdeviceptr offset = ptr(sort), src = offset + size_t(n_expert + 1) * 4;
    where = src + size_t(pairs) * 4;
    const Act xs{s.xs.data, padded, cols};
    if (q) ensure_q8(padded, cols);
    const Q8Buffers q8x = q ? q8_for(padded, cols) : Q8Buffers{};
    if (launching()) {
      kernels_.moe_sort(ids, pairs, n_expert, k, offset, src, where, stream_);
      kernels_.gather_rows(ptr(x), ptr(xs), src, pairs, int(cols), stream_);
      if (q) kernels_.quantize_q8(ptr(xs), pairs, cols, Q8Buffers{q8x.q, q8x.ds, 0}, stream_);
      kernels_.matmul_grouped_swiglu(t.gate, t.up, offset, nt, ptr(xs), q8x, ptr(act), q8a,
                                     w.swiglu_limit, stream_);
      kernels_.matmul_grouped(t.down, offset, nt, ptr(act), q8a, ptr(ys), stream_);
    }
    for (const Act& a : {sort, xs, act, s.up, ys}) wrote(a);
    if (q) quantized(xs);
  } else if (card_only) {
    // Every pair through the indexed matvecs, x quantized once for all of them.
    const bool reuse = q && q8_src_ == x.data && q8_rows_ == x.rows && q8_k_ == x.cols;
    if (q && !reuse) ensure_q8(n, cols);
    const Q8Buffers q8x = q ? q8_for(n, cols) : Q8Buffers{};
    if (launching()) {
      kernels_.matmul_ids_swiglu(t.gate, t.up, ids, pairs, k, ptr(x), q8x, reuse, ptr(act), q8a,
                                 w.swiglu_limit, stream_);
      kernels_.matmul_ids(t.down, ids, pairs, 1, ptr(act), q8a, true, ptr(ys), stream_);
    }
    if (q && !reuse) quantized(x);
    wrote(act);
    wrote(s.up);
    wrote(ys);
  } else {
    // Direct steps only (a captured step has at most kDecodeGraphRows rows): the ids come home
    // once, the rows are gathered expert by expert, and each chosen expert runs once over its
    // rows (the prefill GEMMs read each expert's weights once for the step).
    std::vector<int32_t> host_ids(static_cast<size_t>(pairs));
    {
      std::vector<float> bits(static_cast<size_t>(pairs));
      read(Act{route.data, 1, pairs}, bits.data());
      std::memcpy(host_ids.data(), bits.data(), bits.size() * sizeof(float));
    }
    const ExpertGroups g = group_by_expert(host_ids, n, k, n_expert);
    std::vector<int32_t> index(size_t(2 * pairs));  // [2][pairs]: source row of each, where
    for (size_t i = 0; i < size_t(pairs); ++i) {
      index[i] = g.order[i] / k;
      index[size_t(pairs) + i] = g.where[i];
    }
    const Act rows = alloc(2, pairs);
    upload(ptr(rows), index.data(), index.size() * sizeof(int32_t));
    where = ptr(rows) + size_t(pairs) * sizeof(int32_t);
    const Act xs{s.xs.data, pairs, cols};
    if (launching()) kernels_.gather_rows(ptr(x), ptr(xs), ptr(rows), pairs, int(cols), stream_);
    wrote(xs);
    for (int e = 0; e < n_expert; ++e) {
      const int64_t first = g.offset[size_t(e)], count = g.offset[size_t(e) + 1] - first;
      if (count == 0) continue;  // an expert no row chose is never read
      const Act ge = rows_of(Act{s.gate.data, pairs, ff}, first, count);
      const Act ue = rows_of(Act{s.up.data, pairs, ff}, first, count);
      run_expert(*this, w, e, w.matrices(e), rows_of(xs, first, count), ge, ue,
                 rows_of(ys, first, count));
    }
  }

  CUdeviceptr shared = 0, shared_gate = 0;
  if (w.has_shared()) {
    const int64_t sff = w.shared_ffn_gate->shape[1];
    const Act sg{s.sgate.data, n, sff}, su{s.sup.data, n, sff};
    gate_up_swiglu(x, *w.shared_ffn_gate, *w.shared_ffn_up, sg, su, sg);
    const Act sy = rows_of(ys, pairs, n);
    matmul(*w.shared_ffn_down, sg, sy);
    shared = ptr(sy);
    if (w.shared_gate) {
      const Act sl{s.shared_gate.data, n, 1};
      matmul(*w.shared_gate, x, sl);
      shared_gate = ptr(sl);
    }
  }
  if (launching())
    kernels_.moe_combine(ptr(ys), ptr(out), where, weights, n, k, int(cols), shared, shared_gate,
                         stream_);
  wrote(out);
}

}  // namespace jitllm::cuda
