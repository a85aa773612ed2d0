// Weights of a llama-family model bound as views onto an opened model file (no copies of the
// matrices; the small 1-D norm vectors are converted to f32 and owned). Binding checks every
// tensor's presence, format and shape against the Config and names the tensor when one is off:
// "blk.1.attn_k.weight: expected [256, 128], got [256, 256]".
#pragma once

#include <string>
#include <vector>

#include "io/model_file.h"
#include "model/config.h"

namespace jitllm {

struct LayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  const TensorInfo* wq = nullptr;   // [n_embd, q_dim]   (ne order: row length first)
  const TensorInfo* wk = nullptr;   // [n_embd, kv_dim]
  const TensorInfo* wv = nullptr;   // [n_embd, kv_dim]
  const TensorInfo* wo = nullptr;   // [q_dim, n_embd]
  std::vector<float> ffn_norm;   // [n_embd]
  const TensorInfo* ffn_gate = nullptr;  // [n_embd, n_ff]
  const TensorInfo* ffn_up = nullptr;    // [n_embd, n_ff]
  const TensorInfo* ffn_down = nullptr;  // [n_ff, n_embd]
};

struct ModelWeights {
  const TensorInfo* token_embd = nullptr;  // [n_embd, n_vocab]
  std::vector<float> output_norm;          // [n_embd]
  const TensorInfo* output = nullptr;      // [n_embd, n_vocab]; == token_embd when tied
  bool tied_embeddings = false;
  std::vector<LayerWeights> layers;
};

// Binds the llama-family tensors of `file`. Completes `config` from the tensors where metadata
// left a gap (n_vocab from token_embd; llama3 rope factors from rope_freqs.weight).
ModelWeights bind_llama_weights(const ModelFile& file, Config& config);

}  // namespace jitllm
