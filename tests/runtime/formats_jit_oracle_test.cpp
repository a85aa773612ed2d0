// The generated F16 / BF16 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 kernels (backend/cpu/jit_formats.h)
// inside the whole forward pass, against llama.cpp b10472's logits: each format's synth-llama
// fixture x 3 prompts (prompt rows through the prefill GEMM, 16 generated rows through the decode
// matvec), at every ISA level this CPU runs. F16 and BF16 reproduce ggml's float orders, so they
// must agree to the last bits (1e-5, as the reference's oracle test); the block formats keep the
// quantized tolerance (their per-lane float order is not llama.cpp's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/cpu/jit_kernels.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;
using testing::read_f32;
using testing::read_text;

float tolerance(const std::string& format) {
  return format == "F16" || format == "BF16" ? 1e-5f : 0.03f;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Prompt rows and 16 decode rows fed with llama.cpp's greedy ids; greedy ids compared until the
// first near-tie. Returns the largest |diff| seen.
float check_case(Engine& engine, const std::string& prefix, float tol) {
  const auto meta = nlohmann::json::parse(read_text(oracle_path(prefix + ".json")));
  const auto prompt = meta["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = meta["greedy_ids"].get<std::vector<int32_t>>();
  const auto margin = meta["greedy_top2_margin"].get<std::vector<float>>();
  const auto n_vocab = size_t(meta["n_vocab"].get<int64_t>());
  const auto ref = read_f32(oracle_path(prefix + ".logits.f32"));
  const auto ref_gen = read_f32(oracle_path(prefix + ".gen_logits.f32"));

  auto session = engine.new_session(256);
  const std::vector<float> logits = engine.prefill(*session, prompt, /*all_logits=*/true);
  EXPECT_EQ(logits.size(), ref.size()) << prefix;
  float worst = 0;
  for (size_t r = 0; r < prompt.size() && (r + 1) * n_vocab <= logits.size(); ++r)
    worst = std::max(worst, max_abs_diff(&logits[r * n_vocab], &ref[r * n_vocab], n_vocab));
  const float* last = &logits[(prompt.size() - 1) * n_vocab];
  int ours = int(std::max_element(last, last + n_vocab) - last);
  bool comparable = true;
  for (size_t i = 0; i < greedy.size(); ++i) {
    comparable = comparable && margin[i] >= tol;
    if (comparable) {
      EXPECT_EQ(ours, greedy[i]) << prefix << " greedy step " << i;
    }
    const std::vector<float> row = engine.decode(*session, greedy[i]);
    worst = std::max(worst, max_abs_diff(row.data(), &ref_gen[i * n_vocab], n_vocab));
    ours = int(std::max_element(row.begin(), row.end()) - row.begin());
  }
  EXPECT_LE(worst, tol) << prefix;
  return worst;
}

class FormatsJitOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(FormatsJitOracle, GeneratedKernelsMatchLlamaCpp) {
  const std::string format = GetParam();
  for (jit::Isa isa : {jit::Isa::Avx2, jit::Isa::AvxVnni, jit::Isa::Avx512Vnni}) {
    if (!jit::cpu_supports(isa)) continue;
    EngineOptions options;
    options.cpu_kernels = std::string("jit-") + jit::isa_name(isa);
    Engine engine(load_model_file(oracle_path("models/synth-llama." + format + ".gguf")), options);
    float worst = 0;
    for (const char* prompt : {"fox", "rand64", "bos"})
      worst = std::max(worst, check_case(engine, "logits/synth-llama." + format + "." + prompt,
                                                   tolerance(format)));
    std::printf("[ oracle   ] %-7s %-7s jit_formats kernels: max |diff| vs llama.cpp %.3g\n",
                format.c_str(), jit::isa_name(isa), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(FormatFixtures, FormatsJitOracle,
                         ::testing::Values("F16", "BF16", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL",
                                           "MXFP4"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace jitllm
