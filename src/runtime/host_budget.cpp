// --host-budget: what the machine can spare, and the plan of a model's weights under a budget.
#include "runtime/host_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "io/jlm_format.h"
#include "backend/cpu/reference_kernels.h"
#include "model/model.h"
#include "quant/quant.h"
#include "runtime/placement.h"

namespace jitllm {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The limit file of this process's memory cgroup: v2 (one hierarchy, "0::/path") or v1 (the
// "memory" controller's line); empty when neither is mounted.
std::string cgroup_limit_text() {
  std::istringstream lines(read_text("/proc/self/cgroup"));
  std::string line, v1, v2;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) v2 = path;
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == "memory") v1 = path;
  }
  if (!v1.empty()) {
    std::string text = read_text("/sys/fs/cgroup/memory" + v1 + "/memory.limit_in_bytes");
    if (text.empty()) text = read_text("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    if (!text.empty()) return text;
  }
  if (!v2.empty()) return read_text("/sys/fs/cgroup" + v2 + "/memory.max");
  return {};
}

std::string gib(uint64_t bytes) {
  if (bytes < (uint64_t(1) << 30)) return fmt::format("{:.1f} MiB", double(bytes) / double(1ull << 20));
  return fmt::format("{:.2f} GiB", double(bytes) / double(1ull << 30));
}

}  // namespace

uint64_t parse_mem_available(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("MemAvailable:")) continue;
    return std::strtoull(line.c_str() + 13, nullptr, 10) * 1024;  // kB
  }
  return 0;
}

uint64_t parse_cgroup_limit(const std::string& text) {
  if (text.empty() || text.starts_with("max")) return 0;
  const uint64_t v = std::strtoull(text.c_str(), nullptr, 10);
  // cgroup v1 says "no limit" with the largest page-aligned signed 64-bit value.
  return v >= (uint64_t(1) << 62) ? 0 : v;
}

HostMemoryFacts read_host_memory() {
  return {parse_mem_available(read_text("/proc/meminfo")), parse_cgroup_limit(cgroup_limit_text())};
}

uint64_t default_host_budget(const HostMemoryFacts& f) {
  uint64_t spare = f.mem_available;
  if (f.cgroup_limit > 0) spare = spare > 0 ? std::min(spare, f.cgroup_limit) : f.cgroup_limit;
  return spare / 10 * 9;
}

uint64_t resolve_host_budget(const std::string& spec) {
  if (spec.empty()) return default_host_budget(read_host_memory());
  const uint64_t b = parse_byte_size("--host-budget", spec, spec);
  if (b == 0) throw_error("--host-budget '{}': the budget must be more than nothing", spec);
  return b;
}

uint64_t host_overhead_bytes(const Model& model, int64_t n_batch) {
  const Config& c = model.config();
  const int64_t ff = std::max({c.n_ff, c.n_ff_exp * std::max(1, c.n_expert_used), c.n_ff_shexp});
  // A step's activations: a dozen rows of n_embd and three of the FFN's width per token, f32.
  const uint64_t scratch = uint64_t(std::max<int64_t>(n_batch, 1)) * uint64_t(16 * c.n_embd + 4 * ff) * 4;
  return (uint64_t(256) << 20) + scratch;
}

std::string HostPlan::describe() const {
  if (!paged)
    return fmt::format("host budget {}: weights {} (with {} of decode copies) and KV {} resident",
                       gib(budget), gib(dense_bytes + expert_bytes + expert_copies),
                       gib(dense_copies + expert_copies), gib(kv_bytes));
  return fmt::format(
      "host budget {}: dense weights {} (with {} of decode copies) and KV {} resident; experts {} "
      "paged from disk through a cache of {} of {} experts ({}, {:.0f}%)",
      gib(budget), gib(dense_bytes), gib(dense_copies), gib(kv_bytes), gib(expert_bytes), slots, experts,
      gib(uint64_t(slots) * slot_bytes), 100.0 * double(slots) / double(std::max<int64_t>(experts, 1)));
}

HostPlan plan_host_memory(const Model& model, const CpuKernels& kernels, uint64_t budget,
                          uint64_t kv_bytes, int64_t n_batch) {
  HostPlan p;
  p.budget = budget;
  p.kv_bytes = kv_bytes;
  p.overhead = host_overhead_bytes(model, n_batch);
  // One expert's pages as a .jlm keeps them: each split tensor's slice 64-byte aligned, the
  // group padded to whole pages; the largest layer's.
  std::unordered_map<int32_t, uint64_t> per_layer;
  for (const TensorInfo& t : model.file().tensors) {
    const JlmPlacement at = jlm_place_tensor(t.name, t.shape.size());
    if (!at.split_experts) {
      p.dense_bytes += t.bytes;
      // Tables only looked up (an embedding not tied to the head) get no copy.
      const bool lookup = at.kind == JlmGroupKind::Embedding &&
                          !(t.name == "token_embd.weight" && model.weights().tied_embeddings);
      if (!lookup && t.shape.size() >= 2 && t.rows() > 1 &&
          !kernels.prefill_reads_prepared(t.type, t.row_length()))
        p.dense_copies += t.bytes;
      continue;
    }
    p.expert_bytes += t.bytes;
    if (!kernels.prefill_reads_prepared(t.type, t.row_length())) p.expert_copies += t.bytes;
    per_layer[at.block] += jlm_align_up(t.bytes / uint64_t(t.shape.back()), kJlmTensorAlignment);
  }
  const Config& c = model.config();
  for (const auto& [block, bytes] : per_layer) {
    p.slot_bytes = std::max(p.slot_bytes, jlm_align_up(bytes, kJlmPageBytes));
    p.experts += c.n_expert;
  }
  p.min_slots = c.n_expert_used;
  p.dense_bytes += p.dense_copies;
  const uint64_t fixed = p.dense_bytes + p.kv_bytes + p.overhead;
  if (fixed + p.expert_bytes + p.expert_copies <= budget) return p;
  if (p.experts == 0)
    throw_error("--host-budget {}: the model's weights ({}) with its KV ({}) and the engine's "
                "overhead ({}) need {}; only MoE experts are paged from disk (dense blocks are "
                "not): raise the budget to at least {}",
                gib(budget), gib(p.dense_bytes), gib(p.kv_bytes), gib(p.overhead), gib(fixed), gib(fixed));
  const uint64_t need = fixed + uint64_t(p.min_slots) * p.slot_bytes;
  if (budget < need)
    throw_error("--host-budget {}: the dense weights ({}), the KV ({}) and the engine's overhead "
                "({}) leave no room for one layer's {} experts of {} MiB each; this model needs "
                "at least {} (all resident: {})",
                gib(budget), gib(p.dense_bytes), gib(p.kv_bytes), gib(p.overhead), p.min_slots,
                p.slot_bytes >> 20, gib(need), gib(fixed + p.expert_bytes + p.expert_copies));
  p.paged = true;
  p.slots = std::min<int64_t>(p.experts, int64_t((budget - fixed) / p.slot_bytes));
  return p;
}

}  // namespace jitllm
