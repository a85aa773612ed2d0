// Writes a .jlm container (layout in jlm_format.h). The whole layout is planned from the tensor
// list before any data is written, so tensors can be streamed one at a time, in any order, straight
// from a source mapping: peak memory is whatever the caller holds for one tensor. Data goes to a
// temporary file of this writer's own beside <path> ("<path>.tmp.XXXXXX", core/temp_file.h);
// commit() writes the tables and checksums, fsyncs and renames it to <path>, so writers of one
// path never mix their bytes (the last commit wins, whole). A writer destroyed without commit()
// (an exception, a cancelled convert) removes its temporary file, so an interrupted conversion
// leaves nothing at <path>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/jlm_format.h"
#include "io/metadata.h"
#include "quant/types.h"

namespace jitllm {

struct JlmTensorSpec {
  std::string name;
  QuantType type = QuantType::F32;
  std::vector<int64_t> shape;  // GGUF ne order
};

class JlmWriter {
 public:
  // `metadata`: the model's (GGUF keys); `source`: provenance ("source.*", "convert.*" keys).
  // Throws jitllm::Error naming the tensor for a bad shape, a duplicate name, or expert tensors of
  // one block that disagree on the expert count.
  JlmWriter(std::string path, const Metadata& metadata, const Metadata& source,
            const std::vector<JlmTensorSpec>& tensors);
  ~JlmWriter();
  JlmWriter(const JlmWriter&) = delete;
  JlmWriter& operator=(const JlmWriter&) = delete;

  const std::vector<JlmTensor>& tensors() const { return tensors_; }  // same order as the specs
  const std::vector<JlmGroup>& groups() const { return groups_; }
  uint64_t file_bytes() const { return header_.file_bytes; }
  const std::string& tmp_path() const { return tmp_path_; }

  // Writes all of tensor `index` (tensors()[index].bytes() bytes, GGUF layout; a split expert
  // tensor is cut into its slices here).
  void write_tensor(size_t index, const uint8_t* data, size_t bytes);
  // Writes slice `slice` (one expert) of tensor `index`: slice_bytes bytes.
  void write_slice(size_t index, uint32_t slice, const uint8_t* data, size_t bytes);

  // Checks that every slice was written, writes header + tables, fsyncs, renames to the final path.
  void commit();

 private:
  void plan(const std::vector<JlmTensorSpec>& specs);
  void pwrite_all(const uint8_t* data, size_t bytes, uint64_t offset, const std::string& what);

  std::string path_;
  std::string tmp_path_;
  std::vector<uint8_t> metadata_bytes_;
  std::vector<uint8_t> source_bytes_;
  JlmHeader header_;
  std::vector<JlmTensor> tensors_;
  std::vector<JlmGroup> groups_;
  std::vector<std::vector<bool>> written_;  // [tensor][slice]
  int fd_ = -1;
  bool committed_ = false;
};

// Serializes the header + metadata + source + tables into the bytes of [0, data_offset), with the
// header checksum filled in. Used by the writer; exposed for tests that build damaged files.
std::vector<uint8_t> jlm_encode_head(const JlmHeader& header, const std::vector<uint8_t>& metadata,
                                     const std::vector<uint8_t>& source,
                                     const std::vector<JlmGroup>& groups,
                                     const std::vector<JlmTensor>& tensors);

// Bytes of one tensor table entry on disk.
size_t jlm_tensor_entry_bytes(const JlmTensor& tensor);

}  // namespace jitllm
