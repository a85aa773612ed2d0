// Log-softmax of raw logits (see logprobs.h).
#include "sample/logprobs.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace jitllm {
namespace {

// max and log(sum exp(x - max)) of the logits; one pass for each.
struct LogNormalizer {
  float max;
  double log_sum;
};

LogNormalizer log_normalizer(std::span<const float> logits) {
  if (logits.empty()) throw_error("logprobs: empty logits");
  float max_logit = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY)
      throw ModelOutputError(
          fmt::format("logprobs: logits[{}] is {}", i, std::isnan(logits[i]) ? "NaN" : "+inf"));
    max_logit = std::max(max_logit, logits[i]);
  }
  if (max_logit == -INFINITY) throw ModelOutputError("logprobs: every logit is -inf");
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double(x) - double(max_logit));
  return {max_logit, std::log(sum)};
}

}  // namespace

std::vector<float> log_softmax(std::span<const float> logits) {
  const LogNormalizer norm = log_normalizer(logits);
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = float(double(logits[i]) - double(norm.max) - norm.log_sum);
  }
  return out;
}

float logprobs(std::span<const float> logits, int32_t token) {
  if (token < 0 || size_t(token) >= logits.size()) {
    throw_error("logprobs: token {} is outside the vocabulary [0, {})", token, logits.size());
  }
  const LogNormalizer norm = log_normalizer(logits);
  return float(double(logits[size_t(token)]) - double(norm.max) - norm.log_sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, size_t n) {
  const LogNormalizer norm = log_normalizer(logits);
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  n = std::min(n, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[size_t(a)] > logits[size_t(b)] ||
                             (logits[size_t(a)] == logits[size_t(b)] && a < b);
                    });
  std::vector<TokenLogprob> out(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = logits[size_t(ids[i])];
    out[i] = {ids[i], float(double(x) - double(norm.max) - norm.log_sum)};
  }
  return out;
}

}  // namespace jitllm
