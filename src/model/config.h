// Model hyperparameters read from GGUF-style metadata ("<arch>.block_count", ...): the keys every
// family shares, read here once, with per-layer arrays where a family varies them by layer
// (head counts, FFN width), and the family's own keys read by its hook (model/family.h). Fields a
// family does not set keep the llama meaning, so a family adds fields rather than structs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/moe.h"
#include "graph/rope.h"
#include "io/metadata.h"

namespace jitllm {

struct Family;

// How a model turns a sequence's hidden states into one embedding: llama.cpp's
// <arch>.pooling_type values (0 none, 1 mean, 2 cls, 3 last, 4 rank; absent: unspecified).
enum class Pooling { Unspecified = -1, None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };
// "mean", "cls", ... and back; parse_pooling throws naming the value and the accepted ones.
const char* pooling_name(Pooling p);
Pooling parse_pooling(const std::string& name);

struct Config {
  std::string arch;         // general.architecture
  std::string name;         // general.name (may be empty)
  const Family* family = nullptr;  // the family that serves `arch` (model/registry.cpp)
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;             // the widest layer's FFN (every layer's unless n_ff_per_layer is set)
  int n_head = 0;           // the most query heads of any layer (likewise)
  int n_head_kv = 0;        // the most KV heads of any layer (likewise)
  int head_dim = 0;         // n_embd / n_head unless attention.key_length says otherwise
  int head_dim_v = 0;       // attention.value_length (default head_dim)
  int64_t n_vocab = 0;      // <arch>.vocab_size, else the tokenizer's token count (0 = unknown yet)
  int64_t n_ctx_train = 0;  // <arch>.context_length
  float rms_eps = 1e-5f;
  // Encoders (BERT): LayerNorm's epsilon (<arch>.attention.layer_norm_epsilon), whether attention
  // is causal (<arch>.attention.causal, default true), and the pooling the file names.
  float norm_eps = 1e-12f;
  bool causal = true;
  Pooling pooling = Pooling::Unspecified;
  // LFM2's short convolution: taps per channel (<arch>.shortconv.l_cache) of the layers whose
  // n_head_kv_of is 0.
  int shortconv_l_cache = 0;
  bool is_recurrent(int il) const { return n_head_kv_of(il) == 0; }
  // Per-layer values from metadata arrays ([n_layer]); empty when the key was a single number.
  std::vector<int> n_head_per_layer, n_head_kv_per_layer, n_ff_per_layer;

  // RoPE
  RopeMode rope_mode = RopeMode::Normal;
  int n_rot = 0;                      // rope.dimension_count (default head_dim); 0: no RoPE (BERT)
  float rope_freq_base = 10000.0f;
  std::string rope_scaling = "none";  // none | linear | yarn | llama3
  float rope_freq_scale = 1.0f;       // 1 / rope.scaling.factor for linear and yarn
  int64_t rope_ctx_orig = 0;          // rope.scaling.original_context_length
  float yarn_ext_factor = 0.0f, yarn_attn_factor = 1.0f, yarn_beta_fast = 32.0f,
        yarn_beta_slow = 1.0f;
  // <arch>.rope.scaling.yarn_truncate (our converter's, from config.json's `truncate`; llama.cpp
  // has no such key and always rounds): see RopeParams::yarn_truncate.
  bool yarn_truncate = true;
  // llama3: per-frequency divisors, from the rope_freqs.weight tensor when the file has it, else
  // computed here from rope.scaling.{factor,low_freq_factor,high_freq_factor}.
  std::vector<float> rope_freq_factors;

  // Attention and output variants (Gemma 2/3, Mistral); zeros are the llama meaning.
  int n_swa = 0;                 // <arch>.attention.sliding_window: positions a sliding layer sees
  std::vector<bool> swa_layers;  // [n_layer] layers whose attention slides (empty: none)
  float attn_scale = 0.0f;       // scores = q.k * this; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;     // <arch>.attn_logit_softcapping (Gemma 2); 0: none
  float final_softcap = 0.0f;    // <arch>.final_logit_softcapping (Gemma 2/3); 0: none
  float embd_scale = 0.0f;       // token embeddings times this (Gemma: sqrt(n_embd)); 0: none
  bool ffn_gelu = false;         // the gated FFN's activation is GELU-tanh (Gemma), not SiLU
  // RoPE of the sliding layers where it differs (Gemma 3's local base); 0: the global value.
  float rope_freq_base_swa = 0.0f, rope_freq_scale_swa = 0.0f;
  // Phi-3 LongRoPE: the factors for contexts past rope_ctx_orig (rope_factors_long.weight); the
  // short ones are rope_freq_factors.
  std::vector<float> rope_freq_factors_long;

