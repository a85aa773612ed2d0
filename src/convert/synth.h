// Synthetic model files for benchmarks: a real model's tensor shapes (a small table of known
// architectures) filled with random but valid quantized blocks, written as a GGUF that llama.cpp
// and jitllm both load. Speed depends on shape and format, not on the values, so every benchmark
// of both engines reads the same such file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/types.h"

namespace jitllm {

struct SynthShape {
  std::string name;          // "llama-3.2-1b"
  std::string arch;          // GGUF general.architecture: llama, qwen2, qwen3
  int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
  float rope_base;
  bool tied;                 // no output.weight: the embedding is the output head
  bool qkv_bias;             // qwen2: biases on q/k/v
  bool qk_norm;              // qwen3: RMSNorm on q and k per head
};

// The known shapes (tiny, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, qwen2.5-7b, qwen3-8b).
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

// Writes the synthetic GGUF. Returns the bytes of tensor data written.
uint64_t write_synth_model(const std::string& path, const std::string& shape,
                           const std::string& mix, uint64_t seed);

}  // namespace jitllm
