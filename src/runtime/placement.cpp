// plan_placement and the --devices / --vram-budget parsers (rules in placement.h).
#include "runtime/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/error.h"

namespace jitllm {

namespace {

double mb(size_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t c = s.find(',', start);
    out.push_back(s.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

}  // namespace

int Placement::n_layers_on_cards() const {
  int n = 0;
  for (int d : layer_device) n += d != kHostDevice;
  return n;
}

Placement plan_placement(const PlacementCosts& costs, std::span<const CardBudget> cards) {
  Placement p;
  p.costs = costs;
  const int n_layer = int(costs.layer_weights.size());
  const int n_cards = int(cards.size());
  p.layer_device.assign(size_t(n_layer), kHostDevice);
  std::vector<size_t> room(static_cast<size_t>(n_cards), 0), used(room);
  for (int d = 0; d < n_cards; ++d) {
    const CardBudget& c = cards[size_t(d)];
    size_t r = c.free_bytes > costs.reserve ? c.free_bytes - costs.reserve : 0;
    if (c.budget) r = std::min(r, *c.budget);
    room[size_t(d)] = r > costs.scratch ? r - costs.scratch : 0;
  }
  // Units in graph order: layers, then the head. A card takes units while they fit; the first
  // unit that does not fit moves on to the next card (runs stay contiguous), and once the cards
  // are used up the rest runs on the host.
  int d = 0;
  auto place = [&](size_t cost) {
    while (d < n_cards && used[size_t(d)] + cost > room[size_t(d)]) ++d;
    if (d == n_cards) return kHostDevice;
    used[size_t(d)] += cost;
    return d;
  };
  for (int il = 0; il < n_layer; ++il) {
    if (costs.max_card_layers >= 0 && il >= costs.max_card_layers) d = n_cards;  // the rest: host
    p.layer_device[size_t(il)] = place(costs.layer_weights[size_t(il)] + costs.layer_kv);
  }
  p.head_device = place(costs.head);
  // The embedding only from what is left on layer 0's card (see placement.h).
  const int d0 = n_layer > 0 ? p.layer_device[0] : p.head_device;
  if (d0 != kHostDevice) {
    const size_t cost = costs.tied && p.head_device == d0 ? 0 : costs.embedding;
    if (used[size_t(d0)] + cost <= room[size_t(d0)]) {
      used[size_t(d0)] += cost;
      p.embedding_device = d0;
    }
  }

  // Per-device summary: cards in order, then the host.
  p.devices.resize(size_t(n_cards) + 1);
  for (int i = 0; i <= n_cards; ++i) {
    DevicePlan& dp = p.devices[size_t(i)];
    const int dev = i == n_cards ? kHostDevice : i;
    dp.name = i == n_cards ? "host" : cards[size_t(i)].name;
    dp.first_layer = -1;
    for (int il = 0; il < n_layer; ++il) {
      if (p.layer_device[size_t(il)] != dev) continue;
      if (dp.first_layer < 0) dp.first_layer = il;
      ++dp.n_layers;
      dp.weight_bytes += costs.layer_weights[size_t(il)];
      dp.kv_bytes += costs.layer_kv;
    }
    if (dp.first_layer < 0) dp.first_layer = 0;
    dp.head = p.head_device == dev;
    dp.embedding = p.embedding_device == dev;
    if (dp.head) dp.weight_bytes += costs.head;
    if (dp.embedding && !(costs.tied && dp.head)) dp.weight_bytes += costs.embedding;
    if (dev != kHostDevice) {
      dp.room = room[size_t(i)];
      dp.uses = dp.weight_bytes + dp.kv_bytes + costs.scratch;
      const size_t free = cards[size_t(i)].free_bytes;
      dp.free_after = free > dp.uses ? free - dp.uses : 0;
    }
  }
  return p;
}

std::string Placement::table() const {
  std::string s = fmt::format(
      "placement (context {} tokens; per card: scratch {:.1f} MB, reserve {:.0f} MB):\n",
      costs.kv_tokens, mb(costs.scratch), mb(costs.reserve));
  // The unit costs, so a budget for a given split can be worked out: scratch + k x layer.
  size_t widest = 0;
  for (size_t w : costs.layer_weights) widest = std::max(widest, w);
  s += fmt::format(
      "  unit costs: layer {:.1f} MB + KV {:.1f} MB, head {:.1f} MB, embedding {:.1f} MB{}\n",
      mb(widest), mb(costs.layer_kv), mb(costs.head), mb(costs.embedding),
      costs.tied ? " (the head's table)" : "");
  s += fmt::format("  {:<8} {:>9} {:>5} {:>5} {:>11} {:>9} {:>10} {:>9} {:>14}\n", "device",
                   "layers", "embd", "head", "weights MB", "KV MB", "room MB", "uses MB",
                   "free after MB");
  for (size_t i = 0; i < devices.size(); ++i) {
    const DevicePlan& d = devices[i];
    const bool host = i + 1 == devices.size();
    const std::string layers =
        d.n_layers == 0 ? "-"
                        : fmt::format("{}-{}", d.first_layer, d.first_layer + d.n_layers - 1);
    auto card_mb = [&](size_t b) { return host ? std::string("-") : fmt::format("{:.0f}", mb(b)); };
    s += fmt::format("  {:<8} {:>9} {:>5} {:>5} {:>11.1f} {:>9.1f} {:>10} {:>9} {:>14}\n", d.name,
                     layers, d.embedding ? "yes" : "-", d.head ? "yes" : "-", mb(d.weight_bytes),
                     mb(d.kv_bytes), card_mb(d.room), card_mb(d.uses), card_mb(d.free_after));
  }
  const int on = n_layers_on_cards();
  const int total = int(layer_device.size()) + 1;  // + the head, as llama.cpp counts its output
  s += fmt::format("  offloaded {}/{} layers to the cards ({} layers + {}), {} on the host\n",
                   on + (head_device != kHostDevice), total, on,
                   head_device != kHostDevice ? "the head" : "no head",
                   int(layer_device.size()) - on + (head_device == kHostDevice));
  return s;
}

size_t parse_byte_size(const std::string& flag, const std::string& part, const std::string& spec) {
  if (part.empty()) throw_error("{} '{}': an empty size (use e.g. 6G)", flag, spec);
  size_t digits = 0;
  while (digits < part.size() && (std::isdigit(static_cast<unsigned char>(part[digits])) ||
                                  part[digits] == '.'))
    ++digits;
  const std::string number = part.substr(0, digits);
  std::string unit = part.substr(digits);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1)
    throw_error("{} '{}': '{}' is not a size (use e.g. 6G, 512M or 6000000000)", flag,
                spec, part);
  if (unit.size() == 2 && (unit[1] == 'B' || unit[1] == 'b')) unit.pop_back();  // "6GB"
  if (unit == "iB" || unit.size() == 3) unit = unit.substr(0, 1);                 // "6GiB"
  double scale = 1;
  if (unit.empty() || unit == "B" || unit == "b") scale = 1;
  else if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw_error("{} '{}': unknown unit in '{}' (K, M, G or T)", flag, spec, part);
  errno = 0;
  const double v = std::strtod(number.c_str(), nullptr) * scale;
  if (errno != 0 || !std::isfinite(v) || v >= 1.8e19)
    throw_error("{} '{}': '{}' is out of range", flag, spec, part);
  return size_t(v);
}

std::vector<size_t> parse_vram_budget(const std::string& spec) {
  std::vector<size_t> out;
  if (spec.empty()) return out;
  for (const std::string& part : split_commas(spec))
    out.push_back(parse_byte_size("--vram-budget", part, spec));
  return out;
}

std::vector<std::optional<size_t>> budgets_for_cards(const std::vector<size_t>& budgets,
                                                     size_t n_cards) {
  std::vector<std::optional<size_t>> out(n_cards);
  if (budgets.empty()) return out;
  if (budgets.size() != 1 && budgets.size() != n_cards)
    throw_error("--vram-budget: {} sizes for {} cards (give one for every card, or one per card)",
                budgets.size(), n_cards);
  for (size_t i = 0; i < n_cards; ++i) out[i] = budgets.size() == 1 ? budgets[0] : budgets[i];
  return out;
}

DeviceList parse_devices(const std::string& spec) {
  DeviceList out;
  if (spec.empty() || spec == "cpu") return out;
  std::set<int> seen;
  for (const std::string& e : split_commas(spec)) {
    if (e == "cpu") continue;
    if (e == "cuda") {
      if (spec != "cuda")
        throw_error("--devices {}: 'cuda' (every card) cannot be mixed with a list; name the "
                    "cards (cuda:0,cuda:1)", spec);
      out.all_cards = true;
      continue;
    }
    const bool digits = e.size() > 5 && e.size() < 9 && e.rfind("cuda:", 0) == 0 &&
                        e.find_first_not_of("0123456789", 5) == std::string::npos;
    if (!digits)
      throw_error("--devices {}: unknown device '{}' (use cpu, cuda, cuda:N or a list such as "
                  "cuda:0,cuda:1)", spec, e);
    const int ordinal = std::stoi(e.substr(5));
    if (!seen.insert(ordinal).second)
      throw_error("--devices {}: card '{}' is listed twice", spec, e);
    out.cards.push_back(ordinal);
  }
  return out;
}

}  // namespace jitllm
