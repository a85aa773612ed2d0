// Host-side repacking of GGUF weight bytes into the layouts the CUDA kernels read.
#include "backend/cuda/packed_weight.h"

#include <cstring>

#include "backend/cuda/weight_formats.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace jitllm::cuda {

WeightKind cuda_kind_for(QuantType type) {
  switch (type) {
    case QuantType::F32: return WeightKind::F32;
    case QuantType::F16: return WeightKind::F16;
    case QuantType::BF16: return WeightKind::BF16;
    case QuantType::Q8_0: return WeightKind::Q8_0;
    case QuantType::Q4_K: return WeightKind::Q4_K;
    case QuantType::Q6_K: return WeightKind::Q6_K;
    default: {
      // The other block formats have kernels of their own (weight_formats.h), used where
      // format_runs_native says so (JITLLM_CUDA_NATIVE_FORMATS); else dequantized here to F16.
      bool ok = false;
      const WeightKind kind = format_kind_for(type, &ok);
      return ok && format_runs_native(kind) ? kind : WeightKind::F16;
    }
  }
}

PackedWeight pack_weight(QuantType type, const uint8_t* data, int64_t rows, int64_t k) {
  PackedWeight p;
  p.kind = cuda_kind_for(type);
  p.rows = rows;
  p.k = k;
  const size_t rb = row_bytes(type, k);  // throws for a k that is not a whole number of blocks
  const size_t total = rb * size_t(rows);
  switch (type) {
    case QuantType::F32:
    case QuantType::F16:
    case QuantType::BF16:
    case QuantType::Q4_K:
      p.bytes.assign(data, data + total);
      return p;
    case QuantType::Q8_0: {
      const int64_t nb = k / 32;
      p.scale_offset = size_t(rows) * size_t(k);
      p.bytes.resize(p.scale_offset + size_t(rows * nb) * 2);
      uint8_t* q = p.bytes.data();
      uint8_t* d = p.bytes.data() + p.scale_offset;
      for (int64_t i = 0; i < rows * nb; ++i) {
        const uint8_t* blk = data + size_t(i) * 34;  // half d, int8 qs[32]
        std::memcpy(d + 2 * i, blk, 2);
        std::memcpy(q + 32 * i, blk + 2, 32);
      }
      return p;
    }
    case QuantType::Q6_K: {
      const int64_t nb = k / 256;
      p.scale_offset = size_t(rows * nb) * 208;
      p.bytes.resize(p.scale_offset + size_t(rows * nb) * 2);
      uint8_t* q = p.bytes.data();
      uint8_t* d = p.bytes.data() + p.scale_offset;
      for (int64_t i = 0; i < rows * nb; ++i) {
        const uint8_t* blk = data + size_t(i) * 210;  // ql[128] qh[64] scales[16] half d
        std::memcpy(q + 208 * i, blk, 208);
        std::memcpy(d + 2 * i, blk + 208, 2);
      }
      return p;
    }
    default: {
      if (is_format_kind(p.kind)) {
        pack_format_weight(type, data, rows, k, p);
        return p;
      }
      p.converted = true;
      p.bytes.resize(size_t(rows * k) * 2);
      std::vector<float> row(static_cast<size_t>(k));
      auto* out = reinterpret_cast<uint16_t*>(p.bytes.data());
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(type, data + size_t(r) * rb, row.data(), k);
        for (int64_t i = 0; i < k; ++i) out[r * k + i] = f32_to_fp16(row[size_t(i)]);
      }
      return p;
    }
  }
}

}  // namespace jitllm::cuda
