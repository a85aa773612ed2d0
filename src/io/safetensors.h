// safetensors reader: one file ("model.safetensors") or a sharded set described by
// "model.safetensors.index.json" (weight_map: tensor -> shard file). A file is an 8-byte
// little-endian header length, a JSON header ({"name": {"dtype", "shape", "data_offsets"}, ...,
// "__metadata__": {str: str}}), then the data. Every length, shape and offset is checked against
// the file before use; bad input is a jitllm::Error naming the file, the tensor and the field.
// Tensors are exposed as TensorInfo with the shape reversed into GGUF `ne` order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "io/tensor_info.h"

namespace jitllm {

// The safetensors dtypes jitllm reads; any other dtype in a header is refused, naming the tensor.
// U8: raw bytes (gpt-oss's MXFP4 expert blocks and scales), never read as numbers.
enum class SafetensorsDtype : uint8_t { F32, F16, BF16, F8_E4M3, U8 };
const char* safetensors_dtype_name(SafetensorsDtype dtype);  // "F32", "F8_E4M3", ...

struct SafetensorsTensor {
  // info.type is F32/F16/BF16 for those dtypes. F8_E4M3 has no ggml type: its info.type is I8,
  // which only stands for the one-byte element width (so bytes/row_bytes hold); always check
  // `dtype` first and convert F8_E4M3 with f8_e4m3_to_f32. `data` may be unaligned (the data
  // section starts right after the JSON header).
  TensorInfo info;  // shape in GGUF ne order: info.shape[0] = the last safetensors dimension
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  size_t shard = 0;  // index into SafetensorsModel::files()
};

// One parsed header (used by SafetensorsModel::open, the fuzz target and the hostile tests).
struct SafetensorsParsed {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<SafetensorsTensor> tensors;       // in data order
  size_t data_offset = 0;                       // 8 + header length
};
// `name` is used in error messages; the tensors' `data` point into `bytes`.
SafetensorsParsed parse_safetensors(const uint8_t* bytes, size_t size, const std::string& name);

class SafetensorsModel {
 public:
  // `path`: a .safetensors file, a *.safetensors.index.json, or a folder holding
  // model.safetensors or model.safetensors.index.json.
  static SafetensorsModel open(const std::string& path);

  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const SafetensorsTensor& tensor(const std::string& name) const;  // throws naming the tensor
  // "__metadata__" of the single file, or the index's "metadata" (values as JSON text when they
  // are not strings) for a sharded set.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<std::string>& files() const { return files_; }
  size_t file_bytes() const;

  // The tensor's values as float32, in storage order ([rows, row_length] row-major).
  std::vector<float> to_f32(const SafetensorsTensor& t) const;

 private:
  std::vector<std::string> files_;
  std::vector<std::shared_ptr<MappedFile>> maps_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
};

// OCP FP8 E4M3 ("float8_e4m3fn": bias 7, no infinities, S.1111.111 is NaN, max 448) to float.
float f8_e4m3_to_f32(uint8_t v);
void f8_e4m3_to_f32(const uint8_t* src, float* dst, size_t n);

}  // namespace jitllm
