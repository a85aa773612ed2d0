// The host twin of MoE routing, the grouping of rows by expert, and Ops::moe_ffn's plain twin.
#include "graph/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "graph/ops.h"

namespace jitllm {

namespace {

// Experts outside the n_group_used best groups (by `score` of their selection values) get -inf
// in `sel` ([E]), so no top k reaches them (llama.cpp's ffn_moe_probs_masked).
void mask_groups(const MoeRouting& r, std::vector<float>& sel, std::vector<float>& group,
                 std::vector<int32_t>& gidx) {
  const int G = r.n_group, per = r.n_expert / G;
  for (int g = 0; g < G; ++g) {
    const float* v = sel.data() + size_t(g) * size_t(per);
    float best = -INFINITY, second = -INFINITY;
    for (int i = 0; i < per; ++i) {
      if (v[i] > best) {
        second = best;
        best = v[i];
      } else if (v[i] > second) {
        second = v[i];
      }
    }
    group[size_t(g)] = r.group_score == MoeGroupScore::Max || per < 2 ? best : best + second;
  }
  std::iota(gidx.begin(), gidx.end(), 0);
  std::partial_sort(gidx.begin(), gidx.begin() + r.n_group_used, gidx.end(), [&](int32_t a, int32_t b) {
    return group[size_t(a)] > group[size_t(b)] || (group[size_t(a)] == group[size_t(b)] && a < b);
  });
  for (int j = r.n_group_used; j < G; ++j)
    std::fill_n(sel.begin() + ptrdiff_t(gidx[size_t(j)]) * per, per, -INFINITY);
}

}  // namespace

void route_experts(const float* logits, int64_t rows, const MoeRouting& r, int32_t* ids,
                   float* weights) {
  const int E = r.n_expert, k = r.n_used;
  if (E <= 0 || k <= 0 || k > E) throw_error("moe: {} of {} experts per row", k, E);
  const bool groups = r.n_group > 1;
  if (groups && (E % r.n_group != 0 || r.n_group_used < 1 || r.n_group_used > r.n_group ||
                 int64_t(r.n_group_used) * (E / r.n_group) < k))
    throw_error("moe: {} experts in {} groups, {} groups kept, cannot choose {}", E, r.n_group,
                r.n_group_used, k);
  if (!r.plain_choice() && r.gating == MoeGating::SoftmaxChosen)
    throw_error("moe: a softmax over the chosen with a selection bias or groups is not implemented");
  std::vector<int32_t> idx(static_cast<size_t>(E));
  std::vector<float> p(static_cast<size_t>(E)), sel(static_cast<size_t>(E));
  std::vector<float> group(size_t(std::max(r.n_group, 1)));
  std::vector<int32_t> gidx(group.size());
  for (int64_t row = 0; row < rows; ++row) {
    const float* l = logits + row * E;
    if (!r.plain_choice()) {  // the probabilities first: the choice reads them (and the bias)
      if (r.gating == MoeGating::Sigmoid) {
        for (int e = 0; e < E; ++e) p[size_t(e)] = 1.0f / (1.0f + std::exp(-l[e]));
      } else {
        float max = l[0];
        for (int e = 1; e < E; ++e) max = std::max(max, l[e]);
        float sum = 0.0f;
        for (int e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(l[e] - max);
        for (int e = 0; e < E; ++e) p[size_t(e)] /= sum;
      }
      for (int e = 0; e < E; ++e) sel[size_t(e)] = p[size_t(e)] + (r.selection_bias ? r.selection_bias[e] : 0.0f);
      if (groups) mask_groups(r, sel, group, gidx);
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
        return sel[size_t(a)] > sel[size_t(b)] || (sel[size_t(a)] == sel[size_t(b)] && a < b);
      });
      int32_t* out_ids = ids + row * k;
      float* w = weights + row * k;
      for (int j = 0; j < k; ++j) {
        out_ids[j] = idx[size_t(j)];
        w[j] = p[size_t(idx[size_t(j)])];
      }
      if (r.norm_weights) {  // llama.cpp clamps the sum at f16's smallest normal
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) sum += w[j];
        sum = std::max(sum, 6.103515625e-5f);
        for (int j = 0; j < k; ++j) w[j] /= sum;
      }
      if (r.weights_scale != 0.0f && r.weights_scale != 1.0f)
        for (int j = 0; j < k; ++j) w[j] *= r.weights_scale;
      continue;
    }
    // Softmax is monotonic, so the top k of the probabilities are the top k of the logits.
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
      return l[a] > l[b] || (l[a] == l[b] && a < b);
    });
    int32_t* out_ids = ids + row * k;
    float* w = weights + row * k;
    const float top = l[idx[0]];
    if (r.gating == MoeGating::Softmax) {
      float max = l[0];
      for (int e = 1; e < E; ++e) max = std::max(max, l[e]);
      float sum = 0.0f;
      for (int e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(l[e] - max);
      for (int j = 0; j < k; ++j) w[j] = p[size_t(idx[size_t(j)])] / sum;
    } else {  // softmax over the chosen only
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += w[j] = std::exp(l[idx[size_t(j)]] - top);
      for (int j = 0; j < k; ++j) w[j] /= sum;
    }
    for (int j = 0; j < k; ++j) out_ids[j] = idx[size_t(j)];
    if (r.norm_weights) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += w[j];
      for (int j = 0; j < k; ++j) w[j] /= sum;
    }
    if (r.weights_scale != 0.0f && r.weights_scale != 1.0f)
      for (int j = 0; j < k; ++j) w[j] *= r.weights_scale;
  }
}

