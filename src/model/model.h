// A loaded model: its Config, bound weights and the architecture's block graph. `forward` runs
// one step of a ragged batch through the graph on any backend's Ops. Architectures register in
// create_model() (model.cpp); each lives in its own file (llama.cpp, ...).
#pragma once

#include <memory>
#include <string>

#include "io/model_file.h"
#include "model/config.h"
#include "model/ops.h"

namespace jitllm {

class Model {
 public:
  virtual ~Model() = default;
  const Config& config() const { return config_; }
  const ModelFile& file() const { return *file_; }

  // Runs `batch` (KV pages already allocated for every row's position) and writes the logits of
  // batch.out_rows to `logits` ([out_rows.size(), n_vocab]); with `argmax` set, it writes only
  // the greedy token of each of those rows there (Ops::argmax_rows) and leaves `logits` alone.
  // Each part of the graph runs on the backend `route` names for it (a split model: placement).
  virtual void forward(const OpsRoute& route, const Batch& batch, const KvLayout& kv,
                       float* logits, int32_t* argmax = nullptr) = 0;
  // Everything on one backend.
  void forward(Ops& ops, const Batch& batch, const KvLayout& kv, float* logits,
               int32_t* argmax = nullptr) {
    forward(OpsRoute::single(ops, config_.n_layer), batch, kv, logits, argmax);
  }

 protected:
  Model(std::shared_ptr<const ModelFile> file, Config config)
      : file_(std::move(file)), config_(std::move(config)) {}
  std::shared_ptr<const ModelFile> file_;
  Config config_;
};

// Reads the Config from the file's metadata, binds the weights and picks the architecture.
std::unique_ptr<Model> create_model(std::shared_ptr<const ModelFile> file);

}  // namespace jitllm
