// A model family: everything that makes one architecture differ from another, in one table entry
// (model/registry.cpp) defined by one file (model/archs/<family>.cpp): the general.architecture
// names it serves, its own hyperparameters, the tensors of its layers, what each layer keeps per
// session, and its block graph over the shared builders (model/builder.h).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graph/kv.h"
#include "io/metadata.h"
#include "model/config.h"
#include "model/weights.h"

namespace jitllm {

class GraphBuilder;

struct Family {
  const char* name;                      // "llama"
  std::vector<std::string> archs;        // general.architecture values it serves
  // Family keys beyond the ones config_from_metadata reads for everyone, and checks of what the
  // family's graph cannot run (may be null).
  void (*read_hparams)(const Metadata& md, Config& c) = nullptr;
  std::vector<LayerTensor> layer_tensors;  // bound for every layer (model/weights.h)
  // What layer il keeps per session between steps (null: K and V of its own widths).
  LayerKv (*layer_memory)(const Config& c, int il) = nullptr;
  // The whole forward step: embedding, layers, output (see archs/llama.cpp).
  void (*build)(GraphBuilder& b) = nullptr;
  // Positions from a learned table (position_embd.weight, BERT) rather than RoPE.
  bool learned_positions = false;
  // A head that makes logits (output_norm, output or the tied embedding); false: an encoder,
  // whose steps give hidden states only (embeddings, a cross-encoder's scores).
  bool lm_head = true;
  // Some layers carry a recurrent state instead of attention (LFM2's convolutions): their
  // <arch>.attention.head_count_kv is 0.
  bool recurrent_layers = false;
  // The final norm's GGUF name (LFM2's files call it token_embd_norm.weight).
  const char* output_norm_name = "output_norm.weight";
};

// Throws naming <arch>.attention.value_length when V heads differ in size from K heads: every
// family's attention here takes equal sizes (archs/llama.cpp).
void require_equal_head_sizes(const Config& c);

// The llama family's layer tensors (archs/llama.cpp), which llama-shaped families extend.
std::vector<LayerTensor> llama_layer_tensors();

// The llama graph (archs/llama.cpp): blocks of attention and a gated FFN with residuals, each
// with the norms its layer binds (pre-norms, q/k norms, post-norms), shared by every family whose
// layers differ only in what they bind or in Config values.
void build_llama_graph(GraphBuilder& b);

// Qwen2's layers (llama's and the q/k/v biases) and Qwen3's (llama's and per-head q/k norms),
// which their MoE siblings extend.
std::vector<LayerTensor> qwen2_layer_tensors();
std::vector<LayerTensor> qwen3_layer_tensors();

// Gemma 2's layers (archs/gemma2.cpp): llama's and the post-attention / post-FFN norms, which
// gemma3 extends; and the attention scale of both (the file's <arch>.attention.scale, else
// llama.cpp's rule, whose exception is the model of n_layer_27b layers).
std::vector<LayerTensor> gemma2_layer_tensors();
void read_gemma_attention_scale(const Metadata& md, Config& c, int n_layer_27b);

// The family serving `arch`, or null.
const Family* find_family(const std::string& arch);
// Every family, in the table's order.
std::span<const Family* const> families();
// "llama (llama, mistral, ...), ..." for error messages and `jitllm info`.
std::string supported_architectures();

}  // namespace jitllm
