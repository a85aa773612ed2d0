// Format semantics checked from their definitions rather than from ggml's outputs: values a
// format represents exactly survive a round trip (with the scale the spec implies), the rounding
// rules of activation conversion vs model-file quantization, vec_dot agreeing with the dot
// product of the dequantized operands, and clear errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using Q = QuantType;

std::vector<float> round_trip(Q type, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(row_bytes(type, int64_t(x.size())));
  quantize_row(type, x.data(), bytes.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  dequantize_row(type, bytes.data(), y.data(), int64_t(x.size()));
  return y;
}

TEST(QuantExact, Q4_0RepresentsItsGrid) {
  // Levels -8..7 times 0.25: the largest magnitude is -2 = -8 * 0.25, so d = -2 / -8 = 0.25.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i % 16 - 8) * 0.25f;
  EXPECT_EQ(round_trip(Q::Q4_0, x), x);
}

TEST(QuantExact, Q8_0RepresentsItsGrid) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[size_t(i)] = std::ldexp(float((i * 37) % 255 - 127), -7);
  x[0] = std::ldexp(127.0f, -7);  // both blocks span the full range: d = 2^-7 exactly
  x[32] = std::ldexp(-127.0f, -7);
  EXPECT_EQ(round_trip(Q::Q8_0, x), x);
}

TEST(QuantExact, Mxfp4RepresentsE2M1TimesPowerOfTwo) {
  // OCP MX: x = E2M1 level * 2^(e - 127). Levels 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives,
  // times 2^-3: the largest (6 * 2^-3 = 0.75) needs 2^(e-127) = 2^-3, so e = 124.
  const float levels[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = (i % 2 ? -1.f : 1.f) * levels[i % 8] * 0.125f;
  std::vector<uint8_t> bytes(row_bytes(Q::MXFP4, 32));
  quantize_row(Q::MXFP4, x.data(), bytes.data(), 32);
  EXPECT_EQ(bytes[0], 124);
  EXPECT_EQ(round_trip(Q::MXFP4, x), x);
}

TEST(QuantExact, Mxfp4TinyBlocksStayTiny) {
  // Blocks far below the smallest E8M0 scale (2^-127) must not wrap to a huge exponent.
  for (float tiny : {1e-36f, 1e-40f, 1e-45f}) {
    std::vector<float> x(32, tiny);
    x[1] = -tiny;
    const auto y = round_trip(Q::MXFP4, x);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i])) << tiny << " element " << i;
  }
}

TEST(QuantExact, Iq4nlRepresentsItsTable) {
  // The non-linear levels times 2^-8: the scale search must find d = 2^-8 (a perfect fit).
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = std::ldexp(float(kValuesIQ4NL[(i * 7) % 16]), -8);
  EXPECT_EQ(round_trip(Q::IQ4_NL, x), x);
}

TEST(QuantExact, HalfFormatsKeepRepresentableValues) {
  std::vector<float> x = {1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), 0.0f, -0.0f, 3.140625f};
  x.resize(32, 0.5f);
  EXPECT_EQ(round_trip(Q::F16, x), x);
  std::vector<float> b = {1.0f, -2.5f, 3.0e38f, std::ldexp(1.0f, -130), 0.0f, 3.140625f};
  for (float& v : b) v = bf16_to_f32(f32_to_bf16(v));  // make them bf16 values first
  b.resize(32, 0.5f);
  EXPECT_EQ(round_trip(Q::BF16, b), b);
}

// ggml-cpu converts activations with AVX rounding (half to even, scale 127/amax); llama-quantize's
// Q8_0 model files use roundf (half away from zero, scale 1/(amax/127)).
TEST(QuantActivation, Q8_0RoundsHalfToEvenButModelFilesRoundHalfAway) {
  std::vector<float> x(32, 0.0f);
  const float halves[7] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f};
  std::copy(halves, halves + 7, x.begin());
  BlockQ8_0 act{}, file{};
  quantize_activation(Q::Q4_0, x.data(), &act, 32);  // Q4_0 dots take Q8_0 activations
  quantize_row(Q::Q8_0, x.data(), &file, 32);
  EXPECT_EQ(fp16_to_f32(act.d), 1.0f);
  EXPECT_EQ(fp16_to_f32(file.d), 1.0f);
  const int8_t want_act[7] = {127, 0, 2, 2, 0, -2, -2};
  const int8_t want_file[7] = {127, 1, 2, 3, -1, -2, -3};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(act.qs[i], want_act[i]) << "activation, x = " << x[size_t(i)];
    EXPECT_EQ(file.qs[i], want_file[i]) << "model file, x = " << x[size_t(i)];
  }
}

