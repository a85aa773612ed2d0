// make_backends / card_costs: the devices of one Engine and where each block runs.
#include "runtime/backends.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "runtime/cpu_kernels.h"
#include "runtime/engine.h"
#include "quant/types.h"
#ifdef JITLLM_HAVE_CUDA
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/device.h"
#include "backend/cuda/packed_weight.h"
#endif

namespace jitllm {

namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Bytes a tensor takes on a card: formats without a kernel of their own are stored as F16
// (packed_weight.h); the repacked layouts (Q8_0, Q6_K) keep the file's size.
size_t card_bytes(const TensorInfo& t) {
#ifdef JITLLM_HAVE_CUDA
  if (t.shape.size() >= 2 && t.type != QuantType::F16 &&
      cuda::cuda_kind_for(t.type) == cuda::WeightKind::F16)
    return size_t(t.elements()) * 2;
#endif
  if (t.type != QuantType::F32 && t.shape.size() < 2) return size_t(t.elements()) * 4;  // norms
  return t.bytes;
}

int64_t planned_kv_tokens(const Config& c, const EngineOptions& o) {
  if (o.kv_tokens > 0) return o.kv_tokens;
  if (o.max_kv_pages > 0) return int64_t(o.max_kv_pages) * o.kv_page_tokens;
  return c.n_ctx_train > 0 ? c.n_ctx_train : 4096;
}

}  // namespace

PlacementCosts card_costs(const Model& model, const EngineOptions& o) {
  const Config& c = model.config();
  const ModelWeights& w = model.weights();
  PlacementCosts k;
  // The tensors the family bound (model/weights.h), as the card stores them.
  k.layer_weights.assign(size_t(c.n_layer), 0);
  for (int il = 0; il < c.n_layer; ++il)
    for (const TensorInfo* t : w.layer_tensors[size_t(il)]) k.layer_weights[size_t(il)] += card_bytes(*t);
  k.tied = w.tied_embeddings;
  k.embedding = card_bytes(*w.token_embd);
  for (const TensorInfo* t : w.head_tensors) k.head += card_bytes(*t);
  if (k.tied) k.head += k.embedding;
  // Round the planned context up to whole pages, as sessions take them.
  const int64_t pages = (planned_kv_tokens(c, o) + o.kv_page_tokens - 1) / o.kv_page_tokens;
  k.kv_tokens = pages * o.kv_page_tokens;
  // The widest layer's K and V (placement plans one KV size for every layer).
  const size_t elem = o.kv_type == QuantType::F16 ? 2 : 4;
  size_t kv_row = 0;
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerKv l = model.layer_kv(il);
    kv_row = std::max(kv_row, size_t(l.k_dim + l.v_dim));
  }
  k.layer_kv = kv_row * elem * size_t(k.kv_tokens);
  // Scratch of a step of n_batch rows (padded to the 32-row matvec tile): the graph's eight
  // activations, their int8 copies, and the prefill GEMM's f16 operands (a 128 MiB weight slice
  // and the activation); the logits of a whole batch count with the head.
  const size_t rows = size_t((std::max<int64_t>(o.n_batch, 1) + 31) / 32 * 32);
  const size_t widest = size_t(std::max({c.n_embd, c.q_dim(), c.n_ff}));
  const size_t acts =
      rows * size_t(2 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.n_ff) * sizeof(float);
  k.scratch = acts + rows * widest * 2 + 128 * kMiB + rows * widest * 2 + 64 * kMiB;
  k.head += rows * size_t(c.n_vocab) * sizeof(float);
  k.reserve = o.vram_reserve;
  k.max_card_layers = o.gpu_layers;
  return k;
}

Backends make_backends(const Model& model, const EngineOptions& o) {
  Backends b;
  const int n_layer = model.config().n_layer;
  const DeviceList list = parse_devices(o.devices);
  const std::vector<size_t> budgets = parse_vram_budget(o.vram_budget);
  const CpuKernels& kernels = resolve_cpu_kernels(o.cpu_kernels, o.batch_invariant);
  b.cpu_kernels_name = kernels.name();
  b.owned.push_back(std::make_unique<CpuOps>(kernels));
  Ops* host = b.owned[0].get();
  if (list.cards.empty() && !list.all_cards) {
    if (!budgets.empty() && o.print_placement)
      std::fprintf(stderr, "jitllm: --vram-budget is ignored with --devices %s (no card)\n",
                   o.devices.c_str());
    b.route = OpsRoute::single(*host, n_layer);
    b.placement = plan_placement(PlacementCosts{std::vector<size_t>(size_t(n_layer), 0)}, {});
    return b;
  }
  b.cards = true;
#ifndef JITLLM_HAVE_CUDA
  throw_error("--devices {}: this build has no CUDA backend (the CUDA toolkit was not found when "
              "it was built); use --devices cpu", o.devices);
#else
  std::string why;
  if (!cuda::available(&why)) throw_error("--devices {}: no usable CUDA device: {}", o.devices, why);
  std::vector<int> ordinals = list.cards;
  const int visible = cuda::Device::count();
  if (list.all_cards)
    for (int i = 0; i < visible; ++i) ordinals.push_back(i);
  for (int ord : ordinals)
    if (ord >= visible)
      throw_error("--devices {}: there is no card cuda:{} ({} visible)", o.devices, ord, visible);
  const std::vector<std::optional<size_t>> caps = budgets_for_cards(budgets, ordinals.size());
  std::vector<cuda::CudaOps*> cards;
  std::vector<CardBudget> offered;
  for (size_t i = 0; i < ordinals.size(); ++i) {
    auto ops = std::make_unique<cuda::CudaOps>(ordinals[i]);
    ops->enter();
    offered.push_back(CardBudget{fmt::format("cuda:{}", ordinals[i]), ops->device().free_memory(),
                                 caps[i]});
    cards.push_back(ops.get());
    b.owned.push_back(std::move(ops));
  }
  b.placement = plan_placement(card_costs(model, o), offered);
  const Placement& p = b.placement;
  auto ops_of = [&](int d) -> Ops* { return d == kHostDevice ? host : cards[size_t(d)]; };
  b.route.embed = ops_of(p.embedding_device);
  b.route.head = ops_of(p.head_device);
  for (int il = 0; il < n_layer; ++il) b.route.layers.push_back(ops_of(p.layer_device[size_t(il)]));
  for (size_t d = 0; d < cards.size(); ++d)
    cards[d]->set_kv_layers(p.devices[d].first_layer, p.devices[d].n_layers);
  if (o.print_placement) std::fprintf(stderr, "%s", p.table().c_str());
  return b;
#endif
}

}  // namespace jitllm
