// The prefill path (tensor-core GEMM, flash attention, embedding rows made on the card) through
// the whole llama graph against llama.cpp's logits for the oracle fixtures: the 64-token rand64
// prompt in one step (only the last row wants logits, so it is a prefill step, not a decode
// step), in two chunks of 30 and 34 (the second attends to K/V the first wrote), then
// llama.cpp's 16-token greedy continuation decoded over that KV. Also the same prompt with the
// GEMM and flash attention switched off (the matvec/paged path). Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "backend/cpu/reference_kernels.h"
#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

using jitllm::testing::oracle_path;
using jitllm::testing::read_f32;
using jitllm::testing::read_text;

float tolerance(const std::string& format) {  // as the CPU oracle test
  if (format == "F32" || format == "F16") return 2e-3f;
  if (format == "BF16") return 6e-3f;
  return 0.03f;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i)
    m = std::max(m, std::isfinite(a[i]) ? std::fabs(a[i] - b[i]) : INFINITY);
  return m;
}

std::unique_ptr<Engine> cuda_engine(const std::shared_ptr<const ModelFile>& file, bool prefill_paths) {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = "cuda";
  // Read when the engine's CudaOps is made.
  tuning::ScopedOverride gemm("JITLLM_CUDA_GEMM", prefill_paths ? "1" : "0");
  tuning::ScopedOverride flash("JITLLM_CUDA_FLASH", prefill_paths ? "1" : "0");
  return std::make_unique<Engine>(file, o);
}

class CudaPrefill : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaPrefill, Rand64PromptMatchesLlamaCpp) {
  JITLLM_REQUIRE_GPU();
  const std::string format = GetParam();
  const float tol = tolerance(format);
  const std::string ref = "logits/synth-llama." + format + ".rand64";
  const auto meta = nlohmann::json::parse(read_text(oracle_path(ref + ".json")));
  const auto ids = meta["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = meta["greedy_ids"].get<std::vector<int32_t>>();
  const auto margin = meta["greedy_top2_margin"].get<std::vector<float>>();
  const int64_t nv = meta["n_vocab"].get<int64_t>();
  const auto ref_logits = read_f32(oracle_path(ref + ".logits.f32"));
  const auto ref_gen = read_f32(oracle_path(ref + ".gen_logits.f32"));
  const float* last = ref_logits.data() + (ids.size() - 1) * size_t(nv);
  const auto file = load_model_file(oracle_path("models/synth-llama." + format + ".gguf"));
  auto e = cuda_engine(file, true);
  auto argmax = [&](const std::vector<float>& l) {
    return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  };

  // One step of 64 rows.
  auto s1 = e->new_session(128);
  const std::vector<float> one = e->prefill(*s1, ids, false);
  const float d_one = max_abs_diff(one.data(), last, size_t(nv));
  EXPECT_LE(d_one, tol) << format << " one step";
  if (margin[0] > 2 * tol) EXPECT_EQ(argmax(one), greedy[0]) << format;
  // Greedy continuation over the KV the prefill wrote.
  float d_gen = 0;
  for (size_t i = 0; i < greedy.size(); ++i) {
    const std::vector<float> l = e->decode(*s1, greedy[i]);
    d_gen = std::max(d_gen, max_abs_diff(l.data(), ref_gen.data() + i * size_t(nv), size_t(nv)));
    if (i + 1 < greedy.size() && margin[i + 1] > 2 * tol)
      EXPECT_EQ(argmax(l), greedy[i + 1]) << format << " step " << i;
  }
  EXPECT_LE(d_gen, tol) << format << " continuation";

  // Two chunks: rows 30..63 attend to the first chunk's K/V.
  auto s2 = e->new_session(128);
  const std::vector<float> two = e->prefill(*s2, ids, false, 30);
  const float d_two = max_abs_diff(two.data(), last, size_t(nv));
  EXPECT_LE(d_two, tol) << format << " chunks of 30";

  // The matvec/paged path on the same prompt.
  auto old = cuda_engine(file, false);
  auto s3 = old->new_session(128);
  const std::vector<float> base = old->prefill(*s3, ids, false);
  const float d_old = max_abs_diff(base.data(), last, size_t(nv));
  std::printf("[ cuda     ] prefill %-7s rand64 vs llama.cpp max |diff|: one step %.3g, chunks of 30 "
              "%.3g, continuation %.3g (tol %.3g); matvec/paged path %.3g; paths differ by %.3g\n",
              format.c_str(), d_one, d_two, d_gen, tol, d_old,
              max_abs_diff(one.data(), base.data(), size_t(nv)));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPrefill,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0",
                                           "Q5_K_M", "IQ4_NL"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace jitllm::cuda::test