TEST(QuantActivation, Q8_1CarriesScaledSum) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[size_t(i)] = std::sin(float(i)) * 3.0f + 0.25f;
  BlockQ8_1 act[2];
  quantize_activation(Q::Q5_1, x.data(), act, 64);
  for (const BlockQ8_1& b : act) {
    int sum = 0;
    for (int8_t q : b.qs) sum += q;
    // s = d * sum with d before its fp16 rounding: within fp16 precision of the rounded d's.
    EXPECT_NEAR(fp16_to_f32(b.s), fp16_to_f32(b.d) * float(sum),
                2e-3 * std::fabs(fp16_to_f32(b.d) * float(sum)) + 1e-6);
  }
}

TEST(QuantActivation, Q8_KSumsEach16AndUsesFloatScale) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[size_t(i)] = float((i * 29) % 200 - 100) / 8.0f;
  x[7] = -127.0f;  // the signed extreme maps to -127: d = -127 / -127 = 1 exactly
  BlockQ8_K act;
  quantize_activation(Q::Q4_K, x.data(), &act, 256);
  EXPECT_EQ(act.d, 1.0f);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += act.qs[16 * g + i];
    EXPECT_EQ(act.bsums[g], sum) << "group " << g;
  }
  EXPECT_EQ(act.qs[7], -127);
  EXPECT_EQ(act.qs[8], int(std::nearbyint(x[8])));
}

// vec_dot unpacks blocks with its own code; it must agree with dequantize on both operands.
TEST(QuantVecDot, EqualsDotOfDequantizedOperands) {
  const Q types[] = {Q::F32,  Q::F16,  Q::BF16, Q::Q4_0, Q::Q4_1, Q::Q5_0, Q::Q5_1, Q::Q8_0,
                     Q::Q2_K, Q::Q3_K, Q::Q4_K, Q::Q5_K, Q::Q6_K, Q::IQ4_NL, Q::MXFP4};
  const int64_t n = 256 * 3;
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
  for (float& v : w) v = dist(rng) * 0.05f + 0.01f;  // an offset exercises the min terms
  for (float& v : x) v = dist(rng);
  for (Q t : types) {
    const Q at = quant_traits(t).vec_dot_type;
    std::vector<uint8_t> wq(row_bytes(t, n)), xq(row_bytes(at, n));
    quantize_row(t, w.data(), wq.data(), n);
    quantize_activation(t, x.data(), xq.data(), n);
    std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
    dequantize_row(t, wq.data(), wd.data(), n);
    dequantize_row(at, xq.data(), xd.data(), n);
    double want = 0, mag = 0;
    for (size_t i = 0; i < wd.size(); ++i) {
      want += double(wd[i]) * xd[i];
      mag += std::fabs(double(wd[i]) * xd[i]);
    }
    const double got = vec_dot(t, n, wq.data(), xq.data());
    // Q4_1/Q5_1 take the activation's sum from its fp16 `s` field (ggml's shortcut), which is
    // only as exact as fp16; every other format is exact up to float accumulation.
    const bool uses_s = t == Q::Q4_1 || t == Q::Q5_1;
    EXPECT_NEAR(got, want, (uses_s ? 2e-3 : 2e-6) * mag) << quant_name(t);
  }
}

TEST(QuantErrors, RaggedLengthNamesTypeAndCount) {
  std::vector<float> x(33, 1.0f);
  std::vector<uint8_t> out(64);
  try {
    quantize_row(Q::Q4_0, x.data(), out.data(), 33);
    FAIL() << "expected jitllm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("33"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(Q::Q4_K, out.data(), x.data(), 32), Error);
  EXPECT_THROW(quantize_activation(Q::Q6_K, x.data(), out.data(), 32), Error);
  EXPECT_THROW(vec_dot(Q::Q8_0, 33, out.data(), out.data()), Error);
  EXPECT_THROW(quantize_row(Q::Q8_0, x.data(), out.data(), -32), Error);
}

TEST(QuantErrors, UnsupportedAndUnknownTypes) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  try {
    dequantize_row(Q::IQ2_XXS, out.data(), x.data(), 256);
    FAIL() << "expected jitllm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize_row(Q::TQ1_0, x.data(), out.data(), 256), Error);
  EXPECT_THROW(quantize_row(QuantType(1234), x.data(), out.data(), 256), Error);
  EXPECT_THROW(vec_dot(Q::Q8_K, 256, out.data(), out.data()), Error);  // activation-only format
  EXPECT_THROW(vec_dot(Q::I32, 32, out.data(), out.data()), Error);
}

}  // namespace
}  // namespace jitllm
