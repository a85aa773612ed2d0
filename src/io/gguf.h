// GGUF reader (versions 2 and 3) over a memory map. Every count, length, offset and dimension read
// from the file is checked against the file size before use: a truncated or hostile file gives a
// jitllm::Error naming the file, the byte offset and the field, never a crash or a huge allocation.
// Split models ("name-00001-of-00003.gguf") are opened from their first part.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "io/metadata.h"
#include "io/tensor_info.h"

namespace jitllm {

class GgufFile {
 public:
  // Opens and validates the whole header and tensor table. For the first part of a split model,
  // the other parts are opened too and their tensors merged (their `data` points into them).
  static GgufFile open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // throws naming the tensor
  size_t alignment() const { return alignment_; }
  size_t file_bytes() const;  // all parts together
  int split_count() const { return int(parts_.size()); }

 private:
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<std::shared_ptr<MappedFile>> parts_;
};

// Parses GGUF from memory (used by open(), the fuzz target and hostile-input tests). `name` is
// used in error messages. The returned tensors' `data` point into `bytes`.
struct GgufParsed {
  uint32_t version = 0;
  size_t alignment = 32;
  Metadata metadata;
  std::vector<TensorInfo> tensors;
  size_t data_offset = 0;  // start of the data section in `bytes`
};
GgufParsed parse_gguf(const uint8_t* bytes, size_t size, const std::string& name);

// Writes a GGUF v3 file (used by `jitllm synth`, tests and tools). Tensor data is copied from each
// TensorInfo's `data`; offsets are assigned here with the given alignment.
void write_gguf(const std::string& path, const Metadata& metadata,
                const std::vector<TensorInfo>& tensors, size_t alignment = 32);

}  // namespace jitllm