  // Mixture of experts (n_expert 0: a dense model). llama.cpp's keys: <arch>.expert_count,
  // expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length,
  // expert_weights_norm, expert_weights_scale.
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;                   // each expert's FFN width (a family's default when unset)
  int n_ff_shexp = 0;                 // the shared expert's FFN width (0: no shared expert)
  bool expert_weights_norm = false;   // the chosen experts' weights renormalised to sum 1
  float expert_weights_scale = 0.0f;  // the chosen weights times this; 0: none
  MoeGating expert_gating = MoeGating::Softmax;
  // > 0: the experts' activation is gpt-oss's clamped SwiGLU with this limit (llama.cpp's
  // LLM_FFN_SWIGLU_OAI_MOE; 7 in every gpt-oss).
  float expert_swiglu_limit = 0.0f;
  // Group-limited choice (<arch>.expert_group_count, expert_group_used_count; 0: none) and how
  // groups are scored (llama.cpp's top-2 sum; jitllm's converter writes "max" for DeepSeek-V2's
  // group_limited_greedy as <arch>.expert_group_score).
  int n_expert_groups = 0, n_group_used = 0;
  MoeGroupScore expert_group_score = MoeGroupScore::Top2Sum;
  // The layer's selection bias (exp_probs_b) is the layer's, set by the builder.
  MoeRouting moe_routing() const {
    MoeRouting r{n_expert, n_expert_used, expert_gating, expert_weights_norm, expert_weights_scale};
    r.n_group = n_expert_groups;
    r.n_group_used = n_group_used;
    r.group_score = expert_group_score;
    return r;
  }

  // Multi-head latent attention (deepseek2: DeepSeek-V2/V3, Kimi-K2, Moonlight), in llama.cpp's
  // absorbed form: the cache keeps per position the normalised latent (n_lora_kv) and the shared
  // rotated key part (n_rot); head_dim / head_dim_v / n_head_kv are then the absorbed MQA's
  // (n_lora_kv + n_rot, n_lora_kv, 1) and these the decompressed heads'. 0: not MLA.
  int n_lora_q = 0;            // attention.q_lora_rank (0: q projected directly)
  int n_lora_kv = 0;           // attention.kv_lora_rank
  int head_dim_k_mla = 0;      // attention.key_length_mla: q/k head, nope + rope part
  int head_dim_v_mla = 0;      // attention.value_length_mla: v head
  int n_layer_dense_lead = 0;  // leading_dense_block_count: the first layers' FFN is dense
  bool is_mla() const { return n_lora_kv > 0; }
  int qk_nope_dim() const { return head_dim_k_mla - n_rot; }

  bool is_swa(int il) const { return n_swa > 0 && !swa_layers.empty() && swa_layers[size_t(il)]; }
  int window_of(int il) const { return is_swa(il) ? n_swa : 0; }

  int n_head_of(int il) const { return n_head_per_layer.empty() ? n_head : n_head_per_layer[size_t(il)]; }
  int n_head_kv_of(int il) const {
    return n_head_kv_per_layer.empty() ? n_head_kv : n_head_kv_per_layer[size_t(il)];
  }
  int n_ff_of(int il) const { return n_ff_per_layer.empty() ? n_ff : n_ff_per_layer[size_t(il)]; }
  int q_dim() const { return n_head * head_dim; }        // the widest layer's
  int kv_dim() const { return n_head_kv * head_dim; }    // the widest layer's K (and V) rows
  int q_dim_of(int il) const { return n_head_of(il) * head_dim; }
  int k_dim_of(int il) const { return n_head_kv_of(il) * head_dim; }
  int v_dim_of(int il) const { return n_head_kv_of(il) * head_dim_v; }
  RopeParams rope_params() const;
  // Layer il's: a sliding layer's own base and scale where the family has them.
  RopeParams rope_params_of(int il) const;
};

// The sliding-window keys llama.cpp reads for its SWA families: <arch>.attention.sliding_window
// (default `window`) and <arch>.attention.sliding_window_pattern, a period (layer il slides
// unless il % period == period - 1; 0: every layer) or an array of one bool per layer (default
// `period`). A window of 0 leaves every layer global.
void read_sliding_window(const Metadata& md, Config& c, int64_t window, int64_t period);
// Sets c.swa_layers from a period (above).
void set_swa_period(Config& c, int64_t period);

// The MoE keys of a family with experts (config_from_metadata has read expert_count and
// expert_used_count): the expert FFN width (default `ff_exp_default`, llama.cpp's rule of the
// family), the shared expert's, and whether the chosen weights are renormalised (the key where
// the file has it, else `norm_default`, the family's fixed choice in llama.cpp). Throws when the
// model has no experts.
void read_moe_hparams(const Metadata& md, Config& c, int ff_exp_default, bool norm_default);

// Reads and validates the hyperparameters: the generic keys here, the family's own through its
// hook. Missing required keys and inconsistent values throw a jitllm::Error naming the key
// ("metadata key 'llama.block_count' is missing"); an architecture no family serves is named too.
Config config_from_metadata(const Metadata& metadata);

// True when some family serves `arch` (model/registry.cpp).
bool is_supported_architecture(const std::string& arch);

}  // namespace jitllm
