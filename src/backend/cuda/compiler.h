// NVRTC compilation of generated CUDA C++ into cubins for the device's own sm_XX, with a cubin
// cache on disk ($XDG_CACHE_HOME/jitllm/cuda/, else ~/.cache/jitllm/cuda/) keyed by device
// UUID, driver version, NVRTC version, generator version, options and source hash, so a second
// process on the same card compiles nothing. Modules are also kept in memory by key.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device.h"

namespace jitllm::cuda {

// Bump when the generators change what a given source text means (e.g. launch conventions the
// host side assumes), so old cubins are not reused.
inline constexpr int kGeneratorVersion = 1;

struct CompilerStats {
  int64_t compiled = 0;     // NVRTC runs
  int64_t disk_hits = 0;    // cubins read from the cache directory
  int64_t memory_hits = 0;  // modules already loaded in this process
  double compile_ms = 0;    // time inside NVRTC, summed over the compiling threads
  double wait_ms = 0;       // wall time the caller waited for NVRTC
  int64_t unused_failed = 0;  // siblings that did not compile (load_together's optional ones)
};

// One generated source and the name errors give it ("matvec q4_k k=2048").
struct KernelSource {
  std::string text;
  std::string what;
};

// NVRTC options for a target ("sm_90"), and one compile to a cubin; usable without a device
// (tests compile every generated source on machines with no GPU).
std::vector<std::string> nvrtc_options(const std::string& arch);
std::vector<char> nvrtc_compile(const std::string& source, const std::string& what,
                                const std::vector<std::string>& options);

// Modules compiled by NVRTC or read from the disk cache by every Compiler of this process so far
// (memory hits not counted). An engine that reports ready must not add to it while it serves its
// first prompt: the warm-up test checks exactly that.
int64_t modules_loaded_in_process();

class Compiler {
 public:
  // cache_dir empty: the default directory; "-": no disk cache.
  explicit Compiler(const Device& device, std::string cache_dir = {});

  // The loaded module for `source` (compiled, read from disk, or from memory). `what` names it
  // in errors ("matvec q4_k k=2048").
  const Module& module(const std::string& source, const std::string& what);

  // Loads `wanted` and its `siblings` (variants likely asked for soon) together: those neither in
  // memory nor in the disk cache compile at once, one thread each up to the hardware threads
  // (NVRTC compiles are independent), and load here, on the thread holding the context. Why: a
  // cold start asks for some eighty variants one at a time; the kernel families hand each first
  // request's siblings (the other tile sizes, epilogues) here, so a start waits for about one
  // compile per family and shape. A sibling that fails to compile is dropped (counted); the
  // wanted source's failure throws as module() does. Returns the wanted module.
  const Module& load_together(const KernelSource& wanted, const std::vector<KernelSource>& siblings);

  const CompilerStats& stats() const { return stats_; }
  const Device& device() const { return device_; }
  const std::string& cache_dir() const { return dir_; }
  static std::string default_cache_dir();

 private:
  std::vector<char> compile(const std::string& source, const std::string& what);
  std::string key(const std::string& source) const;
  std::string cache_path(const std::string& key) const;
  // The module of a cubin read from the disk cache, or null (none there, or a damaged file).
  std::unique_ptr<Module> from_disk(const std::string& key);
  const Module& keep(const std::string& key, std::unique_ptr<Module> m);

  const Device& device_;
  std::string dir_;
  std::vector<std::string> options_;
  std::map<std::string, std::unique_ptr<Module>> loaded_;
  CompilerStats stats_;
};

}  // namespace jitllm::cuda
