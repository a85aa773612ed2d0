// The gemma family (Gemma 1): the llama graph (archs/llama.cpp) with the token embeddings scaled
// by sqrt(n_embd), a GELU-tanh gated FFN (GeGLU), NEOX rotation, head size 256 of its own
// (attention.key_length) and tied embeddings. Gemma's RMSNorm multiplies by (1 + w): the
// converters (llama.cpp's and ours) store 1 + w, so the norms here are plain.
#include <cmath>

#include "core/error.h"
#include "model/family.h"

namespace jitllm {

namespace {

void read_gemma_hparams(const Metadata&, Config& c) {
  c.rope_mode = RopeMode::Neox;
  c.embd_scale = std::sqrt(float(c.n_embd));
  c.ffn_gelu = true;
  require_equal_head_sizes(c);
}

}  // namespace

extern const Family kGemmaFamily{
    .name = "gemma",
    .archs = {"gemma"},
    .read_hparams = read_gemma_hparams,
    .layer_tensors = llama_layer_tensors(),
    .build = build_llama_graph,  // embd_scale and ffn_gelu come with the Config (builder.h)
};

}  // namespace jitllm