ExpertGroups group_by_expert(std::span<const int32_t> ids, int64_t rows, int n_used, int n_expert) {
  ExpertGroups g;
  const size_t pairs = size_t(rows) * size_t(n_used);
  if (ids.size() != pairs) throw_error("moe: {} expert ids for {} rows of {}", ids.size(), rows, n_used);
  g.offset.assign(size_t(n_expert) + 1, 0);
  for (const int32_t e : ids) {
    if (e < 0 || e >= n_expert) throw_error("moe: expert id {} of {}", e, n_expert);
    ++g.offset[size_t(e) + 1];
  }
  std::partial_sum(g.offset.begin(), g.offset.end(), g.offset.begin());
  g.order.resize(pairs);
  g.where.resize(pairs);
  std::vector<int32_t> next(g.offset.begin(), g.offset.end() - 1);
  for (size_t i = 0; i < pairs; ++i) {  // row-major: each expert's rows stay in row order
    const int32_t at = next[size_t(ids[i])]++;
    g.order[size_t(at)] = int32_t(i);
    g.where[i] = at;
  }
  return g;
}

namespace {

Act rows_of(Act a, int64_t first, int64_t count) {
  return Act{a.data + first * a.cols, count, a.cols};
}

}  // namespace

void run_expert(Ops& ops, const MoeExperts& w, int e, const ExpertMatrices& m, Act x, Act gate,
                Act up, Act y) {
  const size_t i = size_t(e);
  if (w.gate_bias.empty() && w.up_bias.empty() && w.swiglu_limit <= 0.0f) {
    ops.gate_up_swiglu(x, *m.gate, *m.up, gate, up, gate);
  } else {  // gpt-oss: biases after each product, the clamped SwiGLU
    const Ops::MatmulOut gate_up[] = {{m.gate, gate}, {m.up, up}};
    ops.matmul_group(x, gate_up);
    if (!w.gate_bias.empty()) ops.add_bias(gate, w.gate_bias[i]);
    if (!w.up_bias.empty()) ops.add_bias(up, w.up_bias[i]);
    if (w.swiglu_limit > 0.0f)
      ops.swiglu_oai(gate, up, gate, kSwigluOaiAlpha, w.swiglu_limit);
    else
      ops.swiglu(gate, up, gate);
  }
  ops.matmul(*m.down, gate, y);
  if (!w.down_bias.empty()) ops.add_bias(y, w.down_bias[i]);
}

