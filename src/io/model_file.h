// An opened model, whatever file it came from: metadata (GGUF key names) plus tensors viewing
// mapped bytes. The engine binds weights from this; the readers (GGUF, .jlm) produce it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/metadata.h"
#include "io/tensor_info.h"

namespace jitllm {

struct ModelFile {
  std::string path;
  std::string format;  // "gguf" | "jlm"
  Metadata metadata;
  std::vector<TensorInfo> tensors;
  std::shared_ptr<const void> owner;  // keeps the mapping(s) behind `tensors[i].data` alive
  // False when a .jlm with split MoE experts was opened without their checksums checked
  // (ModelFileOptions::verify_experts false, or verify_checksums false).
  bool experts_verified = true;
  // Whoever checks them later does so once for every engine sharing this file.
  std::shared_ptr<std::once_flag> experts_checked = std::make_shared<std::once_flag>();

  const TensorInfo* find(const std::string& name) const;
  const TensorInfo& get(const std::string& name) const;  // throws naming the tensor and file
};

struct ModelFileOptions {
  // .jlm: hash every tensor's data against its stored checksum before handing out views, and
  // refuse the file naming the damaged tensor (JlmFile::check_data). GGUF carries no checksums.
  bool verify_checksums = false;
  // With verify_checksums: the split MoE experts' slices too. False when they will be paged
  // from disk, each checked as it is read (runtime/expert_cache.h), so opening does not read
  // the whole file.
  bool verify_experts = true;
};

// Opens a .gguf (first part of a split set too) or a .jlm, by its magic bytes.
ModelFile open_model_file(const std::string& path, const ModelFileOptions& options = {});

}  // namespace jitllm
