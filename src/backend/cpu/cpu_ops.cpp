// CpuOps: the op interface over host memory and CpuKernels.
#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "graph/moe.h"
#include "quant/quant.h"

namespace jitllm {

void CpuOps::begin(const Batch& batch, const KvLayout& kv) {
  batch_ = batch;
  kv_ = kv;  // (copy-assignment keeps the per-layer vector's storage from step to step)
  next_ = 0;
}

Act CpuOps::alloc(int64_t rows, int64_t cols) {
  if (next_ == scratch_.size()) scratch_.emplace_back();
  std::vector<float>& buf = scratch_[next_++];
  const size_t need = size_t(rows) * size_t(cols);
  if (buf.size() < need) buf.resize(need);
  return Act{buf.data(), rows, cols};
}

void CpuOps::embed(const TensorInfo& table, Act out) {
  const int64_t n_vocab = table.rows();
  for (int32_t id : batch_.tokens)
    if (id < 0 || id >= n_vocab)
      throw_error("token id {} is out of range (vocabulary of {})", id, n_vocab);
  const int64_t n = int64_t(batch_.tokens.size());
  const PreparedWeights* copy = existing_copy(table);
  if (copy && k_.prefill_reads_prepared(table.type, table.row_length())) {
    // A table that is also a matrix (a tied output head) whose pages were given back for its
    // decode copy (prepared()): its rows come from the copy.
    rows_.resize(size_t(n) * row_bytes(table.type, table.row_length()));
    ids_.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) ids_[size_t(i)] = int32_t(i);
    if (k_.rows_from_prepared(*copy, batch_.tokens.data(), n, rows_.data()))
      return k_.get_rows(table.type, rows_.data(), table.row_length(), ids_.data(), n, out.data);
  }
  k_.get_rows(table.type, table.data, table.row_length(), batch_.tokens.data(), n, out.data);
}

void CpuOps::rms_norm(Act x, const std::vector<float>& w, float eps, Act out) {
  k_.rms_norm(x.data, w.data(), x.rows, x.cols, eps, out.data);
}

const PreparedWeights* CpuOps::prepared(const TensorInfo& w) {
  if (w.transient) return nullptr;  // a paged expert: its slot holds another one next time
  auto it = prepared_.find(w.data);
  if (it != prepared_.end()) return it->second.get();
  it = prepared_.emplace(w.data, k_.prepare_weights(w.type, w.data, w.rows(), w.row_length())).first;
  // The copy is what the kernels read from now on (decode, prompt steps, the embedding lookup of
  // a tied table): give the original's pages back, so the process holds one copy of the weights.
  // Steps of a few tokens (sessions decoding together) read the original and fault it back in.
  if (it->second && k_.prefill_reads_prepared(w.type, w.row_length()))
    release_resident_pages(w.data, size_t(w.rows()) * row_bytes(w.type, w.row_length()));
  return it->second.get();
}

const PreparedWeights* CpuOps::existing_copy(const TensorInfo& w) const {
  if (w.transient) return nullptr;
  const auto it = prepared_.find(w.data);
  return it == prepared_.end() ? nullptr : it->second.get();
}

void CpuOps::moe_ffn(Act x, const MoeExperts& w, const MoeRouting& r, const MoeScratch& s, Act out) {
  if (!w.pages && x.rows <= kPrepareExpertsRows && !w.gate.empty() && experts_prepared_.insert(w.gate.data()).second) {
    for (const std::span<const TensorInfo> part : {w.gate, w.up, w.down})
      for (const TensorInfo& e : part) prepared(e);
  }
  Ops::moe_ffn(x, w, r, s, out);
}

void CpuOps::matmul(const TensorInfo& w, Act x, Act out) {
  if (x.rows == 1) {  // decode: through the group call, which carries the prepared copy
    if (w.row_length() != x.cols)
      throw_error("{}: row length {} does not match the input's {}", w.name, w.row_length(), x.cols);
    const CpuKernels::MatmulTarget t{w.type, w.data, w.rows(), out.data, prepared(w)};
    return k_.matmul_group({&t, 1}, x.cols, x.data, 1);
  }
  if (const PreparedWeights* copy = existing_copy(w)) {  // prompt steps read it where they can
    const CpuKernels::MatmulTarget t{w.type, w.data, w.rows(), out.data, copy};
    return k_.matmul_group({&t, 1}, x.cols, x.data, x.rows);
  }
  k_.matmul(w.type, w.data, w.rows(), w.row_length(), x.data, x.rows, out.data);
}

