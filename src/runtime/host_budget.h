// How much host memory a model may hold (--host-budget), and what it does with it: all weights
// resident, or the dense ones resident and the MoE experts paged from the .jlm through a cache
// (runtime/expert_cache.h). docs/paging.md describes the design.
#pragma once

#include <cstdint>
#include <string>

namespace jitllm {

class CpuKernels;
class Model;

// What the machine says it can spare: /proc/meminfo's MemAvailable and the limit of the memory
// cgroup this process runs in (v1 or v2; 0 when none is set).
struct HostMemoryFacts {
  uint64_t mem_available = 0;
  uint64_t cgroup_limit = 0;
};
HostMemoryFacts read_host_memory();
// Parsers for the two sources, for tests: /proc/meminfo's text -> MemAvailable in bytes (0 when
// absent); a cgroup limit file's text ("max", a number; v1 reports "no limit" as a number near
// 2^63) -> bytes (0: none).
uint64_t parse_mem_available(const std::string& meminfo);
uint64_t parse_cgroup_limit(const std::string& text);

// The default budget: nine tenths of the smaller of MemAvailable and the cgroup's limit (the rest
// is left to the page cache and the system).
uint64_t default_host_budget(const HostMemoryFacts& facts);

// --host-budget: "" (the default above), or a size ("6G", "512M", "1.5G", plain bytes; K/M/G/T
// are powers of 1024). Throws jitllm::Error naming the flag and the bad value.
uint64_t resolve_host_budget(const std::string& spec);

// Host memory the process needs beside weights and KV: the step's scratch for n_batch rows and a
// fixed part (code, tokenizer, allocator slack), measured in docs/paging.md.
uint64_t host_overhead_bytes(const Model& model, int64_t n_batch);

struct HostPlan {
  uint64_t budget = 0;
  uint64_t dense_bytes = 0;   // every tensor that is not a split MoE expert: always resident
  // The kernels' decode copies of dense matrices whose originals stay too (prompt steps read
  // the file's layout: CpuKernels::prefill_reads_prepared false), counted in dense_bytes.
  uint64_t dense_copies = 0;
  uint64_t expert_bytes = 0;  // every expert slice of every layer
  // Resident experts get decode copies too (CpuOps::moe_ffn makes a layer's at its first decode
  // step): the part of those whose originals stay. Paged experts get none.
  uint64_t expert_copies = 0;
  uint64_t kv_bytes = 0;      // the KV pages planned for
  uint64_t overhead = 0;      // host_overhead_bytes
  bool paged = false;         // the experts (and copies) do not fit beside the rest: paged
  uint64_t slot_bytes = 0;    // one expert's pages (the largest expert of any layer)
  int64_t slots = 0;          // experts the cache holds when paged
  int64_t experts = 0;        // experts in all layers
  int64_t min_slots = 0;      // experts one layer of a decode step runs (n_used)

  std::string describe() const;  // one line for stderr
};

// Plans `model` run by `kernels` under `budget` with `kv_bytes` of KV: paged when dense (with
// the decode copies that stay beside their originals) + experts + KV + overhead exceed it. Throws jitllm::Error with the number needed when even the dense weights, the KV
// and one layer's experts (n_used slots) do not fit; a model without experts that does not fit
// is refused too (dense blocks are not paged).
HostPlan plan_host_memory(const Model& model, const CpuKernels& kernels, uint64_t budget,
                          uint64_t kv_bytes, int64_t n_batch);

}  // namespace jitllm
