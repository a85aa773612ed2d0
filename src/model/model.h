// A loaded model: its Config, bound weights and family (model/family.h). `forward` runs one step
// of a ragged batch through the family's graph on any backend's Ops. Families register in
// model/registry.cpp; each lives in its own file under model/archs/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/ops.h"
#include "io/model_file.h"
#include "model/config.h"
#include "model/dump.h"
#include "model/family.h"
#include "model/weights.h"

namespace jitllm {

class Model {
 public:
  // Binds the family's weights (completing `config` from the tensors).
  Model(std::shared_ptr<const ModelFile> file, Config config);

  const Config& config() const { return config_; }
  const ModelFile& file() const { return *file_; }
  const Family& family() const { return *config_.family; }
  const ModelWeights& weights() const { return weights_; }

  // What layer il keeps per session, and the KV page layout of every layer for the runtime's
  // page pool.
  LayerKv layer_kv(int il) const;
  KvLayout kv_layout(int64_t page_tokens, QuantType type) const;

  // Runs `batch` (KV pages already allocated for every row's position) and writes the logits of
  // batch.out_rows to `logits` ([out_rows.size(), n_vocab]); with `argmax` set, it writes only
  // the greedy token of each of those rows there (Ops::argmax_rows) and leaves `logits` alone.
  // With `picks` set, it writes what each output row's pick asks for to picks->out instead
  // (Ops::pick_logits: a sampler's candidates) and leaves `logits` alone.
  // With no out_rows the step only stores every row's KV (a prefill chunk).
  // Each part of the graph runs on the backend `route` names for it (a split model: placement).
  // With `hidden` set, it writes the output rows' final hidden states there instead
  // ([out_rows.size(), n_embd], after the output norm where the family has one): embeddings.
  void forward(const OpsRoute& route, const Batch& batch, const KvLayout& kv, float* logits,
               int32_t* argmax = nullptr, float* hidden = nullptr,
               const LogitsPicks* picks = nullptr);
  // Steps run while paused write no JITLLM_DUMP tensors (Engine's warm-up).
  void pause_dump(bool paused) { dump_.pause(paused); }
  // From now on every MoE layer's experts come from `pages` (runtime/expert_cache.h), which
  // must outlive the model's steps; null: the resident views again.
  void page_experts(ExpertPages* pages) { weights_.expert_pages = pages; }

  // Everything on one backend.
  void forward(Ops& ops, const Batch& batch, const KvLayout& kv, float* logits,
               int32_t* argmax = nullptr, float* hidden = nullptr) {
    forward(OpsRoute::single(ops, config_.n_layer), batch, kv, logits, argmax, hidden);
  }

 private:
  std::shared_ptr<const ModelFile> file_;
  Config config_;
  ModelWeights weights_;
  TensorDumper dump_;
  std::vector<float> crossing_;  // the residual stream on its way between devices [rows, n_embd]
};

// Reads the Config from the file's metadata, finds the family and binds the weights.
std::unique_ptr<Model> create_model(std::shared_ptr<const ModelFile> file);

}  // namespace jitllm
