// Sampling settings and the stage names of a sampler chain. Owns: the parameter struct with
// llama.cpp's defaults, parsing of stage names, validation. Must not know about models or devices.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm {

// One stage of the chain, in the order the user lists them. `Dry` and `Xtc` are accepted so that
// llama.cpp's default order parses unchanged, but they are not implemented yet and act as no-ops.
enum class SamplerStage { Penalties, Dry, TopK, TypicalP, TopP, MinP, Xtc, Temperature };

// llama.cpp's default chain order (common/common.h), minus top_n_sigma which is not implemented.
// Logit bias is not a stage: like llama.cpp it always runs first, before the chain.
std::vector<SamplerStage> default_sampler_order();

// "top_k", "top_p" / "nucleus", "min_p", "typ_p" / "typical_p" / "typical", "temperature" / "temp",
// "penalties", "dry", "xtc". Throws jitllm::Error naming the bad name and the accepted ones.
SamplerStage parse_sampler_stage(std::string_view name);
std::string_view sampler_stage_name(SamplerStage stage);
// Comma- or semicolon-separated list of stage names, e.g. "penalties,top_k,temperature".
std::vector<SamplerStage> parse_sampler_order(std::string_view names);

struct SamplingParams {
  // <= 0 means greedy: the argmax after logit bias and penalties, ties to the lowest id.
  float temperature = 0.8f;
  int32_t top_k = 40;         // <= 0 disables
  float top_p = 0.95f;        // >= 1 disables
  float min_p = 0.05f;        // <= 0 disables; relative to the most likely token's probability
  float typical_p = 1.0f;     // >= 1 disables
  float repeat_penalty = 1.0f;     // 1 disables; must be > 0
  float presence_penalty = 0.0f;   // subtracted once from every token seen in the window
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the window
  int32_t penalty_last_n = 64;     // window of accepted tokens; 0 disables, -1 = every accepted token
  int32_t min_keep = 0;            // top_p, min_p and typical_p keep at least this many tokens
  std::map<int32_t, float> logit_bias;  // token id -> added to its logit; -inf bans the token
  // kRandomSeed draws a seed from std::random_device (as llama.cpp's LLAMA_DEFAULT_SEED does);
  // SamplerChain::seed() reports the one actually used so a run can be repeated.
  static constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;
  uint32_t seed = kRandomSeed;
  std::vector<SamplerStage> order = default_sampler_order();
};

// Throws jitllm::Error for settings that cannot be applied to a vocabulary of `n_vocab` tokens
// (NaN values, repeat_penalty <= 0, logit_bias ids out of range, penalty_last_n < -1).
void validate_sampling_params(const SamplingParams& params, int32_t n_vocab);

}  // namespace jitllm
