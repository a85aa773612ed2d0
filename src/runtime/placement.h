// Placement: which device runs each block of a model. Pure arithmetic (byte costs and per-card
// room in, a device per block out), so every rule is tested without a card; the Engine measures
// the costs and the cards' free memory and builds the per-layer Ops route from the result.
//
// Rules (llama.cpp's `--split-mode layer` with `-ngl` chosen for you):
//  - Units in graph order: layer 0 .. layer n-1, then the head (output norm + output matrix +
//    its logits buffer). Cards are offered units in their speed order (the order of --devices):
//    the first card takes units while they fit, then the next card, and whatever is left runs on
//    the host. Runs stay contiguous (a device never gets a second run), so the residual crosses
//    between devices at most once per card.
//  - So the head follows the last layer's device when it fits there: the head is read on every
//    token (for the 8B Q4_K_M it is 9% of the bytes), and on the card of the last layer it costs
//    no extra crossing. When it does not fit it goes to the next card, else to the host.
//  - The token embedding is a lookup (one row per token, no bandwidth to speak of): it goes with
//    layer 0's card only from the room left after the layers and the head (so it never pushes a
//    layer off a card), and costs nothing there when the head on that card is the same (tied)
//    table. Otherwise the host looks the rows up and the residual crosses to layer 0's device.
//  - Room on a card = min(free memory - reserve, --vram-budget) - scratch; a unit costs its
//    weights as the card stores them plus, for a layer, its KV for the planned context.
//  - --gpu-layers N (llama.cpp's -ngl) caps the layers on the cards: layers N.. and the head run
//    on the host even where they would fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace jitllm {

constexpr int kHostDevice = -1;

// One card offered to the planner, in speed order.
struct CardBudget {
  std::string name;             // "cuda:0"
  size_t free_bytes = 0;        // free device memory (cuMemGetInfo) after the context is made
  std::optional<size_t> budget;  // --vram-budget for this card, if any
};

// Byte costs of the units on a card.
struct PlacementCosts {
  std::vector<size_t> layer_weights;  // [n_layer] weights (and norms) of each layer
  size_t layer_kv = 0;                // one layer's K and V for the planned context
  int64_t kv_tokens = 0;              // the planned context (for the table)
  size_t embedding = 0;               // the token embedding table
  size_t head = 0;                    // output norm + output matrix + logits buffer
  bool tied = false;                  // the output matrix is the embedding table (one copy)
  size_t scratch = 0;                 // per card: activations, quantized copies, GEMM slices
  size_t reserve = 0;                 // per card: left free for the driver and other processes
  int max_card_layers = -1;           // --gpu-layers: at most this many layers on cards (-1: any)
};

// What one device holds; the host is the last entry of Placement::devices.
struct DevicePlan {
  std::string name;
  int first_layer = 0, n_layers = 0;  // a contiguous run (n_layers 0: none)
  bool embedding = false, head = false;
  size_t weight_bytes = 0, kv_bytes = 0;
  size_t room = 0;        // cards: what units may use (see the rules above)
  size_t uses = 0;        // cards: weights + KV + scratch (the smallest budget for this plan)
  size_t free_after = 0;  // cards: free memory left once weights, KV, scratch are in
};

struct Placement {
  std::vector<int> layer_device;  // [n_layer] card index or kHostDevice
  int embedding_device = kHostDevice;
  int head_device = kHostDevice;
  std::vector<DevicePlan> devices;  // [cards..., host]
  PlacementCosts costs;

  int n_layers_on_cards() const;
  // The table printed at load: one line per device, then a summary like llama.cpp's
  // "offloaded 20/33 layers to GPU".
  std::string table() const;
};

Placement plan_placement(const PlacementCosts& costs, std::span<const CardBudget> cards);

// A size as the budget flags take it ("6G", "512M", "1.5G", "6GB", "6GiB", plain bytes; K/M/G/T
// are powers of 1024): `part` of the flag's value `spec`. Throws jitllm::Error naming `flag`.
size_t parse_byte_size(const std::string& flag, const std::string& part, const std::string& spec);

// --vram-budget: "" (none), one size for every card ("6G", "512M", "1.5G", "6000000000",
// "64K"; K/M/G/T are powers of 1024) or one per card ("6G,4G"). Throws jitllm::Error naming the
// flag and the bad part.
std::vector<size_t> parse_vram_budget(const std::string& spec);
// Gives each of n_cards its budget: none, one for all, or exactly one per card.
std::vector<std::optional<size_t>> budgets_for_cards(const std::vector<size_t>& budgets,
                                                     size_t n_cards);

// --devices: "cpu", "cuda" (every visible card), "cuda:N", or a comma list ("cuda:1,cuda:0",
// "cuda:0,cpu"; cpu in a list only says the host takes the rest, which it always does). Returns
// the card ordinals in the given order; `all_cards` is set for "cuda". Throws jitllm::Error
// naming the flag and the bad entry.
struct DeviceList {
  std::vector<int> cards;
  bool all_cards = false;
};
DeviceList parse_devices(const std::string& spec);

}  // namespace jitllm
