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
  double compile_ms = 0;    // wall time inside NVRTC
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

  const CompilerStats& stats() const { return stats_; }
  const Device& device() const { return device_; }
  const std::string& cache_dir() const { return dir_; }
  static std::string default_cache_dir();

 private:
  std::vector<char> compile(const std::string& source, const std::string& what);
  std::string key(const std::string& source) const;

  const Device& device_;
  std::string dir_;
  std::vector<std::string> options_;
  std::map<std::string, std::unique_ptr<Module>> loaded_;
  CompilerStats stats_;
};

}  // namespace jitllm::cuda
