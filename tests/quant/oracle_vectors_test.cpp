// Checks every format against ggml's own outputs in shared/oracle/quant/ (see its README,
// "Per-format ggml vectors"): dequantize == ggml to_float bitwise, activation conversion ==
// ggml-cpu from_float bytewise, vec_dot == ggml-cpu's vec_dot to float-accumulation noise.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;
using testing::read_bytes;
using testing::read_f32;
using testing::read_text;

struct Vectors {
  QuantType type;
  QuantType vec_dot_type;
  int64_t n_per_row = 0;
  int64_t nrows = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> w_raw;  // [nrows, row_bytes]
  std::vector<float> w_f32;    // [nrows, n_per_row]
  std::vector<float> x_f32;    // [n_per_row]
  std::vector<uint8_t> x_raw;  // row_bytes(vec_dot_type, n_per_row)
  std::vector<float> y_f32;    // [nrows]
};

Vectors load(const std::string& name) {
  const auto meta = nlohmann::json::parse(read_text(oracle_path("quant/" + name + ".json")));
  Vectors v;
  v.type = *quant_from_name(meta.at("type").get<std::string>());
  v.vec_dot_type = *quant_from_name(meta.at("vec_dot_type").get<std::string>());
  v.n_per_row = meta.at("n_per_row").get<int64_t>();
  v.nrows = meta.at("nrows").get<int64_t>();
  v.row_bytes = meta.at("row_bytes").get<size_t>();
  const std::string base = "quant/" + name;
  v.w_raw = read_bytes(oracle_path(base + ".w.raw"));
  v.w_f32 = read_f32(oracle_path(base + ".w.f32"));
  v.x_f32 = read_f32(oracle_path(base + ".x.f32"));
  v.x_raw = read_bytes(oracle_path(base + ".x.raw"));
  v.y_f32 = read_f32(oracle_path(base + ".y.f32"));
  return v;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

class OracleVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(OracleVectors, FilesAreConsistent) {
  const Vectors v = load(GetParam());
  EXPECT_EQ(v.row_bytes, row_bytes(v.type, v.n_per_row));
  EXPECT_EQ(v.vec_dot_type, quant_traits(v.type).vec_dot_type);
  ASSERT_EQ(v.w_raw.size(), v.row_bytes * size_t(v.nrows));
  ASSERT_EQ(v.w_f32.size(), size_t(v.n_per_row * v.nrows));
  ASSERT_EQ(v.x_f32.size(), size_t(v.n_per_row));
  ASSERT_EQ(v.x_raw.size(), row_bytes(v.vec_dot_type, v.n_per_row));
  ASSERT_EQ(v.y_f32.size(), size_t(v.nrows));
}

TEST_P(OracleVectors, DequantizeIsBitwiseGgml) {
  const Vectors v = load(GetParam());
  std::vector<float> out(size_t(v.n_per_row));
  int mismatches = 0;
  for (int64_t r = 0; r < v.nrows; ++r) {
    dequantize_row(v.type, v.w_raw.data() + r * v.row_bytes, out.data(), v.n_per_row);
    for (int64_t i = 0; i < v.n_per_row; ++i) {
      const float want = v.w_f32[size_t(r * v.n_per_row + i)];
      if (!same_bits(out[size_t(i)], want) && mismatches++ < 5)
        ADD_FAILURE() << GetParam() << " row " << r << " elem " << i << ": got " << out[size_t(i)]
                      << " want " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(OracleVectors, ActivationIsBytewiseGgmlCpu) {
  const Vectors v = load(GetParam());
  std::vector<uint8_t> out(v.x_raw.size() + 7, 0xAB);  // canary bytes past the end
  quantize_activation(v.type, v.x_f32.data(), out.data(), v.n_per_row);
  for (size_t i = v.x_raw.size(); i < out.size(); ++i) ASSERT_EQ(out[i], 0xAB) << "overrun";
  out.resize(v.x_raw.size());
  size_t first_diff = out.size();
  for (size_t i = 0; i < out.size() && first_diff == out.size(); ++i)
    if (out[i] != v.x_raw[i]) first_diff = i;
  EXPECT_EQ(first_diff, out.size()) << GetParam() << ": first differing byte at offset "
                                    << first_diff;
}

TEST_P(OracleVectors, VecDotMatchesGgmlCpu) {
  const Vectors v = load(GetParam());
  double max_rel = 0, max_abs = 0;
  for (int64_t r = 0; r < v.nrows; ++r) {
    const float got = vec_dot(v.type, v.n_per_row, v.w_raw.data() + r * v.row_bytes,
                              v.x_raw.data());
    const float want = v.y_f32[size_t(r)];
    const double diff = std::fabs(double(got) - double(want));
    // Relative to the sum of |terms| scale: y itself can be near zero by cancellation.
    double mag = 0;
    for (int64_t i = 0; i < v.n_per_row; ++i)
      mag += std::fabs(double(v.w_f32[size_t(r * v.n_per_row + i)]) * v.x_f32[size_t(i)]);
    max_abs = std::max(max_abs, diff);
    max_rel = std::max(max_rel, diff / std::max(std::fabs(double(want)), 1e-30));
    EXPECT_LE(diff, 1e-5 * std::max(std::fabs(double(want)), 0.1 * mag))
        << GetParam() << " row " << r << ": got " << got << " want " << want;
  }
  std::printf("[ %-6s ] vec_dot max |diff| %.3g, max rel %.3g\n", GetParam(), max_abs, max_rel);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, OracleVectors,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL",
                                           "MXFP4"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace jitllm
