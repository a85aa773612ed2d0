// Candidate list helpers (see candidates.h).
#include "sample/candidates.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace jitllm {

void Candidates::assign(std::span<const float> logits) {
  data.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY)
      throw ModelOutputError(
          fmt::format("sampling: logits[{}] is {}", i, std::isnan(logits[i]) ? "NaN" : "+inf"));
    data[i] = Candidate{int32_t(i), logits[i], 0.0f};
  }
  sorted = false;
}

void Candidates::sort() {
  if (sorted) return;
  std::sort(data.begin(), data.end(), logit_before);
  sorted = true;
}

void Candidates::sort_prefix(size_t k) {
  if (sorted) return;
  if (k >= data.size()) {
    sort();
    return;
  }
  std::partial_sort(data.begin(), data.begin() + std::ptrdiff_t(k), data.end(), logit_before);
}

void Candidates::extend_sorted_prefix(size_t done, size_t k) {
  if (sorted || k <= done) return;
  k = std::min(k, data.size());
  std::partial_sort(data.begin() + std::ptrdiff_t(done), data.begin() + std::ptrdiff_t(k),
                    data.end(), logit_before);
  if (k == data.size()) sorted = true;
}

void softmax_candidates(Candidates& cur) {
  if (cur.data.empty()) throw_error("sampling: no candidate tokens left to sample from");
  float max_logit = -INFINITY;
  for (const auto& c : cur.data) max_logit = std::max(max_logit, c.logit);
  if (max_logit == -INFINITY) {
    throw_error("sampling: every one of the {} candidate tokens has logit -inf (all banned)",
                cur.data.size());
  }
  float sum = 0.0f;
  for (auto& c : cur.data) {
    c.p = std::exp(c.logit - max_logit);
    sum += c.p;
  }
  for (auto& c : cur.data) c.p /= sum;
}

}  // namespace jitllm
