// Per-architecture knowledge for converting a Hugging Face folder: config.json -> GGUF metadata
// keys, HF tensor names -> GGUF names, which tensors need their rows permuted or their values
// shifted, which are expert slices to stack, and tensors GGUF has that HF does not (llama3's
// rope_freqs, phi3's LongRoPE factors). One file per family (hf_llama.cpp, hf_gemma.cpp, ...);
// hf_shared.cpp holds what the llama-shaped families share, hf_config.cpp the config.json access,
// hf_source.cpp the generic work. Names and keys are llama.cpp's (convert_hf_to_gguf.py), which
// the model layer reads; nothing here asks the model layer whether it runs them.
#pragma once

#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
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
  // Gemma's RMSNorm multiplies by (1 + w): the GGUF stores 1 + w, computed in float32 from the
  // stored value and written as F32 (so an f16 / bf16 source loses nothing), as llama.cpp does.
  bool plus_one = false;
  // Stored as F32 whatever the source's type: routers (ffn_gate_inp, ffn_gate_inp_shexp), which
  // llama.cpp's converter and quantizer keep in float32 (a top-k pick is sensitive to rounding).
  bool f32 = false;
  // A stacked tensor read as [outer][rows][cols] (cols = ne[0], rows = ne[1], outer the rest):
  // `columns` keeps every column or only the even / odd ones (gpt-oss interleaves gate and up
  // in one tensor), then `transpose` swaps rows and columns within each outer slice (gpt-oss's
  // experts are stored [n_expert, in, out], GGUF's are [n_expert][out][in]).
  enum class Columns { All, Even, Odd };
  Columns columns = Columns::All;
  bool transpose = false;
  // > 0: a 2-D [heads * per, cols] matrix read as `heads` slices of `per` rows, keeping rows
  // [head_first, head_first + head_rows) of each: a stacked [heads][head_rows][cols] tensor
  // (then `transpose` applies within each). MLA's kv_b_proj holds per head the qk_nope rows of
  // k_b then the v_head_dim rows of v_b; llama.cpp's attn_k_b is the first part transposed.
  int64_t heads = 0, head_first = 0, head_rows = 0;
  // gpt-oss's MXFP4 experts (OpenAI's checkpoints): this tensor is the blocks ([n_expert, rows,
  // in / 32, 16] bytes, two 4-bit codes a byte, low nibble first) or the scales ([n_expert, rows,
  // in / 32] E8M0 bytes) of the MXFP4 tensor gguf_name, which keeps all `rows` or the even / odd
  // ones (gate and up interleaved by row); blocks and scales are joined into ggml's MXFP4 blocks.
  enum class Mxfp4 { None, Blocks, Scales };
  Mxfp4 mxfp4 = Mxfp4::None;
  Columns rows = Columns::All;
  // More GGUF tensors made from the same HF tensor (gpt-oss's gate_up -> gate and up).
  std::vector<HfTensorMapping> also;
  // Dimensions of 1 dropped (LFM2's conv kernel: HF [n_embd, 1, L], GGUF [L, n_embd]); the
  // bytes are the same.
  bool squeeze = false;
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
  // May be null (none).
  std::vector<HfGeneratedTensor> (*generated)(const nlohmann::json& config);
  // May be null. Keys the family sets over the imported tokenizer's (gemma's SentencePiece vocab
  // has no space prefix); called only when the tokenizer was imported.
  void (*tokenizer)(const nlohmann::json& config, Metadata& out) = nullptr;
};

// By config.json "architectures"[0] ("LlamaForCausalLM", "Qwen3ForCausalLM", ...) or its
// model_type; nullptr when unsupported (hf_registry.cpp).
const HfArchitecture* find_hf_architecture(const std::string& hf_architecture);
std::vector<std::string> supported_hf_architectures();

// ---- hf_shared.cpp: what the llama-shaped families share --------------------------------------

// The hyperparameter keys of the llama-shaped families ("<arch>.block_count", head counts,
// key_length when config.json has head_dim, RoPE base and scaling, ...), as llama.cpp's converter
// writes them for llama, qwen2, qwen3 and their kin, with the expert keys where config.json has
// experts. RoPE types other than default, linear, yarn and llama3 are refused.
void llama_like_metadata(const nlohmann::json& config, Metadata& out, const std::string& arch);

// The tensors every llama-shaped checkpoint names alike: the embeddings, the final norm and
// lm_head (not part of the GGUF when tied). nullopt: the name is not one of them.
std::optional<std::optional<HfTensorMapping>> map_model_wide_tensor(const std::string& hf_name,
                                                                    const nlohmann::json& config);
