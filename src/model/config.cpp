// Config from GGUF-style metadata: key names and defaults as llama.cpp reads them.
#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

int positive_int(const Metadata& md, const std::string& key) {
  const int64_t v = md.get_i64(key);
  if (v <= 0 || v > (int64_t(1) << 30)) throw_error("metadata key '{}': value {} is out of range", key, v);
  return int(v);
}

// Meta's llama3 frequency-dependent scaling: high frequencies keep their wavelength, low ones
// are divided by `factor`, with a smooth ramp in between.
std::vector<float> llama3_factors(int n_rot, float base, float factor, float low, float high,
                                  double old_ctx) {
  std::vector<float> out;
  const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  for (int i = 0; i < n_rot; i += 2) {
    const double freq = 1.0 / std::pow(double(base), double(i) / n_rot);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(float(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// A count that is one number for every layer or an array of n_layer numbers (llama.cpp reads
// head counts and FFN widths either way). Returns the largest; fills per_layer for an array.
// allow_zero: an array may hold 0 for some layers (LFM2's KV heads: 0 on its convolution layers).
int per_layer_int(const Metadata& md, const std::string& key, int n_layer, std::vector<int>& per_layer,
                  bool allow_zero = false) {
  const Value* v = md.find(key);
  if (!v) throw_error("metadata key '{}' is missing", key);
  if (v->type() != ValueType::Array) return positive_int(md, key);
  const std::vector<int64_t> items = v->as_i64_vector();
  if (int64_t(items.size()) != n_layer)
    throw_error("metadata key '{}': {} values for {} layers", key, items.size(), n_layer);
  int largest = 0;
  for (const int64_t x : items) {
    if (x < (allow_zero ? 0 : 1) || x > (int64_t(1) << 30))
      throw_error("metadata key '{}': value {} is out of range", key, x);
    per_layer.push_back(int(x));
    largest = std::max(largest, int(x));
  }
  // One value repeated is the scalar case: keep the per-layer form only where layers differ.
  if (std::all_of(per_layer.begin(), per_layer.end(), [&](int x) { return x == largest; })) per_layer.clear();
  return largest;
}

}  // namespace

bool is_supported_architecture(const std::string& arch) { return find_family(arch) != nullptr; }

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Unspecified: return "unspecified";
    case Pooling::None: return "none";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::Rank: return "rank";
  }
  return "?";
}

Pooling parse_pooling(const std::string& name) {
  for (const Pooling p : {Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last, Pooling::Rank})
    if (name == pooling_name(p)) return p;
  throw_error("pooling '{}' is not one of none, mean, cls, last, rank", name);
}

RopeParams Config::rope_params() const {
  RopeParams p;
  p.n_rot = n_rot;
  p.mode = rope_mode;
  p.freq_base = rope_freq_base;
  p.freq_scale = rope_freq_scale;
  p.freq_factors = rope_freq_factors.empty() ? nullptr : rope_freq_factors.data();
  p.ext_factor = yarn_ext_factor;
  p.attn_factor = yarn_attn_factor;
  p.beta_fast = yarn_beta_fast;
  p.beta_slow = yarn_beta_slow;
  p.n_ctx_orig = int(rope_ctx_orig);
  p.yarn_truncate = yarn_truncate;
  return p;
}

RopeParams Config::rope_params_of(int il) const {
  RopeParams p = rope_params();
  if (is_swa(il)) {
    if (rope_freq_base_swa > 0.0f) p.freq_base = rope_freq_base_swa;
    if (rope_freq_scale_swa > 0.0f) p.freq_scale = rope_freq_scale_swa;
  }
  return p;
}

void set_swa_period(Config& c, int64_t period) {
  c.swa_layers.assign(size_t(c.n_layer), false);
  for (int il = 0; il < c.n_layer; ++il) c.swa_layers[size_t(il)] = period == 0 || il % period < period - 1;
}

void read_sliding_window(const Metadata& md, Config& c, int64_t window, int64_t period) {
  const std::string key = c.arch + ".attention.sliding_window";
  if (md.has(key)) window = md.get_i64(key);
  if (window < 0 || window > (int64_t(1) << 30))
    throw_error("metadata key '{}': value {} is out of range", key, window);
  c.n_swa = int(window);
  c.swa_layers.clear();
  if (c.n_swa == 0) return;
  const std::string pkey = c.arch + ".attention.sliding_window_pattern";
  const Value* v = md.find(pkey);
  if (v && v->type() == ValueType::Array) {
    const std::vector<Value>& items = v->as_array().items;
    if (int64_t(items.size()) != c.n_layer)
      throw_error("metadata key '{}': {} values for {} layers", pkey, items.size(), c.n_layer);
    for (const Value& x : items) c.swa_layers.push_back(x.type() == ValueType::Bool ? x.as_bool() : x.as_i64() != 0);
    return;
  }
  if (v) period = md.get_i64(pkey);
  if (period < 0 || period > c.n_layer + 1)
    throw_error("metadata key '{}': period {} for {} layers", pkey, period, c.n_layer);
  set_swa_period(c, period);
}

void read_moe_hparams(const Metadata& md, Config& c, int ff_exp_default, bool norm_default) {
  const std::string a = c.arch + ".";
  if (c.n_expert == 0) throw_error("metadata key '{}expert_count' is missing (a {} model has experts)", a, c.arch);
  c.n_ff_exp = md.has(a + "expert_feed_forward_length") ? positive_int(md, a + "expert_feed_forward_length")
                                                        : ff_exp_default;
  if (c.n_ff_exp <= 0) throw_error("metadata key '{}expert_feed_forward_length' is missing", a);
  c.n_ff_shexp = md.has(a + "expert_shared_feed_forward_length")
                     ? positive_int(md, a + "expert_shared_feed_forward_length")
                     : 0;
  c.expert_weights_norm = md.has(a + "expert_weights_norm") ? md.get_bool(a + "expert_weights_norm") : norm_default;
}

Config config_from_metadata(const Metadata& md) {
  Config c;
  c.arch = md.architecture();
  c.family = find_family(c.arch);
  if (!c.family)
    throw_error("architecture '{}' is not supported (supported: {})", c.arch, supported_architectures());
  c.name = md.get_string_or("general.name", "");
  const std::string a = c.arch + ".";
  c.n_layer = positive_int(md, a + "block_count");
  c.n_embd = positive_int(md, a + "embedding_length");
  c.n_ff = per_layer_int(md, a + "feed_forward_length", c.n_layer, c.n_ff_per_layer);
  c.n_head = per_layer_int(md, a + "attention.head_count", c.n_layer, c.n_head_per_layer);
  c.n_head_kv = md.has(a + "attention.head_count_kv")
                    ? per_layer_int(md, a + "attention.head_count_kv", c.n_layer, c.n_head_kv_per_layer,
                                    c.family->recurrent_layers)
                    : c.n_head;
  if (c.n_head_kv == 0) throw_error("metadata: {}attention.head_count_kv is 0 on every layer", a);
  if (c.n_head_kv_per_layer.empty() && !c.n_head_per_layer.empty() && !md.has(a + "attention.head_count_kv"))
    c.n_head_kv_per_layer = c.n_head_per_layer;
  for (int il = 0; il < c.n_layer; ++il)
    if (c.n_head_kv_of(il) > 0 && c.n_head_of(il) % c.n_head_kv_of(il) != 0)
      throw_error("metadata: {}attention.head_count {} is not a multiple of head_count_kv {}", a,
                  c.n_head_of(il), c.n_head_kv_of(il));
  c.head_dim = md.has(a + "attention.key_length") ? positive_int(md, a + "attention.key_length")
                                                  : c.n_embd / c.n_head;
  if (!md.has(a + "attention.key_length") && c.n_embd % c.n_head != 0)
    throw_error("metadata: {}embedding_length {} is not a multiple of attention.head_count {}", a,
                c.n_embd, c.n_head);
  c.head_dim_v = md.has(a + "attention.value_length") ? positive_int(md, a + "attention.value_length")
                                                      : c.head_dim;
  // A family of RMSNorms has the first epsilon, one of LayerNorms (BERT) the second.
  if (md.has(a + "attention.layer_norm_epsilon")) {
    c.norm_eps = float(md.get_f64(a + "attention.layer_norm_epsilon"));
    if (!(c.norm_eps >= 0.0f))
      throw_error("metadata key '{}attention.layer_norm_epsilon': {} is not valid", a, c.norm_eps);
  }
  if (md.has(a + "attention.layer_norm_rms_epsilon") || !md.has(a + "attention.layer_norm_epsilon"))
    c.rms_eps = float(md.get_f64(a + "attention.layer_norm_rms_epsilon"));
  if (!(c.rms_eps >= 0.0f))
    throw_error("metadata key '{}attention.layer_norm_rms_epsilon': {} is not valid", a, c.rms_eps);
  c.causal = md.get_bool_or(a + "attention.causal", true);
  if (md.has(a + "pooling_type")) {
    const int64_t p = md.get_i64(a + "pooling_type");
    if (p < -1 || p > 4)
      throw_error("metadata key '{}pooling_type': {} is not a pooling (0 none, 1 mean, 2 cls, 3 last, 4 rank)", a, p);
    c.pooling = Pooling(p);
  }
  c.n_ctx_train = positive_int(md, a + "context_length");
  if (md.has(a + "vocab_size"))
    c.n_vocab = positive_int(md, a + "vocab_size");
  else if (const Value* tokens = md.find("tokenizer.ggml.tokens"))
    c.n_vocab = int64_t(tokens->as_array().items.size());

  // Experts: read for every family (llama's Mixtral has them); a family with experts reads the
  // rest with read_moe_hparams, and bind_weights refuses expert tensors a family cannot run.
  if (md.has(a + "expert_count")) {
    const int64_t n = md.get_i64(a + "expert_count");
    if (n < 0 || n > 4096) throw_error("metadata key '{}expert_count': value {} is out of range", a, n);
    c.n_expert = int(n);
  }
  if (c.n_expert > 0) {
    const std::string key = a + "expert_used_count";
    const int64_t used = md.get_i64(key);
    if (used <= 0 || used > c.n_expert)
      throw_error("metadata key '{}': {} of {} experts", key, used, c.n_expert);
    c.n_expert_used = int(used);
    c.n_ff_exp = c.n_ff;
    if (md.has(a + "expert_weights_scale")) {
      c.expert_weights_scale = float(md.get_f64(a + "expert_weights_scale"));
      if (!std::isfinite(c.expert_weights_scale))
        throw_error("metadata key '{}expert_weights_scale' is not finite", a);
    }
    // llama.cpp's llama_expert_gating_func_type: 1 softmax, 2 sigmoid (0 none: the family's).
    const int64_t gating = md.get_i64_or(a + "expert_gating_func", 0);
    if (gating == 2)
      c.expert_gating = MoeGating::Sigmoid;
    else if (gating != 0 && gating != 1)
      throw_error("metadata key '{}expert_gating_func': {} is not supported (1 softmax, 2 sigmoid)",
                  a, gating);
    // Group-limited choice, as llama.cpp reads it for every architecture.
    const int64_t groups = md.get_i64_or(a + "expert_group_count", 0);
    const int64_t groups_used = md.get_i64_or(a + "expert_group_used_count", 0);
    if (groups > 1) {
      if (c.n_expert % groups != 0 || groups_used < 1 || groups_used > groups ||
          groups_used * (c.n_expert / groups) < c.n_expert_used)
        throw_error("metadata keys '{}expert_group_count' {} and 'expert_group_used_count' {}: "
                    "{} experts cannot be chosen {} at a time from them",
                    a, groups, groups_used, c.n_expert, c.n_expert_used);
      c.n_expert_groups = int(groups);
      c.n_group_used = int(groups_used);
      const std::string score = md.get_string_or(a + "expert_group_score", "top2_sum");
      if (score == "max")
        c.expert_group_score = MoeGroupScore::Max;
      else if (score != "top2_sum")
        throw_error("metadata key '{}expert_group_score': '{}' (top2_sum or max)", a, score);
    }
  }

  c.n_rot = md.has(a + "rope.dimension_count") ? positive_int(md, a + "rope.dimension_count")
                                               : c.head_dim;
  if (c.family->learned_positions) c.n_rot = 0;  // positions come from a table, not RoPE
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    throw_error("metadata key '{}rope.dimension_count': {} must be even and <= head dim {}", a,
                c.n_rot, c.head_dim);
  c.rope_freq_base = float(md.get_f64_or(a + "rope.freq_base", 10000.0));
  c.rope_scaling = md.get_string_or(a + "rope.scaling.type", "none");
  double factor = md.get_f64_or(a + "rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = md.get_f64_or(a + "rope.scale_linear", 0.0);
  c.rope_ctx_orig = md.has(a + "rope.scaling.original_context_length")
                        ? positive_int(md, a + "rope.scaling.original_context_length")
                        : c.n_ctx_train;  // narrowed to int by rope_params(): range-checked here
  if (c.rope_scaling == "none" || c.rope_scaling == "linear") {
    c.rope_freq_scale = factor == 0.0 ? 1.0f : float(1.0 / factor);
  } else if (c.rope_scaling == "yarn") {
    c.rope_freq_scale = factor == 0.0 ? 1.0f : float(1.0 / factor);
    c.yarn_ext_factor = 1.0f;
    c.yarn_attn_factor = float(md.get_f64_or(a + "rope.scaling.attn_factor", 1.0));
    c.yarn_beta_fast = float(md.get_f64_or(a + "rope.scaling.yarn_beta_fast", 32.0));
    c.yarn_beta_slow = float(md.get_f64_or(a + "rope.scaling.yarn_beta_slow", 1.0));
    c.yarn_truncate = md.get_bool_or(a + "rope.scaling.yarn_truncate", true);
  } else if (c.rope_scaling == "llama3") {
    // GGUFs carry the factors as the rope_freqs.weight tensor (bound with the weights, which
    // replaces these); metadata-only sources get them computed from the HF parameters.
    c.rope_freq_factors = llama3_factors(
        c.n_rot, c.rope_freq_base, float(factor == 0.0 ? 8.0 : factor),
        float(md.get_f64_or(a + "rope.scaling.low_freq_factor", 1.0)),
        float(md.get_f64_or(a + "rope.scaling.high_freq_factor", 4.0)), double(c.rope_ctx_orig));
  } else {
    throw_error("metadata key '{}rope.scaling.type': '{}' is not supported", a, c.rope_scaling);
  }
  if (c.family->read_hparams) c.family->read_hparams(md, c);
  return c;
}

}  // namespace jitllm
