// The generated Q2_K / Q3_K / Q5_K kernels (backend/cpu/jit_kquant_*) inside the whole forward
// pass, against llama.cpp b10472's logits: the Q2_K, Q3_K_M and Q5_K_M fixtures (every matrix of
// these formats has k = 256 or 768, so each one runs the generated kernels, prefill GEMM for the
// prompt and decode matvec for the 16 generated rows) x 3 prompts, at every ISA level this CPU
// runs. The oracle tests in llama_oracle_test.cpp pin the reference kernels; this one pins ours.
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

// The README's tolerance for quantized formats. Observed (printed below) is far smaller: the
// integer sums are ggml's, only the per-lane float order differs.
constexpr float kTol = 0.03f;

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Prompt rows and 16 decode rows fed with llama.cpp's greedy ids; greedy ids compared until the
// first near-tie. Returns the largest |diff| seen.
float check_case(Engine& engine, const std::string& prefix) {
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
    comparable = comparable && margin[i] >= kTol;
    if (comparable) EXPECT_EQ(ours, greedy[i]) << prefix << " greedy step " << i;
    const std::vector<float> row = engine.decode(*session, greedy[i]);
    worst = std::max(worst, max_abs_diff(row.data(), &ref_gen[i * n_vocab], n_vocab));
    ours = int(std::max_element(row.begin(), row.end()) - row.begin());
  }
  EXPECT_LE(worst, kTol) << prefix;
  return worst;
}

class KQuantJitOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(KQuantJitOracle, GeneratedKernelsMatchLlamaCpp) {
  const std::string format = GetParam();
  for (jit::Isa isa : {jit::Isa::Avx2, jit::Isa::AvxVnni, jit::Isa::Avx512Vnni}) {
    if (!jit::cpu_supports(isa)) continue;
    EngineOptions options;
    options.cpu_kernels = std::string("jit-") + jit::isa_name(isa);
    Engine engine(load_model_file(oracle_path("models/synth-llama." + format + ".gguf")), options);
    float worst = 0;
    for (const char* prompt : {"fox", "rand64", "bos"})
      worst = std::max(worst, check_case(engine, "logits/synth-llama." + format + "." + prompt));
    std::printf("[ oracle   ] %-7s %-7s generated kernels: max |diff| vs llama.cpp %.3g\n",
                format.c_str(), jit::isa_name(isa), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(KQuantFixtures, KQuantJitOracle,
                         ::testing::Values("Q2_K", "Q3_K_M", "Q5_K_M"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace jitllm
