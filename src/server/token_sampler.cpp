// TokenSampler: forwards to SamplerChain (see the header for why it is wrapped).
#include "server/token_sampler.h"

#include "sample/sampler_chain.h"

namespace jitllm::server {

TokenSampler::TokenSampler(const SamplingParams& params, int32_t n_vocab)
    : chain_(std::make_unique<SamplerChain>(params, n_vocab)) {}
TokenSampler::~TokenSampler() = default;
TokenSampler::TokenSampler(TokenSampler&&) noexcept = default;
TokenSampler& TokenSampler::operator=(TokenSampler&&) noexcept = default;

int32_t TokenSampler::sample(std::span<const float> logits) { return chain_->sample(logits); }
void TokenSampler::accept(int32_t token) { chain_->accept(token); }

}  // namespace jitllm::server
