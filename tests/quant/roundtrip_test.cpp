// Properties of quantize_row / dequantize_row / quantize_activation / vec_dot that hold for every
// format, on synthetic data: error within the format's resolution, all-zero blocks, ragged rows,
// block independence, deterministic output into dirty buffers, exact values, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using Q = QuantType;

const Q kWeightTypes[] = {Q::F16,  Q::BF16, Q::Q4_0, Q::Q4_1, Q::Q5_0, Q::Q5_1,
                          Q::Q8_0, Q::Q2_K, Q::Q3_K, Q::Q4_K, Q::Q5_K, Q::Q6_K,
                          Q::IQ4_NL, Q::MXFP4};
const Q kAllQuantizable[] = {Q::F32,  Q::F16,  Q::BF16, Q::Q4_0, Q::Q4_1, Q::Q5_0,
                             Q::Q5_1, Q::Q8_0, Q::Q8_1, Q::Q2_K, Q::Q3_K, Q::Q4_K,
                             Q::Q5_K, Q::Q6_K, Q::Q8_K, Q::IQ4_NL, Q::MXFP4};

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> quantize(Q type, const std::vector<float>& x, uint8_t fill = 0) {
  std::vector<uint8_t> out(row_bytes(type, int64_t(x.size())), fill);
  quantize_row(type, x.data(), out.data(), int64_t(x.size()));
  return out;
}

std::vector<float> dequantize(Q type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  dequantize_row(type, bytes.data(), out.data(), int64_t(n));
  return out;
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum / double(a.size()));
}

std::string name(Q t) { return quant_name(t); }

// RMS error of a round trip of N(0, 1) data, relative to sigma = 1. Bounds: about 1.3x the
// error of a uniform quantizer over the block's range, (range / levels) / sqrt(12), with the
// range of a Gaussian block of 32 (about +-2.1 sigma, +-2.7 for 256-element super-blocks);
// the searched K-quant and IQ4_NL scales do better than that estimate.
double max_relative_rms(Q t) {
  switch (t) {
    case Q::F16: return 4e-4;     // 11-bit mantissa
    case Q::BF16: return 3e-3;    // 8-bit mantissa
    case Q::Q8_0: return 0.012;   // 255 levels over +-2.1
    case Q::Q6_K: return 0.025;   // 64 levels, per-16 scales
    case Q::Q5_0: case Q::Q5_1: case Q::Q5_K: return 0.05;  // 32 levels
    case Q::Q4_0: case Q::Q4_1: case Q::Q4_K: case Q::IQ4_NL: return 0.11;  // 16 levels
    case Q::MXFP4: return 0.2;    // power-of-two scale: up to 2x coarser than needed
    case Q::Q3_K: return 0.22;    // 8 levels
    case Q::Q2_K: return 0.42;    // 4 levels
    default: return 0;
  }
}

TEST(QuantRoundTrip, ErrorWithinFormatResolution) {
  const auto x = gaussian(256 * 24, 1);
  double previous = 0;
  for (Q t : {Q::F16, Q::BF16, Q::Q8_0, Q::Q6_K, Q::Q5_K, Q::Q4_K, Q::Q3_K, Q::Q2_K, Q::Q5_0,
              Q::Q5_1, Q::Q4_0, Q::Q4_1, Q::IQ4_NL, Q::MXFP4}) {
    const double err = rms(dequantize(t, quantize(t, x), x.size()), x);
    std::printf("[ %-6s ] round-trip RMS error %.5f (bound %.4f)\n", name(t).c_str(), err,
                max_relative_rms(t));
    EXPECT_LE(err, max_relative_rms(t)) << name(t);
    EXPECT_GT(err, 0.0) << name(t) << " cannot be lossless on Gaussian data";
    // The K-quant ladder must get strictly worse with fewer bits.
    if (t == Q::Q6_K || t == Q::Q5_K || t == Q::Q4_K || t == Q::Q3_K || t == Q::Q2_K) {
      EXPECT_GT(err, previous) << name(t);
      previous = err;
    }
  }
}

TEST(QuantRoundTrip, ErrorScalesWithData) {
  // Scales are relative: the same data times 16 round-trips to exactly 16 times the result (every
  // search step scales by a power of two; fp16 scale fields stay normal, which a factor 2^-k
  // would not guarantee for Q3_K/Q6_K's small super-block scales).
  const auto x = gaussian(256 * 4, 2);
  std::vector<float> big(x.size());
  for (size_t i = 0; i < x.size(); ++i) big[i] = std::ldexp(x[i], 4);
  for (Q t : kWeightTypes) {
    const auto a = dequantize(t, quantize(t, x), x.size());
    const auto b = dequantize(t, quantize(t, big), x.size());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(std::ldexp(a[i], 4), b[i]) << name(t) << " element " << i;
  }
}

