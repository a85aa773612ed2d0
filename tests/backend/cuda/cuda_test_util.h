// Shared helpers of the GPU tests: one device/compiler/kernels per test binary (skipped when no
// card is usable), random weight rows in any GGUF format, and the relative error measure.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include <unistd.h>

#include "backend/cuda/cuda_kernels.h"
#include "core/fp16.h"
#include "core/tuning.h"
#include "quant/quant.h"

namespace jitllm::cuda::test {

struct Gpu {
  std::unique_ptr<Device> device;
  std::unique_ptr<Compiler> compiler;
  std::unique_ptr<CudaKernels> kernels;
  std::unique_ptr<Stream> stream;
};

// The process's card, or null (and the reason) when there is none.
inline Gpu* gpu(std::string* why = nullptr) {
  static std::string reason;
  static std::unique_ptr<Gpu> g = [] {
    std::unique_ptr<Gpu> out;
    if (!available(&reason)) return out;
    out = std::make_unique<Gpu>();
    out->device = std::make_unique<Device>(0);
    // A private cache per run, so the kernels are really compiled here.
    const std::string dir = std::filesystem::temp_directory_path().string() + "/jitllm-cuda-test-" +
                            std::to_string(::getpid());
    out->compiler = std::make_unique<Compiler>(*out->device, dir);
    out->kernels = std::make_unique<CudaKernels>(*out->device, *out->compiler);
    out->stream = std::make_unique<Stream>();
    return out;
  }();
  if (why) *why = reason;
  return g.get();
}

#define JITLLM_REQUIRE_GPU()                                 \
  std::string why_no_gpu;                                    \
  Gpu* G = gpu(&why_no_gpu);                                 \
  if (!G) GTEST_SKIP() << "no CUDA device: " << why_no_gpu;

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// rows x k weights in GGUF layout: raw random blocks with small positive scales for the formats
// with kernels of their own (fast at real sizes), quantize_row of random floats for the others.
// Every `zero_every`-th block (0 = none) is all zero bytes.
inline std::vector<uint8_t> random_weights(QuantType type, int64_t rows, int64_t k,
                                           std::mt19937& rng, int zero_every = 0) {
  const size_t rb = row_bytes(type, k);
  std::vector<uint8_t> w(rb * size_t(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.0005f, 0.004f);
  auto put_half = [](uint8_t* p, float f) {
    const uint16_t h = f32_to_fp16(f);
    p[0] = uint8_t(h & 0xff);
    p[1] = uint8_t(h >> 8);
  };
  size_t block = 0;
  switch (type) {
    case QuantType::Q4_K:
      block = 144;
      for (size_t b = 0; b < w.size(); b += block) {
        for (size_t i = 4; i < block; ++i) w[b + i] = uint8_t(byte(rng));
        put_half(&w[b], scale(rng));
        put_half(&w[b + 2], scale(rng));
      }
      break;
    case QuantType::Q6_K:
      block = 210;
      for (size_t b = 0; b < w.size(); b += block) {
        for (size_t i = 0; i < 208; ++i) w[b + i] = uint8_t(byte(rng));
        put_half(&w[b + 208], scale(rng) * 0.1f);
      }
      break;
    case QuantType::Q8_0:
      block = 34;
      for (size_t b = 0; b < w.size(); b += block) {
        for (size_t i = 2; i < block; ++i) w[b + i] = uint8_t(byte(rng) == 128 ? 0 : byte(rng));
        put_half(&w[b], scale(rng));
      }
      break;
    default: {
      const std::vector<float> f = random_floats(size_t(k), rng);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> row = f;
        std::shuffle(row.begin(), row.end(), rng);  // cheap variety at real sizes
        quantize_row(type, row.data(), w.data() + size_t(r) * rb, k);
      }
      block = quant_traits(type).block_bytes;
    }
  }
  if (zero_every > 0)
    for (size_t b = 0; b + block <= w.size(); b += block * size_t(zero_every))
      std::fill(w.begin() + long(b), w.begin() + long(b + block), uint8_t(0));
  return w;
}

// ||a - b|| / ||b||, and NaN-aware: a NaN anywhere gives infinity.
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += double(a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

inline DeviceBuffer to_device(const std::vector<float>& v, size_t pad_floats = 0) {
  DeviceBuffer b((v.size() + pad_floats) * sizeof(float));
  b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

inline std::vector<float> from_device(const DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float));
  return v;
}

}  // namespace jitllm::cuda::test
