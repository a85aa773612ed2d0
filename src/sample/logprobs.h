// Log-probabilities of the raw model output, for the server's logprobs / top_logprobs: the
// log-softmax of the logits as the model produced them, before any sampler stage. Must not know
// about models or devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace jitllm {

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// [n_vocab] log p_i = logit_i - max - log(sum_j exp(logit_j - max)), accumulated in double.
// Throws jitllm::Error on an empty span, ModelOutputError on a NaN or +inf logit.
std::vector<float> log_softmax(std::span<const float> logits);

// log p of one token under the softmax of the raw logits. Throws jitllm::Error when the token is
// outside [0, logits.size()).
float logprobs(std::span<const float> logits, int32_t token);

// The n tokens with the highest log-probability, highest first (ties: lower id first).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, size_t n);

}  // namespace jitllm