// "model.layers.<index>.<rest>" (or an encoder's "[bert.]encoder.layer.<index>.<rest>") ->
// index and rest; false for any other name.
bool split_layer_tensor(const std::string& hf_name, std::string& index, std::string& rest);

// One per-layer tensor of a family's table: "model.layers.N.<hf>" -> "blk.N.<gguf>".
struct HfLayerTensor {
  const char* hf;    // "self_attn.q_proj.weight"
  const char* gguf;  // "attn_q.weight"
};
// The projections every llama-shaped layer has, named alike: self_attn.{q,k,v,o}_proj and the
// gated MLP's mlp.{gate,up,down}_proj weights. The families add their norms and extras.
extern const std::span<const HfLayerTensor> kLlamaProjections;
// The mapping of a family without row permutation or experts: the model-wide tensors, then the
// per-layer ones by `tables`; rotary_emb.inv_freq is dropped (recomputed from theta); any other
// name throws naming it and `arch`.
std::optional<HfTensorMapping> map_tensor_by_table(
    const std::string& hf_name, const nlohmann::json& config,
    std::initializer_list<std::span<const HfLayerTensor>> tables, const char* arch);

// map_tensor_by_table for a family with experts (Qwen2/3-MoE, OLMoE): also the router
// (mlp.gate -> ffn_gate_inp), each expert's mlp.experts.E.{gate,up,down}_proj as slice E of the
// stacked ffn_{gate,up,down}_exps, and Qwen2-MoE's shared expert (mlp.shared_expert.* ->
// ffn_*_shexp, mlp.shared_expert_gate -> ffn_gate_inp_shexp).
std::optional<HfTensorMapping> map_tensor_with_experts(
    const std::string& hf_name, const nlohmann::json& config,
    std::initializer_list<std::span<const HfLayerTensor>> tables, const char* arch);

// Which layers attend through the sliding window: config.json's layer_types when it has them
// ("sliding_attention" / "full_attention", one per layer), else HF's default rule for the family;
// and the GGUF key that lists them (<arch>.attention.sliding_window_pattern, one bool per layer).
std::vector<bool> sliding_layers(const nlohmann::json& config,
                                 const std::function<bool(int64_t)>& default_rule);
void set_sliding_pattern(Metadata& m, const std::string& arch, const std::vector<bool>& sliding);

// ---- hf_config.cpp: config.json access ---------------------------------------------------------

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
// A count or size of the model: in [1, kMaxHparam].
int64_t config_hparam(const nlohmann::json& config, const char* key);
std::optional<int64_t> config_hparam_opt(const nlohmann::json& config, const char* key);
std::optional<double> config_number_opt(const nlohmann::json& config, const char* key);
double config_number(const nlohmann::json& config, const char* key);  // missing or null: error
bool config_bool_or(const nlohmann::json& config, const char* key, bool fallback);
std::optional<std::string> config_string_opt(const nlohmann::json& config, const char* key);
// head_dim, or hidden_size / num_attention_heads when config.json has none.
int64_t config_head_dim(const nlohmann::json& config);

// RoPE settings in transformers 4's spelling (top-level rope_theta, rope_scaling) or 5's
// (rope_parameters, which may hold one entry per layer type: {"full_attention": {...},
// "sliding_attention": {...}}). rope_parameters(): the full-attention layers' object (or the only
// one), nullptr when there is none; sliding_rope_parameters(): the sliding layers' own entry.
const nlohmann::json* rope_parameters(const nlohmann::json& config);
const nlohmann::json* sliding_rope_parameters(const nlohmann::json& config);
double rope_theta(const nlohmann::json& config);         // full-attention layers; 10000 when unset
std::string rope_type(const nlohmann::json& config);     // "default" when unset
std::string sliding_rope_type(const nlohmann::json& config);
// A RoPE setting that either spelling may hold (partial_rotary_factor, ...): rope_parameters' value
// first, as llama.cpp reads it, else the top-level one.
std::optional<double> rope_number_opt(const nlohmann::json& config, const char* key);

// The llama.cpp permutation of q/k rows: within each of `n_head` heads the rows [2, hd/2] become
// [hd/2, 2] (HF rotate-half pairs (i, i + hd/2) become adjacent rows (2i, 2i + 1)).
// `rows` rows of `row_bytes` bytes each, `src` -> `dst` (distinct buffers).
void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t row_bytes,
                       int64_t n_head);

}  // namespace jitllm