TEST(QuantRoundTrip, AllZeroBlocksGiveZerosAndZeroScales) {
  for (Q t : kAllQuantizable) {
    const int64_t block = quant_traits(t).block_elems == 1 ? 32 : quant_traits(t).block_elems;
    std::vector<float> x(size_t(block * 3), 0.0f);
    const auto bytes = quantize(t, x, 0x5A);
    const auto y = dequantize(t, bytes, x.size());
    for (float v : y) {
      ASSERT_FALSE(std::isnan(v)) << name(t);
      ASSERT_EQ(v, 0.0f) << name(t);
    }
    // The scale fields are zero: every format stores its scale(s) as 0 for a zero block, so the
    // only nonzero bytes may be level codes meaning "0" (e.g. 8 in Q4_0, 0x88 in IQ4_NL).
    if (t == Q::Q4_0 || t == Q::Q5_0 || t == Q::Q8_0 || t == Q::IQ4_NL || t == Q::Q4_1 ||
        t == Q::Q5_1 || t == Q::Q8_1) {
      const size_t bb = quant_traits(t).block_bytes;
      for (size_t b = 0; b < 3; ++b) {
        uint16_t d;
        std::memcpy(&d, bytes.data() + b * bb, 2);
        EXPECT_EQ(fp16_to_f32(d), 0.0f) << name(t);  // Q4_0/Q5_0 store -0 (0 / -8), as ggml
      }
    }
    if (t == Q::MXFP4) {
      EXPECT_EQ(bytes[0], 0) << "E8M0 exponent of a zero block";
    }
    if (t == Q::Q8_K || t == Q::Q6_K || t == Q::Q5_K || t == Q::Q4_K || t == Q::Q3_K ||
        t == Q::Q2_K) {
      for (uint8_t byte : bytes) ASSERT_EQ(byte, 0) << name(t) << ": zero super-block";
    }
  }
}

TEST(QuantRoundTrip, ZeroBlockBetweenNonzeroBlocks) {
  for (Q t : kWeightTypes) {
    const int64_t block = quant_traits(t).block_elems == 1 ? 32 : quant_traits(t).block_elems;
    auto x = gaussian(size_t(block * 3), 3);
    std::fill(x.begin() + block, x.begin() + 2 * block, 0.0f);
    const auto y = dequantize(t, quantize(t, x), x.size());
    for (int64_t i = block; i < 2 * block; ++i) ASSERT_EQ(y[size_t(i)], 0.0f) << name(t);
    EXPECT_LE(rms(y, x), 1.3 * max_relative_rms(t)) << name(t);
  }
}

TEST(QuantRoundTrip, RaggedRowsEqualBlockByBlock) {
  // Rows of 1, 3 and 7 blocks: quantizing a row equals quantizing each block alone (no state
  // leaks between blocks), and dequantizing agrees likewise.
  for (Q t : kAllQuantizable) {
    const int64_t block = quant_traits(t).block_elems;
    const size_t bb = quant_traits(t).block_bytes;
    for (int64_t nblocks : {1, 3, 7}) {
      const auto x = gaussian(size_t(block * nblocks), uint32_t(10 + nblocks), 0.3f);
      const auto whole = quantize(t, x);
      ASSERT_EQ(whole.size(), bb * size_t(nblocks));
      for (int64_t b = 0; b < nblocks; ++b) {
        std::vector<float> one(x.begin() + b * block, x.begin() + (b + 1) * block);
        const auto alone = quantize(t, one);
        ASSERT_EQ(0, std::memcmp(alone.data(), whole.data() + size_t(b) * bb, bb))
            << name(t) << " block " << b << " of " << nblocks;
      }
    }
  }
}

TEST(QuantRoundTrip, SecondCallIntoDirtyBufferGivesSameBytes) {
  for (Q t : kAllQuantizable) {
    const int64_t n = quant_traits(t).block_elems == 1 ? 96 : quant_traits(t).block_elems * 3;
    auto x = gaussian(size_t(n), 4);
    std::fill(x.begin(), x.begin() + n / 3, 0.0f);  // a zero block takes the early-out paths
    const auto clean = quantize(t, x, 0x00);
    const auto dirty = quantize(t, x, 0xFF);
    EXPECT_EQ(clean, dirty) << name(t) << ": some output byte depends on the buffer's old contents";
    std::vector<uint8_t> again = dirty;
    quantize_row(t, x.data(), again.data(), n);
    EXPECT_EQ(again, dirty) << name(t);
  }
  for (Q t : kWeightTypes) {  // activation conversion too
    const int64_t n = 256 * 2;
    const auto x = gaussian(size_t(n), 5);
    const size_t bytes = row_bytes(quant_traits(t).vec_dot_type, n);
    std::vector<uint8_t> a(bytes, 0x00), b(bytes, 0xFF);
    quantize_activation(t, x.data(), a.data(), n);
    quantize_activation(t, x.data(), b.data(), n);
    EXPECT_EQ(a, b) << name(t);
  }
}

}  // namespace
}  // namespace jitllm
