// The llama architecture (Llama 1/2/3.x with llama3 rope scaling, Mistral, SmolLM2, TinyLlama):
// RMSNorm, RoPE (normal pairs for GGUF llama; the NeoX switch and partial rotary come from the
// Config), GQA attention, SwiGLU FFN, untied or tied output.
#pragma once

#include "model/dump.h"
#include "model/model.h"
#include "model/weights.h"

namespace jitllm {

class LlamaModel final : public Model {
 public:
  LlamaModel(std::shared_ptr<const ModelFile> file, Config config);
  using Model::forward;
  void forward(const OpsRoute& route, const Batch& batch, const KvLayout& kv, float* logits,
               int32_t* argmax = nullptr) override;
  const ModelWeights& weights() const { return weights_; }

 private:
  ModelWeights weights_;
  TensorDumper dump_;
  std::vector<float> crossing_;  // the residual stream on its way between devices [rows, n_embd]
};

}  // namespace jitllm
