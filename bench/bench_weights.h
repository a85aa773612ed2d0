// What the matmul benchmarks share: weight rows of any quantized format at a real shape, made
// quickly (64 distinct quantized rows, repeated: quantizing millions of rows would dominate).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"

namespace jitllm::bench {

inline std::vector<uint8_t> weights(QuantType type, int64_t rows, int64_t k) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(k) * 64);
  const size_t rb = row_bytes(type, k);
  std::vector<uint8_t> w(rb * size_t(rows));
  for (float& v : x) v = nd(rng);
  for (int64_t r = 0; r < 64 && r < rows; ++r)
    quantize_row(type, x.data() + r * k, w.data() + size_t(r) * rb, k);
  for (int64_t r = 64; r < rows; ++r)
    std::memcpy(w.data() + size_t(r) * rb, w.data() + size_t(r % 64) * rb, rb);
  return w;
}

}  // namespace jitllm::bench
