// A tensor as stored in a model file: name, format, shape and a view of its bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "quant/types.h"

namespace jitllm {

struct TensorInfo {
  std::string name;            // GGUF naming: "blk.0.attn_q.weight"
  QuantType type = QuantType::F32;
  std::vector<int64_t> shape;  // GGUF `ne` order: shape[0] is the row length (contiguous)
  uint64_t offset = 0;         // byte offset of the data within the file's data section
  size_t bytes = 0;            // row_bytes(type, shape[0]) * rows
  const uint8_t* data = nullptr;  // view into the mapped file (valid while the file is open)
  // 0: the bytes are contiguous. Otherwise the tensor is stored as shape.back() equal slices
  // (bytes / shape.back() each) with slice e at data + e * slice_stride: how a .jlm keeps each
  // MoE expert of a stacked [.., n_expert] tensor on its own pages.
  uint64_t slice_stride = 0;
  // The bytes live in a buffer that is reused for other tensors (a paged expert's cache slot,
  // graph/moe.h ExpertPages): nothing may be kept keyed by `data` (a backend's decode copy, a
  // card's upload).
  bool transient = false;

  int64_t elements() const;
  int64_t row_length() const { return shape.empty() ? 1 : shape[0]; }
  int64_t rows() const;  // product of shape[1..]
};

}  // namespace jitllm
