// Synthetic GGUF writer: shape table, the tensors and keys of each architecture exactly as the HF
// converter (hf_*.cpp, llama.cpp's names) writes them, per-tensor format mixes (llama-quantize's
// choices for Q4_K_M), random valid blocks, tokenizer metadata llama.cpp accepts (an SPM vocab of
// byte tokens plus filler pieces, sized to the shape's n_vocab).
#include "convert/synth.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/fp16.h"
#include "io/gguf.h"
#include "io/metadata.h"
#include "io/tensor_info.h"

namespace jitllm {

namespace {

uint64_t next(uint64_t& s) {  // splitmix64: fast, and the same stream on every machine
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float uniform(uint64_t& s, float lo, float hi) {
  return lo + (hi - lo) * float(next(s) >> 40) * (1.0f / 16777216.0f);
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

// Published configs (config.json of each HF checkpoint; gemma-3's text_config).
const std::vector<SynthShape>& synth_shapes() {
  static const std::vector<SynthShape> shapes = {
      {.name = "tiny", .arch = "llama", .n_embd = 256, .n_ff = 768, .n_layer = 2, .n_head = 4,
       .n_head_kv = 2, .head_dim = 64, .n_vocab = 512, .n_ctx = 2048},
      {.name = "llama-3.2-1b", .arch = "llama", .n_embd = 2048, .n_ff = 8192, .n_layer = 16,
       .n_head = 32, .n_head_kv = 8, .head_dim = 64, .n_vocab = 128256, .n_ctx = 131072,
       .rope_base = 500000.0f, .tied = true},
      {.name = "llama-3.2-3b", .arch = "llama", .n_embd = 3072, .n_ff = 8192, .n_layer = 28,
       .n_head = 24, .n_head_kv = 8, .head_dim = 128, .n_vocab = 128256, .n_ctx = 131072,
       .rope_base = 500000.0f, .tied = true},
      {.name = "llama-3.1-8b", .arch = "llama", .n_embd = 4096, .n_ff = 14336, .n_layer = 32,
       .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 128256, .n_ctx = 131072,
       .rope_base = 500000.0f},
      // Mistral-7B-v0.1: llama's graph with a 4096-token sliding window.
      {.name = "mistral-7b", .arch = "llama", .n_embd = 4096, .n_ff = 14336, .n_layer = 32,
       .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 32000, .n_ctx = 32768,
       .sliding_window = 4096},
      {.name = "qwen2.5-7b", .arch = "qwen2", .n_embd = 3584, .n_ff = 18944, .n_layer = 28,
       .n_head = 28, .n_head_kv = 4, .head_dim = 128, .n_vocab = 152064, .n_ctx = 32768,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .qkv_bias = true},
      {.name = "qwen3-1.7b", .arch = "qwen3", .n_embd = 2048, .n_ff = 6144, .n_layer = 28,
       .n_head = 16, .n_head_kv = 8, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .qk_norm = true},
      {.name = "qwen3-4b", .arch = "qwen3", .n_embd = 2560, .n_ff = 9728, .n_layer = 36,
       .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .qk_norm = true},
      {.name = "qwen3-8b", .arch = "qwen3", .n_embd = 4096, .n_ff = 12288, .n_layer = 36,
       .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .qk_norm = true},
      // Gemma 2: every other layer slides (the even ones), soft-capped scores and logits.
      {.name = "gemma-2-9b", .arch = "gemma2", .n_embd = 3584, .n_ff = 14336, .n_layer = 42,
       .n_head = 16, .n_head_kv = 8, .head_dim = 256, .n_vocab = 256000, .n_ctx = 8192,
       .rms_eps = 1e-6f, .tied = true, .sliding_window = 4096, .sliding_period = 2,
       .attn_softcap = 50.0f, .final_softcap = 30.0f, .attn_scale = 0.0625f},
      // Gemma 3: five sliding layers (base 10k) to one full (base 1M, linear x8).
      // Gemma 3 1B: one KV head, a 512-token window, no RoPE scaling.
      {.name = "gemma-3-1b", .arch = "gemma3", .n_embd = 1152, .n_ff = 6912, .n_layer = 26,
       .n_head = 4, .n_head_kv = 1, .head_dim = 256, .n_vocab = 262144, .n_ctx = 32768,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .qk_norm = true,
       .sliding_window = 512, .sliding_period = 6, .rope_base_swa = 10000.0f,
       .attn_scale = 0.0625f},
      {.name = "gemma-3-4b", .arch = "gemma3", .n_embd = 2560, .n_ff = 10240, .n_layer = 34,
       .n_head = 8, .n_head_kv = 4, .head_dim = 256, .n_vocab = 262208, .n_ctx = 131072,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .qk_norm = true,
       .sliding_window = 1024, .sliding_period = 6, .rope_base_swa = 10000.0f,
       .rope_linear_factor = 8.0f, .attn_scale = 0.0625f},
      {.name = "gemma-3-12b", .arch = "gemma3", .n_embd = 3840, .n_ff = 15360, .n_layer = 48,
       .n_head = 16, .n_head_kv = 8, .head_dim = 256, .n_vocab = 262208, .n_ctx = 131072,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .qk_norm = true,
       .sliding_window = 1024, .sliding_period = 6, .rope_base_swa = 10000.0f,
       .rope_linear_factor = 8.0f, .attn_scale = 0.0625f},
      // Phi-4-mini: fused projections, 96 of 128 dimensions rotated, LongRoPE from 4k to 128k.
      {.name = "phi-4-mini", .arch = "phi3", .n_embd = 3072, .n_ff = 8192, .n_layer = 32,
       .n_head = 24, .n_head_kv = 8, .head_dim = 128, .n_vocab = 200064, .n_ctx = 131072,
       .tied = true, .n_rot = 96, .sliding_window = 262144, .n_ctx_orig = 4096,
       .longrope = true},
      // OLMo-2-1124-7B.
      {.name = "olmo2-7b", .arch = "olmo2", .n_embd = 4096, .n_ff = 11008, .n_layer = 32,
       .n_head = 32, .n_head_kv = 32, .head_dim = 128, .n_vocab = 100352, .n_ctx = 4096,
       .rope_base = 500000.0f, .rms_eps = 1e-6f},
      // Mixtures of experts. tiny-moe: the MoE tests' file (8 experts, 2 chosen).
      {.name = "tiny-moe", .arch = "qwen3moe", .n_embd = 256, .n_ff = 768, .n_layer = 2,
       .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_vocab = 512, .n_ctx = 2048,
       .rms_eps = 1e-6f, .qk_norm = true, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256,
       .expert_weights_norm = true},
      {.name = "qwen3-30b-a3b", .arch = "qwen3moe", .n_embd = 2048, .n_ff = 6144, .n_layer = 48,
       .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960,
       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .qk_norm = true, .n_expert = 128,
       .n_expert_used = 8, .n_ff_exp = 768, .expert_weights_norm = true},
      // OLMoE-1B-7B-0924: q/k norms over the whole projection, experts of feed_forward_length.
      {.name = "olmoe-1b-7b", .arch = "olmoe", .n_embd = 2048, .n_ff = 1024, .n_layer = 16,
       .n_head = 16, .n_head_kv = 16, .head_dim = 128, .n_vocab = 50304, .n_ctx = 4096,
       .n_expert = 64, .n_expert_used = 8},
      // tiny-gpt-oss: the gpt-oss tests' file (a window of 16 on layer 0, 8 experts, 2 chosen).
      {.name = "tiny-gpt-oss", .arch = "gpt-oss", .n_embd = 256, .n_ff = 256, .n_layer = 2,
       .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_vocab = 512, .n_ctx = 2048,
       .rope_base = 150000.0f, .sliding_window = 16, .sliding_period = 2, .n_ctx_orig = 4096,
       .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_yarn_factor = 32.0f},
      // gpt-oss-20b: 24 layers alternating a 128-token window and full attention, biases, sinks,
      // 32 experts of 2880 (4 chosen), YaRN x32 over 4096.
      {.name = "gpt-oss-20b", .arch = "gpt-oss", .n_embd = 2880, .n_ff = 2880, .n_layer = 24,
       .n_head = 64, .n_head_kv = 8, .head_dim = 64, .n_vocab = 201088, .n_ctx = 131072,
       .rope_base = 150000.0f, .sliding_window = 128, .sliding_period = 2, .n_ctx_orig = 4096,
       .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .rope_yarn_factor = 32.0f},
      // LFM2: short convolutions (3 taps) between GQA layers with per-head q/k norms, tied head.
      {.name = "tiny-lfm2", .arch = "lfm2", .n_embd = 256, .n_ff = 512, .n_layer = 5,
       .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_vocab = 512, .n_ctx = 2048,
       .rope_base = 1000000.0f, .tied = true, .qk_norm = true, .layer_kinds = "cacca",
       .shortconv_l_cache = 3},
      {.name = "lfm2-1.2b", .arch = "lfm2", .n_embd = 2048, .n_ff = 8192, .n_layer = 16,
       .n_head = 32, .n_head_kv = 8, .head_dim = 64, .n_vocab = 65536, .n_ctx = 128000,
       .rope_base = 1000000.0f, .tied = true, .qk_norm = true,
       .layer_kinds = "ccaccaccacacacac", .shortconv_l_cache = 3},
      {.name = "mixtral-8x7b", .arch = "llama", .n_embd = 4096, .n_ff = 14336, .n_layer = 32,
       .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 32000, .n_ctx = 32768,
       .rope_base = 1000000.0f, .n_expert = 8, .n_expert_used = 2, .expert_weights_norm = true},
      // tiny-deepseek2: the MLA tests' file (latent 256 + rope 32, heads of 64 + 32 / 64, a dense
      // first layer, 8 experts of which 2 chosen, 1 shared, YaRN x4 with DeepSeek's mscale).
      {.name = "tiny-deepseek2", .arch = "deepseek2", .n_embd = 256, .n_ff = 512, .n_layer = 2,
       .n_head = 4, .n_head_kv = 1, .head_dim = 256 + 32, .n_vocab = 512, .n_ctx = 2048,
       .rms_eps = 1e-6f, .n_rot = 32, .n_ctx_orig = 512, .n_expert = 8, .n_expert_used = 2,
       .n_ff_exp = 256, .rope_yarn_factor = 4.0f, .n_lora_kv = 256, .qk_nope = 64,
       .head_dim_v = 64, .n_dense_lead = 1, .n_expert_shared = 1, .expert_weights_scale = 1.5f,
       .yarn_mscale_all_dim = 0.707f},
      // tiny-deepseek2-qlora: the same with q through a LoRA of 128 (llama.cpp takes only 26-,
      // 27- and some 48-layer files as q-direct, so this is the tiny one it loads).
      {.name = "tiny-deepseek2-qlora", .arch = "deepseek2", .n_embd = 256, .n_ff = 512,
       .n_layer = 2, .n_head = 4, .n_head_kv = 1, .head_dim = 256 + 32, .n_vocab = 512,
       .n_ctx = 2048, .rms_eps = 1e-6f, .n_rot = 32, .n_ctx_orig = 512, .n_expert = 8,
       .n_expert_used = 2, .n_ff_exp = 256, .rope_yarn_factor = 4.0f, .n_lora_q = 128,
       .n_lora_kv = 256, .qk_nope = 64, .head_dim_v = 64, .n_dense_lead = 1,
       .n_expert_shared = 1, .expert_weights_scale = 1.5f, .yarn_mscale_all_dim = 0.707f},
      // DeepSeek-V2-Lite (16B, 2.4B active): q projected directly, latent 512 + rope 64, 16 heads
      // of 128 + 64 / 128, 26 of 27 layers with 64 experts of 1408 (6 chosen) and 2 shared, YaRN
      // x40 over 4096 with mscale 0.707.
      {.name = "deepseek-v2-lite", .arch = "deepseek2", .n_embd = 2048, .n_ff = 10944,
       .n_layer = 27, .n_head = 16, .n_head_kv = 1, .head_dim = 512 + 64, .n_vocab = 102400,
       .n_ctx = 163840, .rms_eps = 1e-6f, .n_rot = 64, .n_ctx_orig = 4096, .n_expert = 64,
       .n_expert_used = 6, .n_ff_exp = 1408, .rope_yarn_factor = 40.0f, .n_lora_kv = 512,
       .qk_nope = 128, .head_dim_v = 128, .n_dense_lead = 1, .n_expert_shared = 2,
       .expert_weights_scale = 1.0f, .yarn_mscale_all_dim = 0.707f},
  };
  return shapes;
}

const SynthShape& synth_shape(const std::string& name) {
  std::string known;
  for (const SynthShape& s : synth_shapes()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw_error("--shape {}: unknown (known: {})", name, known);
}

const std::vector<std::string>& synth_mixes() {
  static const std::vector<std::string> mixes = {"f16", "q8_0", "q4_0", "q6_k", "q4_k_m",
                                                 "mxfp4_moe"};
  return mixes;
}

QuantType synth_tensor_type(const std::string& mix, const std::string& name, int layer,
                            int n_layer) {
  const bool output = name == "output.weight";
  if (mix == "f16") return QuantType::F16;
  if (mix == "q8_0") return QuantType::Q8_0;
  if (mix == "q6_k") return QuantType::Q6_K;
  if (mix == "q4_0") return output ? QuantType::Q6_K : QuantType::Q4_0;
  // llama-quantize's MXFP4_MOE: the experts MXFP4, every other matrix Q8_0.
  if (mix == "mxfp4_moe") return name.find("_exps.") != std::string::npos ? QuantType::MXFP4 : QuantType::Q8_0;
  if (mix == "q4_k_m") {
    if (output) return QuantType::Q6_K;
    if (name.ends_with("attn_qkv.weight")) return QuantType::Q5_K;
    const bool more = layer >= 0 && use_more_bits(layer, n_layer);
    if (more && (name.ends_with("attn_v.weight") || name.ends_with("ffn_down.weight") ||
                 name.ends_with("ffn_down_exps.weight")))
      return QuantType::Q6_K;
    return QuantType::Q4_K;
  }
  std::string known;
  for (const auto& m : synth_mixes()) known += (known.empty() ? "" : ", ") + m;
  throw_error("--type {}: unknown mix (known: {})", mix, known);
}

void fill_random_blocks(QuantType type, uint8_t* dst, size_t n_blocks, uint64_t& rng) {
  const size_t bb = quant_traits(type).block_bytes;
  const size_t total = bb * n_blocks;
  // Random bits everywhere first (every bit pattern of a quant field is a valid level) ...
  size_t i = 0;
  for (; i + 8 <= total; i += 8) {
    const uint64_t v = next(rng);
    std::memcpy(dst + i, &v, 8);
  }
  for (; i < total; ++i) dst[i] = uint8_t(next(rng));
  // ... then the scale fields (and plain floats) overwritten with finite values.
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* p = dst + b * bb;
    switch (type) {
      case QuantType::F32: {
        const float v = uniform(rng, -0.05f, 0.05f);
        std::memcpy(p, &v, 4);
        break;
      }
      case QuantType::F16: put_half(p, uniform(rng, -0.05f, 0.05f)); break;
      case QuantType::BF16: {
        const uint16_t h = f32_to_bf16(uniform(rng, -0.05f, 0.05f));
        std::memcpy(p, &h, 2);
        break;
      }
      case QuantType::Q8_0:
        put_half(p, uniform(rng, 2e-4f, 4e-4f));
        for (int j = 0; j < 32; ++j)
          if (p[2 + j] == 0x80) p[2 + j] = 0x81;  // levels are -127..127
        break;
      case QuantType::Q4_0:
      case QuantType::Q5_0:
      case QuantType::IQ4_NL: put_half(p, uniform(rng, 2e-3f, 6e-3f)); break;
      case QuantType::Q4_1:
      case QuantType::Q5_1:
        put_half(p, uniform(rng, 2e-3f, 6e-3f));
        put_half(p + 2, uniform(rng, -0.05f, -0.02f));
        break;
      case QuantType::MXFP4: p[0] = uint8_t(118 + next(rng) % 4); break;
      case QuantType::Q2_K: put_half(p + 80, 1e-3f); put_half(p + 82, 1e-3f); break;
      case QuantType::Q3_K: put_half(p + 108, 5e-4f); break;
      case QuantType::Q4_K:
      case QuantType::Q5_K:
        put_half(p, uniform(rng, 1e-4f, 2e-4f));
        put_half(p + 2, uniform(rng, 1e-4f, 2e-4f));
        break;
      case QuantType::Q6_K: put_half(p + 208, uniform(rng, 2e-5f, 4e-5f)); break;
      default: throw_error("synth: no random block generator for {}", quant_name(type));
    }
  }
}

Metadata synth_metadata(const SynthShape& s, const std::string& mix) {
  Metadata md;
  const std::string a = s.arch + ".";
  auto u32 = [](int64_t v) { return Value::u32(uint32_t(v)); };
  md.set("general.architecture", Value::string(s.arch));
  md.set("general.name", Value::string("jitllm-synth-" + s.name + "-" + mix));
  md.set("general.quantization_version", Value::u32(2));
  md.set(a + "block_count", u32(s.n_layer));
  md.set(a + "context_length", u32(s.n_ctx));
  md.set(a + "embedding_length", u32(s.n_embd));
  md.set(a + "feed_forward_length", u32(s.n_ff));
  md.set(a + "attention.head_count", u32(s.n_head));
  if (s.layer_kinds.empty()) {
    md.set(a + "attention.head_count_kv", u32(s.n_head_kv));
  } else {  // 0 KV heads on the convolution layers
    std::vector<int32_t> kv;
    for (const char k : s.layer_kinds) kv.push_back(k == 'c' ? 0 : int32_t(s.n_head_kv));
    md.set(a + "attention.head_count_kv", Value::i32_array(kv));
    md.set(a + "shortconv.l_cache", u32(s.shortconv_l_cache));
  }
  md.set(a + "attention.key_length", u32(s.head_dim));
  md.set(a + "attention.value_length", u32(s.head_dim));
  md.set(a + "rope.dimension_count", u32(s.n_rot > 0 ? s.n_rot : s.head_dim));
  md.set(a + "rope.freq_base", Value::f32(s.rope_base));
  md.set(a + "attention.layer_norm_rms_epsilon", Value::f32(s.rms_eps));
  md.set(a + "vocab_size", u32(s.n_vocab));
  if (s.sliding_window > 0) md.set(a + "attention.sliding_window", u32(s.sliding_window));
  if (s.sliding_period > 0 && s.arch != "gpt-oss") {  // gpt-oss: llama.cpp's fixed period 2
    std::vector<Value> sliding;
    for (int64_t il = 0; il < s.n_layer; ++il)
      sliding.push_back(Value::boolean((il + 1) % s.sliding_period != 0));
    md.set(a + "attention.sliding_window_pattern",
           Value::array(ValueType::Bool, std::move(sliding)));
  }
  if (s.rope_base_swa > 0) md.set(a + "rope.freq_base_swa", Value::f32(s.rope_base_swa));
  if (s.rope_linear_factor > 0) {
    md.set(a + "rope.scaling.type", Value::string("linear"));
    md.set(a + "rope.scaling.factor", Value::f32(s.rope_linear_factor));
  }
  if (s.attn_softcap > 0) md.set(a + "attn_logit_softcapping", Value::f32(s.attn_softcap));
  if (s.final_softcap > 0) md.set(a + "final_logit_softcapping", Value::f32(s.final_softcap));
  if (s.attn_scale > 0) md.set(a + "attention.scale", Value::f32(s.attn_scale));
  if (s.n_expert > 0) {
    md.set(a + "expert_count", u32(s.n_expert));
    md.set(a + "expert_used_count", u32(s.n_expert_used));
    if (s.n_ff_exp > 0) md.set(a + "expert_feed_forward_length", u32(s.n_ff_exp));
    if (s.arch != "gpt-oss")  // its softmax over the chosen is never renormalised
      md.set(a + "expert_weights_norm", Value::boolean(s.expert_weights_norm));
  }
  if (s.arch == "deepseek2") {  // as llama.cpp's converter writes MLA (conversion/deepseek.py)
    md.set(a + "attention.value_length", u32(s.n_lora_kv));
    if (s.n_lora_q > 0) md.set(a + "attention.q_lora_rank", u32(s.n_lora_q));
    md.set(a + "attention.kv_lora_rank", u32(s.n_lora_kv));
    md.set(a + "attention.key_length_mla", u32(s.qk_nope + s.n_rot));
    md.set(a + "attention.value_length_mla", u32(s.head_dim_v));
    md.set(a + "leading_dense_block_count", u32(s.n_dense_lead));
    md.set(a + "expert_shared_count", u32(s.n_expert_shared));
    md.erase(a + "expert_weights_norm");  // the converter writes it only when true
    if (s.expert_weights_norm) md.set(a + "expert_weights_norm", Value::boolean(true));
    if (s.expert_weights_scale > 0) md.set(a + "expert_weights_scale", Value::f32(s.expert_weights_scale));
    md.set(a + "expert_gating_func", u32(1));
    if (s.yarn_mscale_all_dim > 0)
      md.set(a + "rope.scaling.yarn_log_multiplier", Value::f32(0.1f * s.yarn_mscale_all_dim));
  }
  if (s.rope_yarn_factor > 0) {
    md.set(a + "rope.scaling.type", Value::string("yarn"));
    md.set(a + "rope.scaling.factor", Value::f32(s.rope_yarn_factor));
    md.set(a + "rope.scaling.yarn_beta_fast", Value::f32(32.0f));
    md.set(a + "rope.scaling.yarn_beta_slow", Value::f32(1.0f));
  }
  if (s.n_ctx_orig > 0) {
    md.set(a + "rope.scaling.original_context_length", u32(s.n_ctx_orig));
    if (s.longrope) {  // as conversion/phi.py: sqrt(1 + ln(scale) / ln(original context))
      const double scale = double(s.n_ctx) / double(s.n_ctx_orig);
      const double attn_factor =
          scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(double(s.n_ctx_orig))) : 1.0;
      md.set(a + "rope.scaling.attn_factor", Value::f32(float(attn_factor)));
    }
  }

  // SPM vocab: <unk> <s> </s>, the 256 byte tokens, then unique filler pieces.
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens = {"<unk>", "<s>", "</s>"};
  types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  for (int64_t i = int64_t(tokens.size()); i < s.n_vocab; ++i) {
    tokens.push_back(fmt::format("\xe2\x96\x81t{}", i));
    types.push_back(1);
  }
  for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(i < 259 ? 0.0f : -float(i));
  md.set("tokenizer.ggml.model", Value::string("llama"));
  md.set("tokenizer.ggml.pre", Value::string("default"));
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.scores", Value::f32_array(scores));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  md.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  md.set("tokenizer.ggml.eos_token_id", Value::u32(2));
  md.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
  md.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  md.set("tokenizer.ggml.add_eos_token", Value::boolean(false));
  return md;
}

std::vector<SynthTensor> synth_tensors(const SynthShape& s, const std::string& mix) {
  std::vector<SynthTensor> specs;
  const int nl = int(s.n_layer);
  // A matrix [cols, rows], or with experts > 0 a stack of them [cols, rows, experts].
  auto matrix = [&](const std::string& name, int layer, int64_t cols, int64_t rows,
                    int64_t experts = 0) {
    const bool as_output = name == "output.weight" || (s.tied && name == "token_embd.weight");
    QuantType type = synth_tensor_type(mix, as_output ? "output.weight" : name, layer, nl);
    // llama-quantize's fallback for rows that do not fill a K-quant super-block (deepseek2's
    // attn_k_b rows of qk_nope): the legacy format of about the same bits.
    if (cols % quant_traits(type).block_elems != 0) {
      if (type == QuantType::Q4_K) type = QuantType::Q5_0;
      else if (type == QuantType::Q5_K) type = QuantType::Q5_1;
      else if (type == QuantType::Q6_K) type = QuantType::Q8_0;
    }
    if (cols % quant_traits(type).block_elems != 0)
      throw_error("synth {}: {} rows of {} do not divide into {} blocks", s.name, name, cols,
                  quant_name(type));
    if (experts > 0)
      specs.push_back({name, type, {cols, rows, experts}, false});
    else
      specs.push_back({name, type, {cols, rows}, false});
  };
  auto vec = [&](const std::string& name, int64_t n, bool ones) {
    specs.push_back({name, QuantType::F32, {n}, ones});
  };
  const bool gemma = s.arch == "gemma2" || s.arch == "gemma3";
  const bool phi3 = s.arch == "phi3", olmo2 = s.arch == "olmo2", olmoe = s.arch == "olmoe";
  const bool gpt_oss = s.arch == "gpt-oss";  // biases everywhere, sinks, experts in every layer
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  matrix("token_embd.weight", -1, s.n_embd, s.n_vocab);
  if (s.longrope) {  // per model, as llama.cpp's converter writes them
    const int64_t n_rot = s.n_rot > 0 ? s.n_rot : s.head_dim;
    vec("rope_factors_long.weight", n_rot / 2, true);
    vec("rope_factors_short.weight", n_rot / 2, true);
  }
  if (!s.layer_kinds.empty() && int64_t(s.layer_kinds.size()) != s.n_layer)
    throw_error("synth {}: {} layer kinds for {} layers", s.name, s.layer_kinds.size(), s.n_layer);
  for (int il = 0; il < nl && s.arch == "deepseek2"; ++il) {
    // llama.cpp's deepseek2 layer (src/models/deepseek2.cpp), split attn_k_b / attn_v_b.
    const std::string p = fmt::format("blk.{}.", il);
    const int64_t hk = s.qk_nope + s.n_rot;
    vec(p + "attn_norm.weight", s.n_embd, true);
    if (s.n_lora_q > 0) {
      matrix(p + "attn_q_a.weight", il, s.n_embd, s.n_lora_q);
      vec(p + "attn_q_a_norm.weight", s.n_lora_q, true);
      matrix(p + "attn_q_b.weight", il, s.n_lora_q, s.n_head * hk);
    } else {
      matrix(p + "attn_q.weight", il, s.n_embd, s.n_head * hk);
    }
    matrix(p + "attn_kv_a_mqa.weight", il, s.n_embd, s.n_lora_kv + s.n_rot);
    vec(p + "attn_kv_a_norm.weight", s.n_lora_kv, true);
    matrix(p + "attn_k_b.weight", il, s.qk_nope, s.n_lora_kv, s.n_head);
    matrix(p + "attn_v_b.weight", il, s.n_lora_kv, s.head_dim_v, s.n_head);
    matrix(p + "attn_output.weight", il, s.n_head * s.head_dim_v, s.n_embd);
    vec(p + "ffn_norm.weight", s.n_embd, true);
    if (il < s.n_dense_lead) {
      matrix(p + "ffn_gate.weight", il, s.n_embd, s.n_ff);
      matrix(p + "ffn_up.weight", il, s.n_embd, s.n_ff);
      matrix(p + "ffn_down.weight", il, s.n_ff, s.n_embd);
      continue;
    }
    specs.push_back({p + "ffn_gate_inp.weight", QuantType::F32, {s.n_embd, s.n_expert}, false});
    matrix(p + "ffn_gate_exps.weight", il, s.n_embd, s.n_ff_exp, s.n_expert);
    matrix(p + "ffn_up_exps.weight", il, s.n_embd, s.n_ff_exp, s.n_expert);
    matrix(p + "ffn_down_exps.weight", il, s.n_ff_exp, s.n_embd, s.n_expert);
    const int64_t shared = s.n_ff_exp * s.n_expert_shared;
    matrix(p + "ffn_gate_shexp.weight", il, s.n_embd, shared);
    matrix(p + "ffn_up_shexp.weight", il, s.n_embd, shared);
    matrix(p + "ffn_down_shexp.weight", il, shared, s.n_embd);
  }
  for (int il = 0; il < nl && s.arch != "deepseek2"; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    if (!olmo2) vec(p + "attn_norm.weight", s.n_embd, true);
    if (!s.layer_kinds.empty() && s.layer_kinds[size_t(il)] == 'c') {  // LFM2's convolution
      specs.push_back({p + "shortconv.conv.weight", QuantType::F32, {s.shortconv_l_cache, s.n_embd}, false});
      matrix(p + "shortconv.in_proj.weight", il, s.n_embd, 3 * s.n_embd);
      matrix(p + "shortconv.out_proj.weight", il, s.n_embd, s.n_embd);
      vec(p + "ffn_norm.weight", s.n_embd, true);
      matrix(p + "ffn_gate.weight", il, s.n_embd, s.n_ff);
      matrix(p + "ffn_up.weight", il, s.n_embd, s.n_ff);
      matrix(p + "ffn_down.weight", il, s.n_ff, s.n_embd);
      continue;
    }
    if (phi3) {
      matrix(p + "attn_qkv.weight", il, s.n_embd, q_dim + 2 * kv_dim);
    } else {
      matrix(p + "attn_q.weight", il, s.n_embd, q_dim);
      matrix(p + "attn_k.weight", il, s.n_embd, kv_dim);
      matrix(p + "attn_v.weight", il, s.n_embd, kv_dim);
    }
    if (s.qkv_bias || gpt_oss) {
      vec(p + "attn_q.bias", q_dim, false);
      vec(p + "attn_k.bias", kv_dim, false);
      vec(p + "attn_v.bias", kv_dim, false);
    }
    if (s.qk_norm) {
      vec(p + "attn_q_norm.weight", s.head_dim, true);
      vec(p + "attn_k_norm.weight", s.head_dim, true);
    }
    if (olmo2 || olmoe) {  // over the whole projection
      vec(p + "attn_q_norm.weight", q_dim, true);
      vec(p + "attn_k_norm.weight", kv_dim, true);
    }
    matrix(p + "attn_output.weight", il, q_dim, s.n_embd);
    if (gpt_oss) {
      vec(p + "attn_output.bias", s.n_embd, false);
      vec(p + "attn_sinks.weight", s.n_head, false);
    }
    if (gemma || olmo2 || gpt_oss) vec(p + "post_attention_norm.weight", s.n_embd, true);
    if (!olmo2 && !gpt_oss) vec(p + "ffn_norm.weight", s.n_embd, true);
    if (s.n_expert > 0) {
      // The router stays F32 (llama-quantize never quantizes ffn_gate_inp).
      specs.push_back({p + "ffn_gate_inp.weight", QuantType::F32, {s.n_embd, s.n_expert}, false});
      const int64_t ff = s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff;
      matrix(p + "ffn_gate_exps.weight", il, s.n_embd, ff, s.n_expert);
      matrix(p + "ffn_up_exps.weight", il, s.n_embd, ff, s.n_expert);
      matrix(p + "ffn_down_exps.weight", il, ff, s.n_embd, s.n_expert);
      if (gpt_oss) {
        vec(p + "ffn_gate_inp.bias", s.n_expert, false);
        specs.push_back({p + "ffn_gate_exps.bias", QuantType::F32, {ff, s.n_expert}, false});
        specs.push_back({p + "ffn_up_exps.bias", QuantType::F32, {ff, s.n_expert}, false});
        specs.push_back({p + "ffn_down_exps.bias", QuantType::F32, {s.n_embd, s.n_expert}, false});
      }
      continue;
    }
    if (phi3) {
      matrix(p + "ffn_up.weight", il, s.n_embd, 2 * s.n_ff);  // gate rows, then up rows
    } else {
      matrix(p + "ffn_gate.weight", il, s.n_embd, s.n_ff);
      matrix(p + "ffn_up.weight", il, s.n_embd, s.n_ff);
    }
    matrix(p + "ffn_down.weight", il, s.n_ff, s.n_embd);
    if (gemma || olmo2) vec(p + "post_ffw_norm.weight", s.n_embd, true);
  }
  vec(s.arch == "lfm2" ? "token_embd_norm.weight" : "output_norm.weight", s.n_embd, true);  // llama.cpp's names
  if (!s.tied) matrix("output.weight", -1, s.n_embd, s.n_vocab);
  return specs;
}

uint64_t write_synth_model(const std::string& path, const std::string& shape_name,
                           const std::string& mix, uint64_t seed) {
  return write_synth_model(path, synth_shape(shape_name), mix, seed);
}

uint64_t write_synth_model(const std::string& path, const SynthShape& s, const std::string& mix,
                           uint64_t seed) {
  synth_tensor_type(mix, "x", -1, 1);  // validates the mix name before any work
  const Metadata md = synth_metadata(s, mix);
  const std::vector<SynthTensor> specs = synth_tensors(s, mix);

  // All tensor data in one buffer (write_gguf copies from views).
  std::vector<TensorInfo> infos;
  uint64_t total = 0;
  for (const SynthTensor& sp : specs) {
    int64_t rows = 1;
    for (size_t d = 1; d < sp.shape.size(); ++d) rows *= sp.shape[d];
    total += (row_bytes(sp.type, sp.shape[0]) * size_t(rows) + 63) / 64 * 64;
  }
  AlignedPtr<uint8_t> data = make_aligned<uint8_t>(total, 64);
  uint64_t off = 0, rng = seed;
  for (const SynthTensor& sp : specs) {
    TensorInfo t;
    t.name = sp.name;
    t.type = sp.type;
    t.shape = sp.shape;
    int64_t rows = 1;
    for (size_t d = 1; d < sp.shape.size(); ++d) rows *= sp.shape[d];
    t.bytes = row_bytes(sp.type, sp.shape[0]) * size_t(rows);
    t.data = data.get() + off;
    uint8_t* p = data.get() + off;
    if (sp.ones) {
      for (int64_t i = 0; i < sp.shape[0]; ++i) {
        const float one = 1.0f;
        std::memcpy(p + 4 * i, &one, 4);
      }
    } else {
      const size_t n_blocks = t.bytes / quant_traits(sp.type).block_bytes;
      fill_random_blocks(sp.type, p, n_blocks, rng);
    }
    off += (t.bytes + 63) / 64 * 64;
    infos.push_back(std::move(t));
  }
  write_gguf(path, md, infos);
  uint64_t bytes = 0;
  for (const auto& t : infos) bytes += t.bytes;
  return bytes;
}

}  // namespace jitllm
