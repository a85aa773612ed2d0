// Sampler chain (see sampler_chain.h).
#include "sample/sampler_chain.h"

#include "core/error.h"
#include "sample/filters.h"

#include <algorithm>
#include <cmath>

namespace jitllm {
namespace {

uint32_t resolve_seed(uint32_t seed) {
  if (seed != SamplingParams::kRandomSeed) return seed;
  std::random_device device;
  return device();
}

}  // namespace

SamplerChain::SamplerChain(SamplingParams params, int32_t n_vocab)
    : params_(std::move(params)),
      n_vocab_(n_vocab),
      seed_(resolve_seed(params_.seed)),
      rng_(seed_),
      penalties_(params_.penalty_last_n) {
  validate_sampling_params(params_, n_vocab_);
}

void SamplerChain::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_) {
    throw_error("sampling: accepted token {} is outside the vocabulary [0, {})", token, n_vocab_);
  }
  penalties_.accept(token);
}

void SamplerChain::reset() {
  penalties_.clear();
  rng_.reseed(seed_);
  probs_.clear();
}

void SamplerChain::apply_logit_bias(Candidates& cur) const {
  // cur is freshly assigned, so candidate i is token i.
  for (const auto& [token, bias] : params_.logit_bias) cur.data[size_t(token)].logit += bias;
}

void SamplerChain::apply_stage(SamplerStage stage, Candidates& cur) {
  const size_t min_keep = size_t(params_.min_keep);
  switch (stage) {
    case SamplerStage::Penalties:
      penalties_.apply(cur, params_.repeat_penalty, params_.frequency_penalty,
                       params_.presence_penalty);
      break;
    case SamplerStage::TopK: apply_top_k(cur, params_.top_k); break;
    case SamplerStage::TypicalP: apply_typical(cur, params_.typical_p, min_keep); break;
    case SamplerStage::TopP: apply_top_p(cur, params_.top_p, min_keep); break;
    case SamplerStage::MinP: apply_min_p(cur, params_.min_p, min_keep); break;
    case SamplerStage::Temperature: apply_temperature(cur, params_.temperature); break;
    case SamplerStage::Dry:  // not implemented yet: no-op, as llama.cpp's default (multiplier 0)
    case SamplerStage::Xtc:  // not implemented yet: no-op, as llama.cpp's default (probability 0)
      break;
  }
}

void SamplerChain::apply_mask(Candidates& cur, std::span<const uint64_t> allowed) const {
  if (allowed.size() * 64 < size_t(n_vocab_))
    throw_error("sampling: the token mask covers {} tokens, the vocabulary has {}",
                allowed.size() * 64, n_vocab_);
  // cur is freshly assigned, so candidate i is token i.
  bool any = false;
  for (size_t i = 0; i < cur.data.size(); ++i) {
    const bool ok = (allowed[i >> 6] >> (i & 63)) & 1;
    if (!ok) cur.data[i].logit = -INFINITY;
    any = any || ok;
  }
  if (!any) throw_error("sampling: the grammar allows no token here");
}

size_t SamplerChain::draw(const Candidates& cur) {
  // As llama.cpp's dist sampler: float probabilities, double running sum against
  // u * total. Strict '>' so that a zero-probability (banned) token can never be chosen.
  double total = 0.0;
  for (const auto& c : cur.data) total += c.p;
  const double target = rng_.uniform() * total;
  double running = 0.0;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < cur.size(); ++i) {
    if (cur.data[i].p <= 0.0f) continue;
    running += cur.data[i].p;
    last_nonzero = i;
    if (running > target) return i;
  }
  return last_nonzero;  // rounding left target at the very top
}

std::optional<int32_t> SamplerChain::greedy_direct(std::span<const float> logits,
                                                   std::span<const uint64_t> allowed) const {
  const bool penalties = params_.penalty_last_n != 0 &&
                         (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                          params_.frequency_penalty != 0.0f);
  if (params_.temperature > 0.0f || penalties) return std::nullopt;
  if (!allowed.empty() && allowed.size() * 64 < size_t(n_vocab_))
    throw_error("sampling: the token mask covers {} tokens, the vocabulary has {}",
                allowed.size() * 64, n_vocab_);
  auto ok = [&](size_t i) { return allowed.empty() || ((allowed[i >> 6] >> (i & 63)) & 1); };
  // The first best wins ties, as logit_before orders them (the lower id first).
  float best = -INFINITY;
  int32_t best_id = -1;
  for (size_t i = 0; i < size_t(n_vocab_); ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == INFINITY)
      throw ModelOutputError(fmt::format("sampling: logits[{}] is {}", i, std::isnan(x) ? "NaN" : "+inf"));
    if (ok(i) && (best_id < 0 || x > best)) {
      best = x;
      best_id = int32_t(i);
    }
  }
  if (best_id < 0) throw_error("sampling: the grammar allows no token here");
  if (!params_.logit_bias.empty()) {
    // The raw best must be unbiased for every other unbiased token to stay below it; the
    // biased ones are weighed on the side.
    if (params_.logit_bias.count(best_id)) return std::nullopt;
    for (const auto& [token, bias] : params_.logit_bias) {
      if (!ok(size_t(token))) continue;
      const float v = logits[size_t(token)] + bias;
      if (v > best || (v == best && token < best_id)) {
        best = v;
        best_id = token;
      }
    }
  }
  if (best == -INFINITY) throw_error("sampling: every token is banned (logit -inf)");
  return best_id;
}

