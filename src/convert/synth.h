// Synthetic model files for benchmarks: a real model's tensor shapes (a small table of known
// architectures) filled with random but valid quantized blocks, written as a GGUF that llama.cpp
// and jitllm both load. Speed depends on shape and format, not on the values, so every benchmark
// of both engines reads the same such file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/metadata.h"
#include "quant/types.h"

namespace jitllm {

// A real model's hyperparameters, and what its GGUF architecture adds to the llama block.
struct SynthShape {
  std::string name;  // "llama-3.2-1b"
  // GGUF general.architecture: llama, qwen2, qwen3, gemma2, gemma3, phi3, olmo2, qwen3moe or
  // olmoe; the block's tensors follow it (gemma2/3: four norms a layer; phi3: fused qkv and
  // gate+up; olmo2: norms after the sublayers and q/k norms over the whole projection).
  std::string arch;
  int64_t n_embd = 0, n_ff = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_vocab = 0, n_ctx = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied = false;     // no output.weight: the embedding is the output head
  bool qkv_bias = false;  // qwen2: biases on q/k/v
  bool qk_norm = false;   // qwen3, gemma3: RMSNorm on q and k per head (olmo2 always has its own)
  int64_t n_rot = 0;      // rotated dimensions of a head; 0: all (phi-4-mini: 96 of 128)
  int64_t sliding_window = 0;  // 0: none
  // > 0: layer il attends through the window unless (il + 1) % sliding_period == 0 (gemma2: 2,
  // gemma3: 6); written as the bool-per-layer sliding_window_pattern.
  int sliding_period = 0;
  float rope_base_swa = 0.0f;      // > 0: the sliding layers' own rope base (gemma3)
  float rope_linear_factor = 0.0f;  // > 0: linear rope scaling of the full layers (gemma3)
  float attn_softcap = 0.0f, final_softcap = 0.0f;  // > 0: written (gemma2)
  float attn_scale = 0.0f;  // > 0: attention.scale, query_pre_attn_scalar^-0.5 (gemma2/3)
  int64_t n_ctx_orig = 0;   // phi3: original context; with longrope the factor tensors
  bool longrope = false;
  // Mixture of experts (qwen3moe, olmoe, llama for Mixtral): every layer's FFN is n_expert
  // experts of width n_ff_exp (0: n_ff) behind an F32 router, n_expert_used chosen per token.
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  bool expert_weights_norm = false;  // the chosen weights renormalised (norm_topk_prob)
  float rope_yarn_factor = 0.0f;     // > 0: YaRN over n_ctx_orig positions (gpt-oss)
  // LFM2: one letter per layer, 'c' a short-convolution layer (no KV heads), 'a' attention; and
  // the convolution's taps.
  std::string layer_kinds;
  int64_t shortconv_l_cache = 0;
  // deepseek2 (multi-head latent attention): q directly (n_lora_q 0) or through a LoRA, the
  // latent of n_lora_kv, q/k heads of qk_nope + n_rot, v heads of head_dim_v; written in
  // llama.cpp's absorbed form (1 KV head of n_lora_kv + n_rot, split attn_k_b / attn_v_b). The
  // first n_dense_lead layers dense, then experts with n_expert_shared shared ones; routed
  // weights times expert_weights_scale; yarn_mscale_all_dim as llama.cpp's yarn_log_multiplier.
  int64_t n_lora_q = 0, n_lora_kv = 0, qk_nope = 0, head_dim_v = 0, n_dense_lead = 0;
  int64_t n_expert_shared = 0;
  float expert_weights_scale = 0.0f, yarn_mscale_all_dim = 0.0f;
};

// The known shapes (tiny, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, mistral-7b, qwen2.5-7b,
// qwen3-4b, qwen3-8b, gemma-2-9b, gemma-3-4b, gemma-3-12b, phi-4-mini, olmo2-7b; with experts
// tiny-moe, qwen3-30b-a3b, olmoe-1b-7b, mixtral-8x7b, gpt-oss-20b, tiny-deepseek2,
// deepseek-v2-lite; the hybrids tiny-lfm2 and lfm2-1.2b; gpt-oss's biases, sinks and post_attention_norm come with its arch, as
// deepseek2's latent attention and shared experts with its).
const std::vector<SynthShape>& synth_shapes();
// Throws naming the known shapes when `name` is not one of them.
const SynthShape& synth_shape(const std::string& name);

// Mixes by name: f16, q8_0, q4_0, q6_k, q4_k_m (llama-quantize's Q4_K_M choices per tensor).
// Returns the format of tensor `name` (a matrix) at layer `layer` (-1 outside the blocks).
QuantType synth_tensor_type(const std::string& mix, const std::string& name, int layer,
                            int n_layer);
const std::vector<std::string>& synth_mixes();

// Fills n_blocks blocks of `type` (or n_blocks elements of F32/F16/BF16) with random valid
// contents: finite scales of a typical magnitude (weights around +-0.05), any quant bits.
void fill_random_blocks(QuantType type, uint8_t* dst, size_t n_blocks, uint64_t& rng);

// One tensor of a synthetic model, in file order.
struct SynthTensor {
  std::string name;  // GGUF name, as the HF converter writes it ("blk.0.attn_qkv.weight")
  QuantType type;
  std::vector<int64_t> shape;  // ne order
  bool ones;  // norms and rope factors: all 1.0 (F32); else random blocks
};
std::vector<SynthTensor> synth_tensors(const SynthShape& shape, const std::string& mix);
// The GGUF keys, as the HF converter writes them for the real model, plus an SPM vocab of
// n_vocab tokens (byte tokens and filler pieces) that llama.cpp loads.
Metadata synth_metadata(const SynthShape& shape, const std::string& mix);

// Writes the synthetic GGUF (all tensor data is generated in memory first: the file's size).
// Returns the bytes of tensor data written.
uint64_t write_synth_model(const std::string& path, const std::string& shape,
                           const std::string& mix, uint64_t seed);
uint64_t write_synth_model(const std::string& path, const SynthShape& shape,
                           const std::string& mix, uint64_t seed);

}  // namespace jitllm
