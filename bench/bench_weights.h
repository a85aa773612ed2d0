// What the matmul benchmarks share: weight rows of any quantized format at a real shape, made
// quickly (64 distinct quantized rows, repeated: quantizing millions of rows would dominate), and
// the timed loop of a matmul over them.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "backend/cpu/reference_kernels.h"
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

// Times kernels.matmul of rows x k `type` weights with n random tokens, a new activation each call
// (no packed-activation cache hit). Returns the weights' bytes.
inline size_t time_matmul(benchmark::State& state, const CpuKernels& kernels, QuantType type,
                          int64_t rows, int64_t k, int64_t n) {
  const auto w = weights(type, rows, k);
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n * k)), out(size_t(n * rows));
  for (float& v : x) v = nd(rng);
  for (auto _ : state) {
    x[0] += 1e-3f;
    kernels.matmul(type, w.data(), rows, k, x.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  return w.size();
}

}  // namespace jitllm::bench
