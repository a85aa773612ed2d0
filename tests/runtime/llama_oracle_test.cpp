// jitllm's llama forward pass against llama.cpp b10472's logits (/work/shared/oracle/logits/):
// every synthetic fixture x 3 prompts, prompt rows and generated (KV-cache path) rows, greedy ids
// up to the first near-tie, plus the F32 KV / flash-attention-off variant with the f32 KV option.
// Prints the observed max |diff| per format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;
using testing::read_f32;
using testing::read_text;

const char* kFormats[] = {"F32",    "F16",  "BF16", "Q8_0",   "Q6_K", "Q5_K_M",
                          "Q5_1",   "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "IQ4_NL",
                          "MXFP4",  "Q3_K_M", "Q2_K", "MXFP4_MOE"};
const char* kPrompts[] = {"fox", "rand64", "bos"};

// The README's tolerances for an engine that does not reproduce llama.cpp's numerics; ours does
// (activation conversion, F16 KV and attention), so the observed differences are far smaller.
// Formats whose every kernel follows ggml's summation order (tinyBLAS / vec_dot float order,
// ggml's Q8_0 lane order, VDPBF16PS's order for BF16, ggml's SIMD expf in SwiGLU) must agree to
// the last bits: measured 0 (Q2_K 4.8e-7) on every row.
float tolerance(const std::string& format) {
  if (format == "F32" || format == "F16" || format == "BF16" || format == "Q8_0" ||
      format == "MXFP4" || format == "MXFP4_MOE" || format == "Q2_K")
    return 1e-5f;
  return 0.03f;
}

// The oracle tests pin the reference kernels (generated kernels are tested against them).
EngineOptions reference() {
  EngineOptions o;
  o.cpu_kernels = "reference";
  return o;
}