void Ops::moe_ffn(Act x, const MoeExperts& w, const MoeRouting& r, const MoeScratch& s, Act out) {
  const int64_t n = x.rows;
  const int k = r.n_used;
  const Act logits{s.logits.data, n, r.n_expert};
  matmul(*w.router, x, logits);
  if (w.router_bias) add_bias(logits, *w.router_bias);
  std::vector<float> host(size_t(n) * size_t(r.n_expert));
  read(logits, host.data());
  std::vector<int32_t> ids(size_t(n) * size_t(k));
  std::vector<float> weights(ids.size());
  route_experts(host.data(), n, r, ids.data(), weights.data());
  const ExpertGroups g = group_by_expert(ids, n, k, r.n_expert);
  const int terms = k + (w.has_shared() ? 1 : 0);  // per row: its experts, then the shared one
  const Act ys{s.ys.data, n * terms, x.cols};

  // Every chosen (row, slot) gathered in expert order, each expert's rows one contiguous run.
  std::vector<int32_t> src(g.order.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = g.order[i] / k;
  const Act xs{s.xs.data, n * k, x.cols};
  select_rows(x, src, xs);
  const int64_t ff = w.gate.empty() ? 0 : w.gate[0].shape[1];
  const auto run = [&](int e, const ExpertMatrices& m) {
    const int64_t first = g.offset[size_t(e)], count = g.offset[size_t(e) + 1] - first;
    const Act xe = rows_of(xs, first, count);
    const Act ge = rows_of(Act{s.gate.data, n * k, ff}, first, count);
    const Act ue = rows_of(Act{s.up.data, n * k, ff}, first, count);
    run_expert(*this, w, e, m, xe, ge, ue, rows_of(ys, first, count));
  };
  std::vector<int32_t> chosen;  // an expert no row chose is never read
  for (int e = 0; e < r.n_expert; ++e)
    if (g.offset[size_t(e) + 1] > g.offset[size_t(e)]) chosen.push_back(e);
  if (!w.pages) {
    for (const int32_t e : chosen) run(e, w.matrices(e));
  } else {
    // Paged experts: as many as the cache holds at a time, every read of a batch in flight
    // together, each expert run as soon as its pages are in (those in memory first). Each
    // expert's rows land in their own place, so the order does not change a bit of the sum.
    struct Release {
      ExpertPages& p;
      ~Release() { p.release(); }
    };
    const size_t batch = size_t(std::max(1, w.pages->capacity()));
    for (size_t at = 0; at < chosen.size(); at += batch) {
      const std::span<const int32_t> part =
          std::span<const int32_t>(chosen).subspan(at, std::min(batch, chosen.size() - at));
      w.pages->fetch(w.layer, part);
      const Release release{*w.pages};
      for (size_t i = 0; i < part.size(); ++i) {  // the experts in memory while others are read
        int32_t e = -1;
        const ExpertMatrices m = w.pages->next(w.layer, &e);
        run(e, m);
      }
    }
  }

  // Row r's terms: its k experts' outputs (where they landed in expert order), then the shared
  // expert's at row n * k + r.
  std::vector<int32_t> rows(size_t(n) * size_t(terms));
  std::vector<float> coef(rows.size());
  for (int64_t row = 0; row < n; ++row)
    for (int j = 0; j < k; ++j) {
      rows[size_t(row * terms + j)] = g.where[size_t(row * k + j)];
      coef[size_t(row * terms + j)] = weights[size_t(row * k + j)];
    }
  if (w.has_shared()) {
    const int64_t sff = w.shared_ffn_gate->shape[1];
    const Act sg{s.sgate.data, n, sff}, su{s.sup.data, n, sff};
    gate_up_swiglu(x, *w.shared_ffn_gate, *w.shared_ffn_up, sg, su, sg);
    matmul(*w.shared_ffn_down, sg, rows_of(ys, n * k, n));
    std::vector<float> gate(size_t(n), 1.0f);
    if (w.shared_gate) {
      const Act sl{s.shared_gate.data, n, 1};
      matmul(*w.shared_gate, x, sl);
      read(sl, gate.data());
      for (float& v : gate) v = 1.0f / (1.0f + std::exp(-v));
    }
    for (int64_t row = 0; row < n; ++row) {
      rows[size_t(row * terms + k)] = int32_t(n * k + row);
      coef[size_t(row * terms + k)] = gate[size_t(row)];
    }
  }
  weighted_sum_rows(ys, rows, coef, out);
}

}  // namespace jitllm
