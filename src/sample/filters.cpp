// Stateless sampler stages (see filters.h). Probabilities are computed in float, as llama.cpp
// does, so that boundary decisions (top-p, typical) agree with it on the same logits.
#include "sample/filters.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace jitllm {

void apply_top_k(Candidates& cur, int32_t k) {
  if (k <= 0) return;
  const size_t keep = std::min(size_t(k), cur.size());
  cur.sort_prefix(keep);
  cur.data.resize(keep);
  cur.sorted = true;
}

void apply_top_p(Candidates& cur, float p, size_t min_keep) {
  if (p >= 1.0f || cur.size() == 0) return;
  softmax_candidates(cur);
  // Large vocabularies: the nucleus is usually within the best few hundred, so sort only those
  // and extend the sorted prefix 4x at a time when it does not reach p (a full sort of 150k
  // candidates costs ~20 ms; llama.cpp falls back to one, we grow instead).
  size_t prefix = cur.sorted ? cur.size() : std::min<size_t>(cur.size(), 256);
  cur.sort_prefix(prefix);
  float cum = 0.0f;
  size_t keep = cur.size();
  for (size_t i = 0; i < cur.size(); ++i) {
    if (i == prefix) {
      cur.extend_sorted_prefix(prefix, prefix * 4);
      prefix = std::min(prefix * 4, cur.size());
    }
    cum += cur.data[i].p;
    if (cum >= p && i + 1 >= min_keep) {
      keep = i + 1;
      break;
    }
  }
  cur.data.resize(keep);
  cur.sorted = true;
}

void apply_min_p(Candidates& cur, float p, size_t min_keep) {
  if (p <= 0.0f || cur.size() == 0) return;
  float max_logit = -INFINITY;
  for (const auto& c : cur.data) max_logit = std::max(max_logit, c.logit);
  // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p): no softmax needed.
  const float min_logit = max_logit + std::log(p);
  size_t n_pass = 0;
  for (const auto& c : cur.data) n_pass += c.logit >= min_logit;
  if (n_pass >= std::max<size_t>(min_keep, 1)) {
    // Filter in place, keeping the current order (and so `sorted`).
    auto end = std::remove_if(cur.data.begin(), cur.data.end(),
                              [&](const Candidate& c) { return c.logit < min_logit; });
    cur.data.erase(end, cur.data.end());
    return;
  }
  // Too few pass: keep the min_keep best.
  const size_t keep = std::min(min_keep, cur.size());
  cur.sort_prefix(keep);
  cur.data.resize(keep);
  cur.sorted = true;
}

void apply_typical(Candidates& cur, float p, size_t min_keep) {
  if (p >= 1.0f || cur.size() == 0) return;
  cur.sort();
  softmax_candidates(cur);
  float entropy = 0.0f;
  for (const auto& c : cur.data) {
    if (c.p > 0.0f) entropy -= c.p * std::log(c.p);
  }
  // [size] distance of each token's surprisal from the entropy; -inf logits are infinitely far.
  std::vector<float> distance(cur.size());
  for (size_t i = 0; i < cur.size(); ++i) {
    const float p_i = cur.data[i].p;
    distance[i] = p_i > 0.0f ? std::fabs(-std::log(p_i) - entropy) : INFINITY;
  }
  std::vector<size_t> order(cur.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable: equal distances keep the probability order, so the result is the same everywhere.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return distance[a] < distance[b]; });
  float cum = 0.0f;
  size_t keep = order.size();
  for (size_t i = 0; i < order.size(); ++i) {
    cum += cur.data[order[i]].p;
    if (cum > p && i + 1 >= min_keep) {
      keep = i + 1;
      break;
    }
  }
  std::vector<Candidate> kept(keep);
  for (size_t i = 0; i < keep; ++i) kept[i] = cur.data[order[i]];
  cur.data = std::move(kept);
  cur.sorted = false;
}

void apply_temperature(Candidates& cur, float t) {
  for (auto& c : cur.data) c.logit /= t;
}

size_t argmax_candidate(const Candidates& cur) {
  if (cur.size() == 0) throw_error("sampling: no candidate tokens left to sample from");
  size_t best = 0;
  for (size_t i = 1; i < cur.size(); ++i) {
    if (logit_before(cur.data[i], cur.data[best])) best = i;
  }
  return best;
}

}  // namespace jitllm
