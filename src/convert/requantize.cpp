// Byte conversion between formats for the converter (see requantize.h).
#include "convert/requantize.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace jitllm {

void convert_tensor_data(QuantType from, QuantType to, const uint8_t* src, int64_t row_length,
                         int64_t rows, std::vector<uint8_t>& dst, ThreadPool* pool) {
  const size_t in_row = row_bytes(from, row_length);
  const size_t out_row = row_bytes(to, row_length);
  dst.resize(out_row * size_t(rows));
  if (from == to) {
    std::copy(src, src + in_row * size_t(rows), dst.data());
    return;
  }
  if (!quant_traits(from).supported)
    throw_error("cannot convert from {}: jitllm cannot dequantize it", quant_name(from));
  // Rows are independent, so they are split over the pool; the bytes do not depend on the split.
  auto convert_rows = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(row_length));  // [row_length]
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* in = src + size_t(r) * in_row;
      uint8_t* out = dst.data() + size_t(r) * out_row;
      if (to == QuantType::F32) {
        dequantize_row(from, in, reinterpret_cast<float*>(out), row_length);
      } else if (from == QuantType::F32) {
        quantize_row(to, reinterpret_cast<const float*>(in), out, row_length);
      } else {
        dequantize_row(from, in, row.data(), row_length);
        quantize_row(to, row.data(), out, row_length);
      }
    }
  };
  // Small tensors (norms, tiny fixtures) are not worth waking the pool for.
  if (pool && pool->size() > 1 && uint64_t(rows) * uint64_t(row_length) >= (uint64_t(1) << 16))
    pool->parallel_for(rows, 1, convert_rows);
  else
    convert_rows(0, rows);
}

int32_t llama_file_type(QuantType type) {
  switch (type) {
    case QuantType::F32: return 0;
    case QuantType::F16: return 1;
    case QuantType::Q4_0: return 2;
    case QuantType::Q4_1: return 3;
    case QuantType::Q8_0: return 7;
    case QuantType::Q5_0: return 8;
    case QuantType::Q5_1: return 9;
    case QuantType::Q2_K: return 10;
    case QuantType::Q3_K: return 12;  // Q3_K_M
    case QuantType::Q4_K: return 15;  // Q4_K_M
    case QuantType::Q5_K: return 17;  // Q5_K_M
    case QuantType::Q6_K: return 18;
    case QuantType::IQ4_NL: return 25;
    case QuantType::BF16: return 32;
    case QuantType::MXFP4: return 38;
    default: return -1;
  }
}

}  // namespace jitllm
