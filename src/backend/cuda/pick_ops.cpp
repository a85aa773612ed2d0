// CudaOps::pick_logits: a sampler's candidates selected on the card (pick_source.cpp), so a
// step brings home a few hundred values a row instead of the vocabulary (graph/logits_pick.h).
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_source.h"
#include "core/error.h"

namespace jitllm::cuda {

void CudaKernels::pick_logits(const PickCall& c, const Stream& s) {
  if (c.rows <= 0) return;
  if (c.cols <= 0 || c.cols > c.stride || c.stride > INT32_MAX)
    throw_error("pick_logits: {} columns of rows of {}", c.cols, c.stride);
  if (!pick_) pick_ = compiler_.module(pick_source(), "logits pick").function("pick_logits");
  CUdeviceptr x = c.x, spec = c.spec, extra_ids = c.extra_ids, masks = c.masks, ids = c.ids;
  CUdeviceptr vals = c.vals;
  CUdeviceptr extra = c.extra, bad = c.bad, stat_f = c.stat_f, lse = c.lse;
  long long stride = c.stride;
  int cols = int(c.cols);
  void* args[] = {&x,   &stride, &cols, &spec, &extra_ids, &masks, &ids,
                  &vals, &extra, &bad, &stat_f, &lse};
  run(pick_, unsigned(c.rows), 1, 1024, s, args, "pick_logits");
}

void CudaOps::pick_logits(Act x, const LogitsPicks& picks) {
  if (picks.rows.size() != size_t(x.rows) || picks.cols > x.cols || picks.cols <= 0)
    throw_error("pick_logits: {} picks of {} columns for {} rows of {}", picks.rows.size(),
                picks.cols, x.rows, x.cols);
  // The graph (when there is one) ends at the logits; the pick runs after it, as argmax_rows.
  finish_step();
  const int64_t rows = x.rows;
  // Host side of the call: spec [rows][8], the extra columns, and the results' layout:
  // lse [rows] f64 | ids [tops] | vals [tops] | extra [extras] | bad [rows] | stat_f [rows][2].
  std::vector<int32_t> spec(size_t(rows) * 8, 0), extra_ids;
  std::vector<uint64_t> masks;  // the rows' grammar masks, one after another
  int64_t tops = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const LogitsPick& p = picks.rows[size_t(r)];
    check_pick(p, picks.cols);
    int32_t* s = &spec[size_t(r) * 8];
    s[0] = std::max(p.top, 0);
    s[1] = int32_t(tops);
    s[2] = int32_t(extra_ids.size());
    s[3] = int32_t(p.extra.size());
    s[4] = p.log_norm ? 1 : 0;
    s[5] = -1;
    if (!p.allowed.empty() && p.top >= 0) {
      s[5] = int32_t(masks.size());
      masks.insert(masks.end(), p.allowed.begin(), p.allowed.begin() + (picks.cols + 63) / 64);
    }
    tops += s[0];
    extra_ids.insert(extra_ids.end(), p.extra.begin(), p.extra.end());
  }
  const int64_t extras = int64_t(extra_ids.size());
  const size_t lse_b = size_t(rows) * 8, ids_b = size_t(tops) * 4, extra_b = size_t(extras) * 4;
  const size_t out_b = lse_b + 2 * ids_b + extra_b + size_t(rows) * 12;
  const size_t mask_b = masks.size() * 8;
  // Inputs: masks (8-byte aligned first) | spec | extra ids.
  const size_t in_b = (mask_b + spec.size() * 4 + extra_b + 7) / 8 * 8;
  if (pick_buf_.bytes() < in_b + out_b) {
    stream_.sync();  // not part of any graph: growing it drops none
    pick_buf_ = DeviceBuffer(std::max(in_b + out_b, pick_buf_.bytes() * 3 / 2));
  }
  const CUdeviceptr in = pick_buf_.get(), out = in + in_b;
  const CUdeviceptr spec_at = in + mask_b, extra_ids_at = spec_at + spec.size() * 4;
  if (mask_b > 0)
    check(driver().cuMemcpyHtoDAsync(in, masks.data(), mask_b, stream_.get()), "cuMemcpyHtoDAsync");
  check(driver().cuMemcpyHtoDAsync(spec_at, spec.data(), spec.size() * 4, stream_.get()),
        "cuMemcpyHtoDAsync");
  if (extras > 0)
    check(driver().cuMemcpyHtoDAsync(extra_ids_at, extra_ids.data(), extra_b, stream_.get()),
          "cuMemcpyHtoDAsync");
  CudaKernels::PickCall c;
  c.x = ptr(x);
  c.rows = rows;
  c.stride = x.cols;
  c.cols = picks.cols;
  c.spec = spec_at;
  c.extra_ids = extra_ids_at;
  c.masks = in;
  c.lse = out;
  c.ids = out + lse_b;
  c.vals = c.ids + ids_b;
  c.extra = c.vals + ids_b;
  c.bad = c.extra + extra_b;
  c.stat_f = c.bad + size_t(rows) * 4;
  kernels_.pick_logits(c, stream_);
  std::vector<uint8_t> home(out_b);
  check(driver().cuMemcpyDtoHAsync(home.data(), out, out_b, stream_.get()), "cuMemcpyDtoHAsync");
  // Whole rows come as they are.
  for (int64_t r = 0; r < rows; ++r) {
    PickedLogits& o = picks.out[r];
    o = PickedLogits{};
    if (picks.rows[size_t(r)].top >= 0) continue;
    o.row.resize(size_t(picks.cols));
    check(driver().cuMemcpyDtoHAsync(o.row.data(), c.x + size_t(r * x.cols) * 4,
                                     size_t(picks.cols) * 4, stream_.get()),
          "cuMemcpyDtoHAsync");
  }
  sync_step();
  auto at = [&](size_t offset, size_t i, auto zero) {
    decltype(zero) v;
    std::memcpy(&v, home.data() + offset + i * sizeof(v), sizeof(v));
    return v;
  };
  const size_t ids_at = lse_b, vals_at = lse_b + ids_b, extra_at = vals_at + ids_b;
  const size_t bad_at = extra_at + extra_b, stat_at = bad_at + size_t(rows) * 4;
  for (int64_t r = 0; r < rows; ++r) {
    const LogitsPick& p = picks.rows[size_t(r)];
    PickedLogits& o = picks.out[r];
    const int32_t* s = &spec[size_t(r) * 8];
    o.bad = at(bad_at, size_t(r), int32_t{});
    if (o.bad >= 0) {
      o.bad_value = at(stat_at, size_t(2 * r + 1), float{});
      o.row.clear();
      continue;
    }
    if (p.log_norm) {
      o.max = at(stat_at, size_t(2 * r), float{});
      o.log_sum = at(0, size_t(r), double{});
    }
    for (int32_t j = 0; j < s[3]; ++j) o.extra.push_back(at(extra_at, size_t(s[2] + j), float{}));
    if (s[0] == 0) continue;
    // The kernel takes the best in no order; the host's order: higher first, ties lower column.
    std::vector<std::pair<float, int32_t>> best(static_cast<size_t>(s[0]));
    for (int32_t j = 0; j < s[0]; ++j)
      best[size_t(j)] = {at(vals_at, size_t(s[1] + j), float{}), at(ids_at, size_t(s[1] + j), int32_t{})};
    std::sort(best.begin(), best.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (const auto& [v, id] : best) {
      o.top_ids.push_back(id);
      o.top_values.push_back(v);
    }
  }
}

}  // namespace jitllm::cuda
