// Backends of one Engine: the host Ops, one CudaOps per card that --devices names, the
// placement of the model's blocks over them (placement.h: the costs measured here from the
// model file and the cards' free memory) and the per-layer OpsRoute the graph runs on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/placement.h"

namespace jitllm {

struct EngineOptions;

struct Backends {
  std::vector<std::unique_ptr<Ops>> owned;  // [0] the host, then one per card in --devices order
  OpsRoute route;
  Placement placement;
  bool cards = false;  // at least one card was asked for (the placement table means something)
  const char* cpu_kernels_name = "";  // what EngineOptions::cpu_kernels resolved to
};

// Throws jitllm::Error naming the flag for a bad --kernels / --devices / --vram-budget, a build
// without CUDA asked for a card, or a machine without a usable card.
Backends make_backends(const Model& model, const EngineOptions& options);

// The costs placement.h plans with for this model on a card: each layer's weights (as the card
// stores them) and KV for `kv_tokens` positions, the embedding, the head with its logits, and
// per-card scratch for steps of `n_batch` rows. Pure (no card needed): tests use it to pick
// budgets that fit exactly k layers.
PlacementCosts card_costs(const Model& model, const EngineOptions& options);

}  // namespace jitllm