void CpuOps::matmul_group(Act x, std::span<const MatmulOut> outs) {
  group_.clear();
  for (const MatmulOut& o : outs) {
    if (o.w->row_length() != x.cols)
      throw_error("{}: row length {} does not match the input's {}", o.w->name, o.w->row_length(),
                  x.cols);
    group_.push_back(
        {o.w->type, o.w->data, o.w->rows(), o.out.data,
         x.rows == 1 ? prepared(*o.w) : existing_copy(*o.w)});
  }
  k_.matmul_group(group_, x.cols, x.data, x.rows);
}

void CpuOps::rope(Act x, int n_heads, int head_dim, const RopeParams& params) {
  k_.rope(x.data, x.rows, n_heads, head_dim, batch_.pos.data(), params);
}

void CpuOps::attention(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec) {
  // Every field of AttnSpec is implemented here: sliding windows, soft-capping, sinks,
  // bidirectional attention (a sequence whole in its step), V heads of their own width and V
  // read from the K rows (MLA).
  if (spec.v_in_k && spec.head_dim_v > spec.head_dim_k)
    throw_error("CPU attention: V heads of {} cannot be read from K heads of {}", spec.head_dim_v,
                spec.head_dim_k);
  const KvLayout& kv = kv_;
  if (kv.layer(il).k_dim != spec.k_dim() || kv.layer(il).v_dim != spec.v_dim())
    throw_error("CPU attention: layer {} keeps K/V rows of {}/{}, the step gives {}/{}", il,
                kv.layer(il).k_dim, kv.layer(il).v_dim, spec.k_dim(), spec.v_dim());
  const size_t n = batch_.n_rows();
  k_rows_.resize(n);
  v_rows_.resize(n);
  n_kv_.resize(n);
  kv_start_.resize(n);
  dst_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const KvSeq& s = batch_.seqs[size_t(batch_.seq[i])];
    k_rows_[i] = kv.k_rows(s.pages, il);
    v_rows_[i] = spec.v_in_k ? k_rows_[i] : kv.v_rows(s.pages, il);
    n_kv_[i] = int64_t(batch_.pos[i]) + 1;
    kv_start_[i] = spec.window > 0 ? std::max<int64_t>(0, n_kv_[i] - spec.window) : 0;
  }
  if (!spec.causal) {
    // Every row sees its whole sequence, which must therefore be in this step from position 0
    // (an earlier step's rows would not have seen this one's).
    for (size_t i = 0; i < n;) {
      size_t end = i;
      while (end < n && batch_.seq[end] == batch_.seq[i]) ++end;
      if (batch_.pos[i] != 0)
        throw_error("bidirectional attention: a sequence starts at position {} in this step; it "
                    "must come whole, in one step", batch_.pos[i]);
      for (size_t j = i; j < end; ++j) n_kv_[j] = int64_t(batch_.pos[end - 1]) + 1;
      i = end;
    }
  }
  // K and V of every row are stored first: rows of one sequence attend to each other.
  for (size_t i = 0; i < n; ++i) dst_[i] = k_rows_[i].row(batch_.pos[i]);
  k_.store_rows(kv.type, k.data, int64_t(n), spec.k_dim(), dst_.data());
  if (!spec.v_in_k) {  // else V is part of what was just stored
    for (size_t i = 0; i < n; ++i) dst_[i] = v_rows_[i].row(batch_.pos[i]);
    k_.store_rows(kv.type, v.data, int64_t(n), spec.v_dim(), dst_.data());
  }

  AttentionArgs a;
  a.n_head = spec.n_head;
  a.n_head_kv = spec.n_head_kv;
  a.head_dim = spec.head_dim_k;
  a.head_dim_v = spec.head_dim_v;
  a.v_in_k = spec.v_in_k;
  a.scale = spec.scale;
  a.kv_type = kv.type;
  a.n_rows = int64_t(n);
  a.q = q.data;
  a.out = out.data;
  a.n_kv = n_kv_.data();
  a.kv_start = spec.window > 0 ? kv_start_.data() : nullptr;
  a.softcap = spec.softcap;
  a.sinks = spec.sinks;
  a.k = k_rows_.data();
  a.v = v_rows_.data();
  // llama.cpp switches to its tiled f32 kernel for ubatches of 64 tokens or more; doing the same
  // keeps prompts of any length within reduction noise of its logits.
  a.f32_tiles = n >= 64;
  k_.attention(a);
}

