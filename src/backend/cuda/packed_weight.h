// Weight matrices as the CUDA kernels read them: the GGUF bytes of a [rows, k] matrix turned
// into one of the WeightKind layouts (see kernel_source.h), on the host, ready for one upload.
//  - F32, F16, BF16, Q4_K: the GGUF bytes as they are (Q4_K's 144-byte blocks are 16-byte
//    aligned already).
//  - Q8_0: int8 values [rows][k] (32-byte blocks, aligned), then the half scales [rows][k/32].
//  - Q6_K: blocks of [ql 128][qh 64][scales 16] (208 bytes), then the half d's [rows][k/256].
//  - Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (and Q5_K, Q3_K, Q2_K when opted in): see
//    weight_formats.h (format_runs_native).
//  - every other format: dequantized and stored as F16 (correct, but 2-4x the bytes).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/kernel_source.h"
#include "quant/types.h"

namespace jitllm::cuda {

struct PackedWeight {
  WeightKind kind = WeightKind::F32;
  int64_t rows = 0, k = 0;
  std::vector<uint8_t> bytes;  // main array, then the scale array at scale_offset
  size_t scale_offset = 0;     // 0 when the kind has no separate scale array
  bool converted = false;      // true when the format was dequantized to F16
};

// The kind a format runs as on the card.
WeightKind cuda_kind_for(QuantType type);

// data: rows * row_bytes(type, k) bytes in GGUF layout.
PackedWeight pack_weight(QuantType type, const uint8_t* data, int64_t rows, int64_t k);

}  // namespace jitllm::cuda
