// Per-architecture knowledge for converting a Hugging Face folder: config.json -> GGUF metadata
// keys, HF tensor names -> GGUF names, which tensors need their rows permuted, which are expert
// slices to stack, and tensors GGUF has that HF does not (llama3's rope_freqs). One file per
// family (hf_llama.cpp, ...); hf_source.cpp does the generic work.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/metadata.h"

namespace jitllm {

// Where one HF tensor goes.
struct HfTensorMapping {
  std::string gguf_name;  // "blk.3.attn_q.weight"
  // > 0: permute the rows from HF's rotate-half rope layout to GGUF llama's adjacent pairs, with
  // this many heads (llama.cpp's converter does the same, so both sources load alike).
  int64_t permute_heads = 0;
  int32_t expert = -1;    // >= 0: slice `expert` of the stacked GGUF tensor gguf_name
};

// A tensor computed from the config rather than read (F32, 1-D).
struct HfGeneratedTensor {
  std::string gguf_name;
  std::vector<float> values;
};

struct HfArchitecture {
  const char* gguf_arch;  // "llama"
  // Hyperparameters (and rope scaling) as GGUF keys "<arch>.*"; throws naming a missing or
  // malformed config field.
  void (*metadata)(const nlohmann::json& config, Metadata& out);
  // nullopt = not part of the GGUF model (e.g. rotary_emb.inv_freq); throws for a name it does
  // not know, so a checkpoint with unexpected weights is never silently truncated.
  std::optional<HfTensorMapping> (*map_tensor)(const std::string& hf_name,
                                               const nlohmann::json& config);
  std::vector<HfGeneratedTensor> (*generated)(const nlohmann::json& config);
};

// By config.json "architectures"[0] ("LlamaForCausalLM", "Qwen3ForCausalLM", ...) or its
// model_type; nullptr when unsupported (hf_registry.cpp).
const HfArchitecture* find_hf_architecture(const std::string& hf_architecture);
std::vector<std::string> supported_hf_architectures();

// The hyperparameter keys of the llama-shaped families ("<arch>.block_count", head counts,
// key_length when config.json has head_dim, RoPE base and scaling, ...), as llama.cpp's converter
// writes them for llama, qwen3 and their kin (hf_llama.cpp).
void llama_like_metadata(const nlohmann::json& config, Metadata& out, const std::string& arch);

// The tensors every llama-shaped checkpoint names alike: the embeddings, the final norm and
// lm_head (not part of the GGUF when tied). nullopt: the name is not one of them.
std::optional<std::optional<HfTensorMapping>> map_model_wide_tensor(const std::string& hf_name,
                                                                    const nlohmann::json& config);
// "model.layers.<index>.<rest>" -> index and rest; false for any other name.
bool split_layer_tensor(const std::string& hf_name, std::string& index, std::string& rest);

// Typed config.json access with errors naming the field ("config.json: hidden_size: ...").
int64_t config_int(const nlohmann::json& config, const char* key);
std::optional<int64_t> config_int_opt(const nlohmann::json& config, const char* key);
// An integer that must lie in [lo, hi]: anything outside is an error naming the key and value,
// never a value narrowed to fit (2^32 + 300 must not become 300).
int64_t config_int_in(const nlohmann::json& config, const char* key, int64_t lo, int64_t hi);
std::optional<int64_t> config_int_in_opt(const nlohmann::json& config, const char* key,
                                         int64_t lo, int64_t hi);
// The largest count or size a hyperparameter may have: what the engine's Config accepts
// (model/config.cpp), so a converted model always loads.
inline constexpr int64_t kMaxHparam = int64_t(1) << 30;
std::optional<double> config_number_opt(const nlohmann::json& config, const char* key);
bool config_bool_or(const nlohmann::json& config, const char* key, bool fallback);

// The llama.cpp permutation of q/k rows: within each of `n_head` heads the rows [2, hd/2] become
// [hd/2, 2] (HF rotate-half pairs (i, i + hd/2) become adjacent rows (2i, 2i + 1)).
// `rows` rows of `row_bytes` bytes each, `src` -> `dst` (distinct buffers).
void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t row_bytes,
                       int64_t n_head);

}  // namespace jitllm