void CpuOps::swiglu(Act gate, Act up, Act out) {
  k_.swiglu(gate.data, up.data, out.data, gate.rows * gate.cols);
}

void CpuOps::swiglu_oai(Act gate, Act up, Act out, float alpha, float limit) {
  k_.swiglu_oai(gate.data, up.data, out.data, gate.rows * gate.cols, alpha, limit);
}

void CpuOps::geglu(Act gate, Act up, Act out) {
  k_.geglu(gate.data, up.data, out.data, gate.rows * gate.cols);
}

void CpuOps::add(Act acc, Act x) { k_.add(acc.data, x.data, acc.rows * acc.cols); }

void CpuOps::add_bias(Act x, const std::vector<float>& bias) {
  if (int64_t(bias.size()) != x.cols)
    throw_error("add_bias: {} values for rows of {}", bias.size(), x.cols);
  k_.add_rows(x.data, bias.data(), x.rows, x.cols);
}

void CpuOps::scale(Act x, float s) { k_.scale(x.data, s, x.rows * x.cols); }

void CpuOps::softcap(Act x, float cap) { k_.softcap(x.data, cap, x.rows * x.cols); }

void CpuOps::layer_norm(Act x, const std::vector<float>& w, const std::vector<float>& b, float eps,
                        Act out) {
  if ((!w.empty() && int64_t(w.size()) != x.cols) || (!b.empty() && int64_t(b.size()) != x.cols))
    throw_error("layer_norm: {} weights and {} biases for rows of {}", w.size(), b.size(), x.cols);
  k_.layer_norm(x.data, w.empty() ? nullptr : w.data(), b.empty() ? nullptr : b.data(), x.rows,
                x.cols, eps, out.data);
}

void CpuOps::gelu(Act x, Act out) { k_.gelu_erf(x.data, out.data, x.rows * x.cols); }

void CpuOps::add_table_rows(const TensorInfo& table, std::span<const int32_t> ids, Act x) {
  if (table.row_length() != x.cols || int64_t(ids.size()) != x.rows)
    throw_error("{}: rows of {} for {} ids into [{}, {}]", table.name, table.row_length(), ids.size(),
                x.rows, x.cols);
  for (const int32_t id : ids)
    if (id < 0 || id >= table.rows())
      throw_error("{}: row {} is out of range ({} rows)", table.name, id, table.rows());
  rows_f32_.resize(size_t(x.rows * x.cols));
  k_.get_rows(table.type, table.data, table.row_length(), ids.data(), x.rows, rows_f32_.data());
  k_.add(x.data, rows_f32_.data(), x.rows * x.cols);
}

void CpuOps::mul(Act acc, Act x) {
  const int64_t count = acc.rows * acc.cols;
  for (int64_t i = 0; i < count; ++i) acc.data[i] *= x.data[i];
}

