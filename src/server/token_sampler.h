// TokenSampler: the sampler chain of one generated sequence behind a small interface. It exists
// so server files can use samplers and the tokenizer in one translation unit: sample/candidates.h
// and tokenizer/vocab.h both declare a jitllm::TokenData, so no file may include both headers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "sample/sampling_params.h"

namespace jitllm {
class SamplerChain;
}

namespace jitllm::server {

class TokenSampler {
 public:
  // Throws jitllm::Error for parameters the chain refuses (see validate_sampling_params).
  TokenSampler(const SamplingParams& params, int32_t n_vocab);
  ~TokenSampler();
  TokenSampler(TokenSampler&&) noexcept;
  TokenSampler& operator=(TokenSampler&&) noexcept;

  int32_t sample(std::span<const float> logits);  // logits: [n_vocab]
  void accept(int32_t token);

 private:
  std::unique_ptr<SamplerChain> chain_;
};

}  // namespace jitllm::server