int argmax(const float* row, int64_t n) {
  return int(std::max_element(row, row + n) - row);  // first maximum: ties -> lowest id
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct Observed {
  float prompt = 0, gen = 0;
  int rows = 0, rows_close = 0;  // rows compared / rows within 1e-5 (bit-level agreement)
  void add_row(float d) {
    ++rows;
    rows_close += d <= 1e-5f;
  }
  void merge(const Observed& o) {
    prompt = std::max(prompt, o.prompt);
    gen = std::max(gen, o.gen);
    rows += o.rows;
    rows_close += o.rows_close;
  }
};

// JITLLM_TEST_VERBOSE=1 prints every case and generated row.
// Runs one reference case (prompt + 16 greedy decode steps fed with llama.cpp's ids) and checks
// logits and greedy ids. `ref_prefix` is e.g. "logits/synth-llama.F32.fox".
Observed check_case(Engine& engine, const std::string& ref_prefix, float tol) {
  const auto meta = nlohmann::json::parse(read_text(oracle_path(ref_prefix + ".json")));
  const std::vector<int32_t> prompt = meta["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> greedy = meta["greedy_ids"].get<std::vector<int32_t>>();
  const std::vector<float> margin = meta["greedy_top2_margin"].get<std::vector<float>>();
  const int64_t n_vocab = meta["n_vocab"].get<int64_t>();
  const auto ref = read_f32(oracle_path(ref_prefix + ".logits.f32"));
  const auto ref_gen = read_f32(oracle_path(ref_prefix + ".gen_logits.f32"));
  EXPECT_EQ(engine.config().n_vocab, n_vocab);

  Observed o;
  auto session = engine.new_session(256);
  const std::vector<float> logits = engine.prefill(*session, prompt, /*all_logits=*/true);
  EXPECT_EQ(logits.size(), ref.size()) << ref_prefix;
  for (size_t r = 0; r < prompt.size() && (r + 1) * size_t(n_vocab) <= logits.size(); ++r) {
    const float d = max_abs_diff(logits.data() + r * size_t(n_vocab),
                                 ref.data() + r * size_t(n_vocab), size_t(n_vocab));
    o.prompt = std::max(o.prompt, d);
    o.add_row(d);
    if (std::getenv("JITLLM_TEST_VERBOSE")) std::printf("    prompt row %zu: %.3g\n", r, d);
  }
  EXPECT_LE(o.prompt, tol) << ref_prefix << " prompt rows";

  // Greedy ids must agree as long as llama.cpp's choice was not a near tie.
  bool ids_comparable = true;
  int ours = argmax(logits.data() + (prompt.size() - 1) * size_t(n_vocab), n_vocab);
  for (size_t i = 0; i < greedy.size(); ++i) {
    if (margin[i] < tol) ids_comparable = false;
    if (ids_comparable) EXPECT_EQ(ours, greedy[i]) << ref_prefix << " greedy step " << i;
    const std::vector<float> row = engine.decode(*session, greedy[i]);
    const float d = max_abs_diff(row.data(), ref_gen.data() + i * size_t(n_vocab), size_t(n_vocab));
    if (std::getenv("JITLLM_TEST_VERBOSE")) std::printf("    gen row %zu: %.3g\n", i, d);
    o.gen = std::max(o.gen, d);
    o.add_row(d);
    ours = argmax(row.data(), n_vocab);
  }
  EXPECT_LE(o.gen, tol) << ref_prefix << " generated rows";
  if (std::getenv("JITLLM_TEST_VERBOSE")) std::printf("  %s: prompt %.3g gen %.3g\n", ref_prefix.c_str(), o.prompt, o.gen);
  return o;
}

class FixtureOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureOracle, PromptAndGeneratedLogitsMatchLlamaCpp) {
  const std::string format = GetParam();
  Engine engine(load_model_file(oracle_path("models/synth-llama." + format + ".gguf")),
                reference());
  Observed worst;
  for (const char* prompt : kPrompts) {
    const Observed o =
        check_case(engine, "logits/synth-llama." + format + "." + prompt, tolerance(format));
    worst.merge(o);
  }
  std::printf("[ oracle   ] %-9s max |diff| vs llama.cpp: prompt %.3g, generated %.3g (tol %.3g); "
              "rows within 1e-5: %d/%d\n",
              format.c_str(), worst.prompt, worst.gen, tolerance(format), worst.rows_close,
              worst.rows);
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, FixtureOracle, ::testing::ValuesIn(kFormats),
                         [](const auto& info) { return std::string(info.param); });

// The no-repack variants are llama.cpp's plain per-type kernels, the path jitllm reproduces.
class NoRepackOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(NoRepackOracle, MatchesPlainKernelReference) {
  const std::string format = GetParam();
  Engine engine(load_model_file(oracle_path("models/synth-llama." + format + ".gguf")),
                reference());
  // Q4_0's plain kernels (vec_dot / tinyBLAS) sum in ggml's 8-lane order, which the reference
  // reproduces (measured 2.2e-7); the others keep the quantized tolerance.
  const float tol = format == "Q4_0" ? 1e-5f : 0.03f;
  Observed worst;
  for (const char* prompt : kPrompts) {
    const Observed o = check_case(
        engine, "logits/variants/synth-llama." + format + "." + prompt + ".no_repack", tol);
    worst.merge(o);
  }
  std::printf("[ oracle   ] %-9s no_repack max |diff|: prompt %.3g, generated %.3g; rows within "
              "1e-5: %d/%d\n",
              format.c_str(), worst.prompt, worst.gen, worst.rows_close, worst.rows);
}

INSTANTIATE_TEST_SUITE_P(RepackedFormats, NoRepackOracle,
                         ::testing::Values("Q4_0", "IQ4_NL", "MXFP4", "Q4_K_M", "Q3_K_M", "Q2_K"),
                         [](const auto& info) { return std::string(info.param); });

TEST(F32KvOracle, PlainFloatAttentionMatchesFaOffReference) {
  EngineOptions options = reference();
  options.kv_type = QuantType::F32;
  Engine engine(load_model_file(oracle_path("models/synth-llama.F32.gguf")), options);
  Observed worst;
  for (const char* prompt : kPrompts) {
    const Observed o = check_case(
        engine, std::string("logits/variants/synth-llama.F32.") + prompt + ".kv_f32.fa_off", 1e-5f);
    worst.merge(o);
  }
  std::printf("[ oracle   ] F32 kv_f32.fa_off max |diff|: prompt %.3g, generated %.3g\n",
              worst.prompt, worst.gen);
}

}  // namespace
}  // namespace jitllm
