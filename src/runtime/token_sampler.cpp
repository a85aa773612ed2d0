// TokenSampler: forwards to SamplerChain.
#include "runtime/token_sampler.h"

#include "sample/sampler_chain.h"

namespace jitllm {

TokenSampler::TokenSampler(const SamplingParams& params, int32_t n_vocab)
    : chain_(std::make_unique<SamplerChain>(params, n_vocab)) {}
TokenSampler::~TokenSampler() = default;
int32_t TokenSampler::sample(std::span<const float> logits) { return chain_->sample(logits); }
void TokenSampler::accept(int32_t token) { chain_->accept(token); }
void TokenSampler::reset() { chain_->reset(); }
uint32_t TokenSampler::seed() const { return chain_->seed(); }
const SamplingParams& TokenSampler::params() const { return chain_->params(); }

}  // namespace jitllm