void CpuOps::short_conv(int il, Act x, const std::vector<float>& kernel, int L, Act out) {
  const KvLayout& kv = kv_;
  if (kv.layer(il).k_dim != x.cols || kv.layer(il).v_dim != 0)
    throw_error("short_conv: layer {} keeps rows of {}/{}, the step gives {}", il, kv.layer(il).k_dim,
                kv.layer(il).v_dim, x.cols);
  if (L < 1 || int64_t(kernel.size()) != x.cols * L)
    throw_error("short_conv: {} kernel values for {} channels of {} taps", kernel.size(), x.cols, L);
  const size_t n = batch_.n_rows();
  k_rows_.resize(n);
  dst_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    k_rows_[i] = kv.k_rows(batch_.seqs[size_t(batch_.seq[i])].pages, il);
    dst_[i] = k_rows_[i].row(batch_.pos[i]);
  }
  // Every row's input first: rows of one sequence read the ones before them in this step.
  const QuantType type = kv.type_of(il);
  k_.store_rows(type, x.data, int64_t(n), x.cols, dst_.data());
  const int64_t cols = x.cols;
  ThreadPool::global().parallel_for(int64_t(n), 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out.data + r * cols;
      std::fill(o, o + cols, 0.0f);
      for (int j = 0; j < L; ++j) {
        const int64_t p = int64_t(batch_.pos[size_t(r)]) - (L - 1) + j;
        if (p < 0) continue;
        const uint8_t* src = k_rows_[size_t(r)].row(p);
        if (type == QuantType::F32)
          std::memcpy(row.data(), src, size_t(cols) * sizeof(float));
        else
          dequantize_row(type, src, row.data(), cols);
        for (int64_t c = 0; c < cols; ++c) o[c] += kernel[size_t(c * L + j)] * row[size_t(c)];
      }
    }
  });
}

void CpuOps::copy_cols(Act x, int64_t first, Act out) {
  if (first < 0 || first + out.cols > x.cols)
    throw_error("copy_cols: columns [{}, {}) of rows of {}", first, first + out.cols, x.cols);
  for (int64_t r = 0; r < out.rows; ++r)
    std::memcpy(out.data + r * out.cols, x.data + r * x.cols + first, size_t(out.cols) * sizeof(float));
}

void CpuOps::copy_cols_into(Act x, Act out, int64_t first) {
  if (first < 0 || first + x.cols > out.cols || x.rows != out.rows)
    throw_error("copy_cols_into: {} rows of {} into columns [{}, {}) of {} rows of {}", x.rows,
                x.cols, first, first + x.cols, out.rows, out.cols);
  for (int64_t r = 0; r < x.rows; ++r)
    std::memcpy(out.data + r * out.cols + first, x.data + r * x.cols, size_t(x.cols) * sizeof(float));
}

void CpuOps::select_rows(Act x, std::span<const int32_t> rows, Act out) {
  for (size_t j = 0; j < rows.size(); ++j)
    std::memmove(out.data + int64_t(j) * x.cols, x.data + int64_t(rows[j]) * x.cols,
                 size_t(x.cols) * sizeof(float));
}

void CpuOps::weighted_sum_rows(Act x, std::span<const int32_t> rows, std::span<const float> coef,
                               Act out) {
  if (out.rows == 0) return;
  const size_t t = rows.size() / size_t(out.rows);
  if (rows.size() != t * size_t(out.rows) || coef.size() != rows.size() || out.cols != x.cols)
    throw_error("weighted_sum_rows: {} rows and {} weights for {} output rows of {}", rows.size(),
                coef.size(), out.rows, out.cols);
  for (int64_t r = 0; r < out.rows; ++r) {
    float* o = out.data + r * out.cols;
    for (size_t j = 0; j < t; ++j) {
      const int64_t src = rows[size_t(r) * t + j];
      if (src < 0 || src >= x.rows) throw_error("weighted_sum_rows: row {} of {}", src, x.rows);
      const float* xi = x.data + src * x.cols;
      const float c = coef[size_t(r) * t + j];
      // The first term assigns, so `out` needs no clearing (and garbage in it cannot leak).
      if (j == 0)
        for (int64_t i = 0; i < out.cols; ++i) o[i] = c * xi[i];
      else
        for (int64_t i = 0; i < out.cols; ++i) o[i] += c * xi[i];
    }
  }
}

void CpuOps::read(Act x, float* host) {
  std::memcpy(host, x.data, size_t(x.rows * x.cols) * sizeof(float));
}

void CpuOps::write(Act x, const float* host) {
  std::memcpy(x.data, host, size_t(x.rows * x.cols) * sizeof(float));
}

}  // namespace jitllm
