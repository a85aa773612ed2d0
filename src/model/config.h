// Model hyperparameters read from GGUF-style metadata ("<arch>.block_count", ...). One Config
// serves every architecture of the llama family; later architectures add fields (with defaults
// that keep llama's behaviour) rather than new structs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/reference_kernels.h"  // RopeMode
#include "io/metadata.h"

namespace jitllm {

struct Config {
  std::string arch;         // general.architecture
  std::string name;         // general.name (may be empty)
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;         // n_embd / n_head unless attention.key_length says otherwise
  int64_t n_vocab = 0;      // <arch>.vocab_size, else the tokenizer's token count (0 = unknown yet)
  int64_t n_ctx_train = 0;  // <arch>.context_length
  float rms_eps = 1e-5f;

  // RoPE
  RopeMode rope_mode = RopeMode::Normal;
  int n_rot = 0;                      // rope.dimension_count (default head_dim)
  float rope_freq_base = 10000.0f;
  std::string rope_scaling = "none";  // none | linear | yarn | llama3
  float rope_freq_scale = 1.0f;       // 1 / rope.scaling.factor for linear and yarn
  int64_t rope_ctx_orig = 0;          // rope.scaling.original_context_length
  float yarn_ext_factor = 0.0f, yarn_attn_factor = 1.0f, yarn_beta_fast = 32.0f,
        yarn_beta_slow = 1.0f;
  // llama3: per-frequency divisors, from the rope_freqs.weight tensor when the file has it, else
  // computed here from rope.scaling.{factor,low_freq_factor,high_freq_factor}.
  std::vector<float> rope_freq_factors;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  RopeParams rope_params() const;
};

// Reads and validates the hyperparameters. Missing required keys and inconsistent values throw a
// jitllm::Error naming the key ("metadata key 'llama.block_count' is missing").
Config config_from_metadata(const Metadata& metadata);

// The architectures this engine can run ("llama", "mistral", ...).
bool is_llama_family(const std::string& arch);

}  // namespace jitllm
