// Requantizes every 2-D tensor of the F32 synthetic llama (shared/oracle/models) with
// quantize_row and compares with the bytes llama-quantize (b10472, no imatrix) wrote into each
// quantized fixture: the tensor's type comes from that fixture (Q4_K_M mixes Q4_K and Q6_K, ...)
// and is cross-checked against fixtures.json. Every format is expected to be byte-identical; if a
// K-quant tensor ever is not, it must at least be as accurate (RMS vs F32 <= 1.02x llama.cpp's).
// The trained pydoc-llama is checked the same way against convert_hf_to_gguf.py's F16 and Q8_0
// (gguf-py's numpy quantizer: an implementation independent of ggml's C code).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "quant/quant.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;
using testing::read_text;

bool is_k_quant(QuantType t) {
  return t == QuantType::Q2_K || t == QuantType::Q3_K || t == QuantType::Q4_K ||
         t == QuantType::Q5_K || t == QuantType::Q6_K;
}

// RMS of dequantize(bytes) - reference over a whole tensor.
double rms_error(QuantType type, const uint8_t* bytes, const float* reference, int64_t row_len,
                 int64_t rows) {
  std::vector<float> row(static_cast<size_t>(row_len));
  const size_t stride = row_bytes(type, row_len);
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, bytes + r * stride, row.data(), row_len);
    for (int64_t i = 0; i < row_len; ++i) {
      const double d = double(row[size_t(i)]) - reference[r * row_len + i];
      sum += d * d;
    }
  }
  return std::sqrt(sum / double(row_len * rows));
}

class FixtureRequantize : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureRequantize, MatchesLlamaQuantizeBytes) {
  const std::string fixture = GetParam();
  const auto listing = nlohmann::json::parse(read_text(oracle_path("models/fixtures.json")));
  const auto& expected_types = listing.at("synth-llama." + fixture).at("tensor_types");
  const GgufFile f32 = GgufFile::open(oracle_path("models/synth-llama.F32.gguf"));
  const GgufFile quantized = GgufFile::open(oracle_path("models/synth-llama." + fixture + ".gguf"));

  std::map<std::string, std::pair<int, int>> per_type;  // type -> (exact tensors, tensors)
  std::vector<uint8_t> ours;
  for (const TensorInfo& src : f32.tensors()) {
    const TensorInfo& theirs = quantized.tensor(src.name);
    ASSERT_EQ(theirs.shape, src.shape) << src.name;
    const auto listed = quant_from_name(expected_types.at(src.name).get<std::string>());
    ASSERT_TRUE(listed.has_value()) << src.name;
    EXPECT_EQ(theirs.type, *listed) << src.name << ": type differs from fixtures.json";
    if (src.shape.size() < 2) continue;  // norm vectors stay F32
    ASSERT_EQ(src.type, QuantType::F32);
    const int64_t row_len = src.row_length(), rows = src.rows();
    const size_t stride = row_bytes(theirs.type, row_len);
    ASSERT_EQ(theirs.bytes, stride * size_t(rows)) << src.name;

    ours.assign(theirs.bytes, 0);
    const auto* x = reinterpret_cast<const float*>(src.data);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(theirs.type, x + r * row_len, ours.data() + r * stride, row_len);

    auto& [exact, total] = per_type[quant_name(theirs.type)];
    ++total;
    if (std::memcmp(ours.data(), theirs.data, theirs.bytes) == 0) {
      ++exact;
      continue;
    }
    size_t first = 0;
    while (ours[first] == theirs.data[first]) ++first;
    const double ours_rms = rms_error(theirs.type, ours.data(), x, row_len, rows);
    const double theirs_rms = rms_error(theirs.type, theirs.data, x, row_len, rows);
    std::printf("  %s %s: not byte-identical (first diff at byte %zu), RMS ours %.6g, llama.cpp "
                "%.6g\n", fixture.c_str(), src.name.c_str(), first, ours_rms, theirs_rms);
    if (is_k_quant(theirs.type)) {
      EXPECT_LE(ours_rms, 1.02 * theirs_rms) << src.name;
    }
    ADD_FAILURE() << fixture << " " << src.name << " (" << quant_name(theirs.type)
                  << "): bytes differ from llama-quantize's, first at byte " << first;
  }
  for (const auto& [type, counts] : per_type)
    std::printf("[ %-7s ] %-6s %d/%d tensors byte-identical\n", fixture.c_str(), type.c_str(),
                counts.first, counts.second);
}

TEST(TrainedModelRequantize, MatchesConvertHfToGgufBytes) {
  const GgufFile f32 = GgufFile::open(oracle_path("pydoc-llama/pydoc-llama.F32.gguf"));
  for (const char* format : {"F16", "Q8_0"}) {
    const GgufFile converted =
        GgufFile::open(oracle_path(std::string("pydoc-llama/pydoc-llama.") + format + ".gguf"));
    int quantized_tensors = 0;
    std::vector<uint8_t> ours;
    for (const TensorInfo& src : f32.tensors()) {
      const TensorInfo& theirs = converted.tensor(src.name);
      ASSERT_EQ(theirs.shape, src.shape) << src.name;
      if (theirs.type == QuantType::F32) continue;  // norms stay F32
      ASSERT_EQ(src.type, QuantType::F32) << src.name;
      const int64_t row_len = src.row_length(), rows = src.rows();
      const size_t stride = row_bytes(theirs.type, row_len);
      ASSERT_EQ(theirs.bytes, stride * size_t(rows)) << src.name;
      ours.assign(theirs.bytes, 0);
      const auto* x = reinterpret_cast<const float*>(src.data);
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(theirs.type, x + r * row_len, ours.data() + r * stride, row_len);
      EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data, theirs.bytes))
          << format << " " << src.name << " (" << quant_name(theirs.type) << ")";
      ++quantized_tensors;
    }
    EXPECT_GT(quantized_tensors, 0) << format;
    std::printf("[ pydoc %-4s ] %d tensors byte-identical\n", format, quantized_tensors);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, FixtureRequantize,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "IQ4_NL", "MXFP4", "Q6_K", "Q5_K_M", "Q4_K_M",
                                           "Q3_K_M", "Q2_K"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace jitllm
