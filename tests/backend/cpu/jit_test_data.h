// Test data shared by the generated-kernel tests (matvec, repack, GEMM, block formats, K-quants):
// the ISA levels this CPU runs, random activations, and weight rows of any format.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_cpu_features.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace jitllm::jit_test {

// Every generated-kernel level this CPU can run (JITLLM_ISA aside).
inline std::vector<jit::Isa> cpu_isas() {
  std::vector<jit::Isa> out;
  for (jit::Isa i : {jit::Isa::Avx2, jit::Isa::AvxVnni, jit::Isa::Avx512Vnni})
    if (jit::cpu_supports(i)) out.push_back(i);
  return out;
}

// [n, k] values from N(0, 1).
inline std::vector<float> random_activation(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (float& v : x) v = nd(rng);
  return x;
}

// `rows` weight rows of `type`. F16/BF16: N(0, 1) values. Quantized formats: with `quantize`,
// N(0, 1) rows through the reference quantizer (small shapes); else random bytes with each
// block's scale fields made finite and modest (large shapes, where quantizing would be slow;
// random bytes reach every level, scale and min, extremes included). Q8_0 quants avoid -128,
// which the quantizer never writes.
inline std::vector<uint8_t> random_weights(QuantType type, int64_t rows, int64_t k, uint32_t seed,
                                           bool quantize) {
  std::mt19937 rng(seed);
  const size_t rb = row_bytes(type, k);
  std::vector<uint8_t> w(rb * size_t(rows));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  if (type == QuantType::F16 || type == QuantType::BF16) {
    for (size_t i = 0; i < w.size(); i += 2) {
      const float v = nd(rng);
      const uint16_t h = type == QuantType::F16 ? f32_to_fp16(v) : f32_to_bf16(v);
      std::memcpy(&w[i], &h, 2);
    }
    return w;
  }
  if (quantize) {
    std::vector<float> x(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : x) v = nd(rng);
      quantize_row(type, x.data(), w.data() + size_t(r) * rb, k);
    }
    return w;
  }
  for (size_t i = 0; i + 4 <= w.size(); i += 4) {  // 4 random bytes per draw
    const uint32_t v = rng();
    std::memcpy(&w[i], &v, 4);
  }
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  std::uniform_int_distribution<int> expo(118, 126);  // MXFP4's e8m0 scale: 2^-9 .. 2^-1
  const size_t bb = quant_traits(type).block_bytes;
  for (size_t off = 0; off < w.size(); off += bb) {
    uint8_t* b = w.data() + off;
    auto put = [&](size_t at, float v) {
      const uint16_t h = f32_to_fp16(v);
      std::memcpy(b + at, &h, 2);
    };
    switch (type) {
      case QuantType::Q8_0:
        put(0, sd(rng));
        for (int j = 0; j < 32; ++j)
          if (b[2 + j] == 0x80) b[2 + j] = 0x81;
        break;
      case QuantType::Q4_0: case QuantType::Q5_0: case QuantType::IQ4_NL: put(0, sd(rng)); break;
      case QuantType::Q4_1: case QuantType::Q5_1: put(0, sd(rng)); put(2, -8 * sd(rng)); break;
      case QuantType::MXFP4: b[0] = uint8_t(expo(rng)); break;
      case QuantType::Q2_K: put(80, sd(rng)); put(82, sd(rng)); break;
      case QuantType::Q3_K: put(108, sd(rng)); break;
      case QuantType::Q4_K: case QuantType::Q5_K: put(0, sd(rng)); put(2, sd(rng)); break;
      case QuantType::Q6_K: put(208, sd(rng)); break;
      default: break;
    }
  }
  return w;
}

}  // namespace jitllm::jit_test
