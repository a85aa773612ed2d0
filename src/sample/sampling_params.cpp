// Stage-name parsing and validation of SamplingParams (see sampling_params.h).
#include "sample/sampling_params.h"

#include "core/error.h"

#include <cmath>
#include <utility>

namespace jitllm {
namespace {

struct StageName {
  std::string_view name;
  SamplerStage stage;
};

// First entry per stage is its canonical name (llama.cpp's --samplers spelling).
constexpr StageName kStageNames[] = {
    {"penalties", SamplerStage::Penalties},   {"dry", SamplerStage::Dry},
    {"top_k", SamplerStage::TopK},             {"typ_p", SamplerStage::TypicalP},
    {"typical_p", SamplerStage::TypicalP},     {"typical", SamplerStage::TypicalP},
    {"top_p", SamplerStage::TopP},             {"nucleus", SamplerStage::TopP},
    {"min_p", SamplerStage::MinP},             {"xtc", SamplerStage::Xtc},
    {"temperature", SamplerStage::Temperature}, {"temp", SamplerStage::Temperature},
};

}  // namespace

std::vector<SamplerStage> default_sampler_order() {
  return {SamplerStage::Penalties, SamplerStage::Dry,  SamplerStage::TopK,
          SamplerStage::TypicalP,  SamplerStage::TopP, SamplerStage::MinP,
          SamplerStage::Xtc,       SamplerStage::Temperature};
}

SamplerStage parse_sampler_stage(std::string_view name) {
  for (const auto& entry : kStageNames) {
    if (entry.name == name) return entry.stage;
  }
  std::string known;
  for (const auto& entry : kStageNames) {
    if (!known.empty()) known += ", ";
    known += entry.name;
  }
  throw_error("sampler stage '{}': unknown (known: {})", name, known);
}

std::string_view sampler_stage_name(SamplerStage stage) {
  for (const auto& entry : kStageNames) {
    if (entry.stage == stage) return entry.name;
  }
  return "?";
}

std::vector<SamplerStage> parse_sampler_order(std::string_view names) {
  std::vector<SamplerStage> order;
  size_t start = 0;
  while (start <= names.size()) {
    size_t end = names.find_first_of(",;", start);
    if (end == std::string_view::npos) end = names.size();
    std::string_view item = names.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) order.push_back(parse_sampler_stage(item));
    start = end + 1;
  }
  return order;
}

void validate_sampling_params(const SamplingParams& params, int32_t n_vocab) {
  if (n_vocab <= 0) throw_error("sampling: n_vocab must be positive, got {}", n_vocab);
  const std::pair<const char*, float> floats[] = {
      {"temperature", params.temperature},       {"top_p", params.top_p},
      {"min_p", params.min_p},                   {"typical_p", params.typical_p},
      {"repeat_penalty", params.repeat_penalty}, {"presence_penalty", params.presence_penalty},
      {"frequency_penalty", params.frequency_penalty}};
  for (const auto& [name, value] : floats) {
    if (!std::isfinite(value)) throw_error("sampling: {} must be a finite number, got {}", name, value);
  }
  // The repeat penalty divides positive logits, so zero or a negative value has no meaning.
  if (params.repeat_penalty <= 0.0f) {
    throw_error("sampling: repeat_penalty must be > 0 (1 disables), got {}", params.repeat_penalty);
  }
  if (params.penalty_last_n < -1) {
    throw_error("sampling: penalty_last_n must be >= -1 (-1 = all, 0 = off), got {}",
                params.penalty_last_n);
  }
  if (params.min_keep < 0) throw_error("sampling: min_keep must be >= 0, got {}", params.min_keep);
  for (const auto& [token, bias] : params.logit_bias) {
    if (token < 0 || token >= n_vocab) {
      throw_error("sampling: logit_bias token {} is outside the vocabulary [0, {})", token, n_vocab);
    }
    if (std::isnan(bias) || bias == INFINITY) {
      throw_error("sampling: logit_bias for token {} must be finite or -inf, got {}", token, bias);
    }
  }
}

}  // namespace jitllm
