// Resolving what `-m MODEL` names into an opened ModelFile: a .gguf or .jlm file (by magic), or
// nothing, which means the bundled default model (models/demo/ in the source tree, or
// $JITLLM_DEFAULT_MODEL). Errors say what was looked for and where.
#pragma once

#include <memory>
#include <string>

#include "io/model_file.h"

namespace jitllm {

// The key of an HF folder's cached conversion (<folder>-<key as 16 hex digits>.jlm in the cache):
// a 64-bit FNV-1a hash over every file's name, size, mtime and first 64 KiB.
uint64_t hf_folder_key(const std::string& folder);

// The default model's path (may not exist yet).
std::string default_model_path();

// Opens `path` (empty: the default model). Throws jitllm::Error with a clear message when the
// path does not exist or is a format this build cannot load yet. A .jlm's checksums are
// verified, but its MoE experts' (ModelFile::experts_verified false): the Engine checks those
// once it knows whether they stay resident or are paged (each then checked as it is read).
std::shared_ptr<const ModelFile> load_model_file(const std::string& path);

// The .jlm the experts of the GGUF at `path` are paged from: converted once into the model
// cache (<stem>-<key>.jlm, key over the file's path, size, mtime and first 64 KiB; progress on
// stderr) and opened with every checksum verified but the experts' (the expert cache checks
// each as it reads it).
std::shared_ptr<const ModelFile> paged_container(const std::string& path);

}  // namespace jitllm
