// Model: weights bound through the family's table, the step through its graph.
#include "model/model.h"

#include "core/error.h"
#include "model/builder.h"

namespace jitllm {

Model::Model(std::shared_ptr<const ModelFile> file, Config config)
    : file_(std::move(file)), config_(std::move(config)) {
  if (!config_.family) throw_error("architecture '{}' has no family", config_.arch);
  weights_ = bind_weights(*file_, config_, config_.family->layer_tensors);
}

LayerKv Model::layer_kv(int il) const {
  if (family().layer_memory) return family().layer_memory(config_, il);
  return LayerKv{config_.k_dim_of(il), config_.v_dim_of(il)};
}

KvLayout Model::kv_layout(int64_t page_tokens, QuantType type) const {
  KvLayout l;
  l.n_layer = config_.n_layer;
  l.kv_dim = config_.kv_dim();
  l.page_tokens = page_tokens;
  l.type = type;
  for (int il = 0; il < config_.n_layer; ++il) l.layers.push_back(layer_kv(il));
  if (l.uniform()) l.layers.clear();  // every layer kv_dim: the closed-form layout
  return l;
}

void Model::forward(const OpsRoute& route, const Batch& batch, const KvLayout& kv, float* logits,
                    int32_t* argmax, float* hidden, const LogitsPicks* picks) {
  if (batch.n_rows() == 0) return;
  GraphBuilder b(config_, weights_, route, batch, kv, dump_, crossing_);
  family().build(b);
  b.build_output(logits, argmax, hidden, picks);
}

std::unique_ptr<Model> create_model(std::shared_ptr<const ModelFile> file) {
  try {
    Config config = config_from_metadata(file->metadata);
    return std::make_unique<Model>(file, std::move(config));
  } catch (const Error& e) {
    rethrow_with_context(e, file->path);
  }
}

}  // namespace jitllm
