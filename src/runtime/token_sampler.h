// TokenSampler: the runtime's handle on a sampler chain (src/sample/), behind a small interface
// so front ends can include it next to the tokenizer headers (whose TokenData differs from the
// sampler's candidates' TokenData: they must not meet in one translation unit).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "sample/sampling_params.h"

namespace jitllm {

class SamplerChain;

class TokenSampler {
 public:
  TokenSampler(const SamplingParams& params, int32_t n_vocab);
  ~TokenSampler();
  int32_t sample(std::span<const float> logits);  // logits: [n_vocab]
  void accept(int32_t token);
  void reset();
  uint32_t seed() const;
  const SamplingParams& params() const;

 private:
  std::unique_ptr<SamplerChain> chain_;
};

}  // namespace jitllm