int32_t SamplerChain::sample(std::span<const float> logits, std::span<const uint64_t> allowed) {
  if (logits.size() < size_t(n_vocab_)) {
    throw_error("sampling: got {} logits, expected at least n_vocab = {}", logits.size(), n_vocab_);
  }
  // Greedy without penalties needs no candidate list (n_vocab of them copied per token).
  if (const std::optional<int32_t> best = greedy_direct(logits, allowed)) {
    probs_.clear();
    probs_.push_back({*best, 1.0f});
    return *best;
  }
  cur_.assign(logits.first(size_t(n_vocab_)));
  apply_logit_bias(cur_);
  if (!allowed.empty()) apply_mask(cur_, allowed);
  return run_stages();
}

int32_t SamplerChain::run_stages() {
  probs_.clear();
  if (params_.temperature <= 0.0f) {
    // Greedy: the filters always keep the best token, so only logit-changing stages matter.
    for (SamplerStage stage : params_.order)
      if (stage == SamplerStage::Penalties) apply_stage(stage, cur_);
    const Candidate& best = cur_.data[argmax_candidate(cur_)];
    if (best.logit == -INFINITY) throw_error("sampling: every token is banned (logit -inf)");
    probs_.push_back({best.id, 1.0f});
    return best.id;
  }
  for (SamplerStage stage : params_.order) apply_stage(stage, cur_);
  softmax_candidates(cur_);
  const size_t chosen = draw(cur_);
  probs_.reserve(cur_.size());
  for (const auto& c : cur_.data) probs_.push_back({c.id, c.p});
  return cur_.data[chosen].id;
}

bool SamplerChain::penalties_active() const {
  if (params_.penalty_last_n == 0 || penalties_.size() == 0) return false;
  if (params_.repeat_penalty == 1.0f && params_.frequency_penalty == 0.0f &&
      params_.presence_penalty == 0.0f)
    return false;
  return std::find(params_.order.begin(), params_.order.end(), SamplerStage::Penalties) !=
         params_.order.end();
}

std::optional<SamplerChain::Reduction> SamplerChain::reduction(int32_t max_top) const {
  int32_t k = 1;  // greedy: the best one
  if (params_.temperature > 0.0f) {
    // top_k must be the first stage that looks at more than single logits (penalties move only
    // the touched tokens; dry and xtc are no-ops here).
    bool first = false;
    for (const SamplerStage stage : params_.order) {
      if (stage == SamplerStage::TopK) {
        first = true;
        break;
      }
      if (stage != SamplerStage::Penalties && stage != SamplerStage::Dry &&
          stage != SamplerStage::Xtc)
        break;
    }
    if (!first || params_.top_k <= 0) return std::nullopt;
    k = params_.top_k;
  }
  Reduction r;
  if (penalties_active()) r.touched = penalties_.tokens();
  for (const auto& [token, bias] : params_.logit_bias) r.touched.push_back(token);
  std::sort(r.touched.begin(), r.touched.end());
  r.touched.erase(std::unique(r.touched.begin(), r.touched.end()), r.touched.end());
  const int64_t top = int64_t(k) + int64_t(r.touched.size());
  if (top > max_top || top >= n_vocab_) return std::nullopt;
  r.top = int32_t(top);
  return r;
}

int32_t SamplerChain::sample_reduced(std::span<const Candidate> row,
                                     std::span<const uint64_t> allowed) {
  if (!allowed.empty() && allowed.size() * 64 < size_t(n_vocab_))
    throw_error("sampling: the token mask covers {} tokens, the vocabulary has {}",
                allowed.size() * 64, n_vocab_);
  // As apply_mask: the grammar must allow some token of the vocabulary (not only of this row).
  bool any = allowed.empty();
  for (size_t w = 0; !any && w * 64 < size_t(n_vocab_); ++w) {
    const size_t left = size_t(n_vocab_) - w * 64;
    any = (allowed[w] & (left >= 64 ? ~uint64_t(0) : (uint64_t(1) << left) - 1)) != 0;
  }
  cur_.data.assign(row.begin(), row.end());
  cur_.sorted = false;
  for (Candidate& c : cur_.data) {
    if (c.id < 0 || c.id >= n_vocab_)
      throw_error("sampling: candidate {} is outside the vocabulary [0, {})", c.id, n_vocab_);
    if (std::isnan(c.logit) || c.logit == INFINITY)
      throw ModelOutputError(
          fmt::format("sampling: logits[{}] is {}", c.id, std::isnan(c.logit) ? "NaN" : "+inf"));
    c.p = 0.0f;
    // The bias by id (sample() adds it by index over the whole row): the same float add.
    if (const auto it = params_.logit_bias.find(c.id); it != params_.logit_bias.end())
      c.logit += it->second;
    if (!allowed.empty() && !((allowed[size_t(c.id) >> 6] >> (c.id & 63)) & 1))
      c.logit = -INFINITY;
  }
  if (!any) throw_error("sampling: the grammar allows no token here");
  return run_stages();
}

std::vector<TokenProb> SamplerChain::top_probabilities(size_t n) const {
  std::vector<TokenProb> top(probs_.begin(), probs_.end());
  n = std::min(n, top.size());
  std::partial_sort(top.begin(), top.begin() + std::ptrdiff_t(n), top.end(),
                    [](const TokenProb& a, const TokenProb& b) {
                      return a.p > b.p || (a.p == b.p && a.id < b.id);
                    });
  top.resize(n);
  return top;
}

}  // namespace jitllm
