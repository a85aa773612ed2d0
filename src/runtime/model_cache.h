// What is in jitllm's cache (core/cache_dir.h) and its removal: the conversions of Hugging Face
// folders the loader made (<folder>-<key>.jlm), each with its source and whether the source still
// matches it; the CUDA kernel cache (cuda/); temporaries of conversions that died. Behind
// `jitllm models` and `jitllm cache clean`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitllm {

struct CachedModel {
  enum class State {
    Current,     // the source folder is there and unchanged: the loader uses this file
    Stale,       // the source changed since: the loader converts again, this file is unused
    SourceGone,  // the source folder is not there any more
    Unreadable,  // not a .jlm that opens (damaged): the loader would convert again
    Unknown,     // could not be checked now (no permission, too many files open): kept by --stale
  };
  std::string path;  // the .jlm in the cache
  uint64_t bytes = 0;
  std::string source;  // the folder it was converted from (its provenance), "" if unreadable
  std::string architecture, name;  // general.architecture / general.name
  int64_t modified_s = 0;          // when it was written (Unix seconds)
  State state = State::Unreadable;
};
const char* cached_model_state_name(CachedModel::State state);

struct CacheContents {
  std::string dir;                  // "" when there is no cache directory to look in
  std::vector<CachedModel> models;  // by path
  uint64_t kernel_files = 0, kernel_bytes = 0;       // under cuda/
  std::vector<std::string> temporaries;              // *.jlm.tmp.*: conversions writing, or dead
  // (clean removes those idle for a day, as the loader does)
  uint64_t temporary_bytes = 0;
};

CacheContents list_cache();

struct CleanOptions {
  bool models = true, kernels = true;  // what to remove
  bool stale_only = false;             // only conversions that are not Current (and temporaries)
  bool dry_run = false;                // say what would go, remove nothing
};

struct CleanResult {
  std::vector<std::string> removed;  // paths (files, or the kernel directory)
  uint64_t bytes = 0;
};

// Removes what `options` selects; a file it cannot remove, or no cache directory (neither
// XDG_CACHE_HOME nor HOME set), is an error naming it.
CleanResult clean_cache(const CleanOptions& options);

}  // namespace jitllm
