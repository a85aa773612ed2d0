// Sessions and steps: chunked prefill equals one-chunk prefill equals token-by-token decoding;
// several sessions in one ragged step equal their solo runs; context overflow is a clear error
// that leaves the session untouched; clear() restarts; KV pages are recycled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/tuning.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

// BOS + "The quick brown fox" in the fixtures' vocab, then more ids (all < 512).
const std::vector<int32_t> kPrompt = {1,   450, 439, 293, 110, 289, 307, 122, 113, 285, 114,
                                      123, 300, 17,  42,  511, 3,   77,  260, 401, 99,  200};

std::shared_ptr<const ModelFile> fixture(const char* format) {
  return load_model_file(oracle_path(std::string("models/synth-llama.") + format + ".gguf"));
}

EngineOptions reference_options() {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.kv_page_tokens = 8;  // small pages so sequences span several
  return o;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(Session, ChunkedPrefillEqualsOneChunkEqualsTokenByToken) {
  struct Case {
    const char* format;
    QuantType kv;
    float tol;
  };
  // Same llama.cpp-reproducing arithmetic per row; only the matmul summation order differs
  // between one-row and many-row steps (as in llama.cpp). With an f32 KV cache that is pure f32
  // reduction noise; with F16 K/V a 1-ulp change can flip an F16 rounding (~2^-11 relative), and
  // with Q8_0 an activation rounding (one quant step).
  for (const Case& cs : {Case{"F32", QuantType::F32, 1e-5f}, Case{"F32", QuantType::F16, 1e-3f},
                         Case{"Q8_0", QuantType::F16, 2e-2f}}) {
    const char* format = cs.format;
    EngineOptions options = reference_options();
    options.kv_type = cs.kv;
    Engine engine(fixture(format), options);
    auto one = engine.new_session();
    const auto whole = engine.prefill(*one, kPrompt, true);
    auto chunked = engine.new_session();
    const auto by5 = engine.prefill(*chunked, kPrompt, true, 5);
    auto single = engine.new_session();
    std::vector<float> by1;
    for (int32_t t : kPrompt) {
      const auto row = engine.decode(*single, t);
      by1.insert(by1.end(), row.begin(), row.end());
    }
    ASSERT_EQ(whole.size(), kPrompt.size() * size_t(engine.config().n_vocab));
    const float tol = cs.tol;
    EXPECT_LE(max_abs_diff(whole, by5), tol) << format;
    EXPECT_LE(max_abs_diff(whole, by1), tol) << format;
    std::printf("[ chunks   ] %s, %s KV: |one chunk - chunks of 5| %.3g, |one chunk - token by "
                "token| %.3g\n",
                format, quant_name(cs.kv), max_abs_diff(whole, by5), max_abs_diff(whole, by1));
    EXPECT_EQ(one->position(), int64_t(kPrompt.size()));
    EXPECT_EQ(chunked->position(), int64_t(kPrompt.size()));
    EXPECT_EQ(single->tokens(), kPrompt);
  }
}

TEST(Session, RaggedStepEqualsSoloRuns) {
  Engine engine(fixture("F32"), reference_options());
  const std::vector<int32_t> a(kPrompt.begin(), kPrompt.begin() + 7);
  const std::vector<int32_t> b(kPrompt.begin() + 3, kPrompt.end());
  const std::vector<int32_t> c = {1, 42};
  const int64_t V = engine.config().n_vocab;

  // Solo: each prompt, then one decode token each.
  std::vector<std::vector<float>> solo_prompt, solo_next;
  for (const auto* p : {&a, &b, &c}) {
    auto s = engine.new_session();
    solo_prompt.push_back(engine.prefill(*s, *p, true));
    solo_next.push_back(engine.decode(*s, 300));
  }

  // Together: the three prompts in one step, then one decode step with all three.
  auto sa = engine.new_session(), sb = engine.new_session(), sc = engine.new_session();
  std::vector<StepInput> in = {{sa.get(), a, true}, {sb.get(), b, true}, {sc.get(), c, true}};
  const auto joint = engine.step(in);
  ASSERT_EQ(joint.size(), (a.size() + b.size() + c.size()) * size_t(V));
  size_t off = 0;
  for (int i = 0; i < 3; ++i) {
    std::vector<float> part(joint.begin() + off, joint.begin() + off + solo_prompt[i].size());
    off += part.size();
    EXPECT_LE(max_abs_diff(part, solo_prompt[i]), 1e-4f) << "session " << i;
  }
  const int32_t next = 300;
  std::vector<StepInput> dec = {{sa.get(), {&next, 1}, false},
                                {sb.get(), {&next, 1}, false},
                                {sc.get(), {&next, 1}, false}};
  const auto joint_next = engine.step(dec);
  ASSERT_EQ(joint_next.size(), 3 * size_t(V));
  for (int i = 0; i < 3; ++i) {
    std::vector<float> part(joint_next.begin() + i * V, joint_next.begin() + (i + 1) * V);
    // A 3-row step sums its matmuls in tinyBLAS order, a 1-row decode in ggml_vec order.
    EXPECT_LE(max_abs_diff(part, solo_next[i]), 1e-4f) << "session " << i;
  }
  EXPECT_EQ(sa->position(), int64_t(a.size() + 1));
  EXPECT_EQ(sb->position(), int64_t(b.size() + 1));
  EXPECT_EQ(sc->position(), int64_t(c.size() + 1));
}

TEST(Session, SameSessionTwiceInOneStepIsRefused) {
  Engine engine(fixture("F32"), reference_options());
  auto s = engine.new_session();
  const int32_t t = 1;
  std::vector<StepInput> in = {{s.get(), {&t, 1}, false}, {s.get(), {&t, 1}, false}};
  EXPECT_THROW(engine.step(in), Error);
}

TEST(Session, ContextOverflowIsAClearErrorAndLeavesTheSessionUsable) {
  Engine engine(fixture("F32"), reference_options());
  auto s = engine.new_session(16);
  engine.prefill(*s, std::span<const int32_t>(kPrompt.data(), 10), false);
  try {
    engine.prefill(*s, std::span<const int32_t>(kPrompt.data(), 10), false);
    FAIL() << "expected a context overflow error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->position(), 10);
  for (int i = 0; i < 6; ++i) engine.decode(*s, 5);
  EXPECT_EQ(s->position(), 16);
  EXPECT_THROW(engine.decode(*s, 5), Error);
  // Default context = the model's training context (2048 for the fixtures).
  EXPECT_EQ(engine.new_session()->n_ctx(), 2048);
}

TEST(Session, ClearRestartsAndRecyclesPages) {
  Engine engine(fixture("F32"), reference_options());
  auto s = engine.new_session();
  const auto first = engine.prefill(*s, kPrompt, false);
  const size_t pages = engine.kv_pool().pages_in_use();
  EXPECT_EQ(pages, (kPrompt.size() + 7) / 8);
  s->clear();
  EXPECT_EQ(s->position(), 0);
  EXPECT_EQ(engine.kv_pool().pages_in_use(), 0u);
  const auto again = engine.prefill(*s, kPrompt, false);
  EXPECT_EQ(first, again);  // same inputs, same kernels: bitwise identical
  EXPECT_EQ(engine.kv_pool().bytes_allocated(), pages * engine.kv_pool().layout().page_bytes());
}

TEST(Session, OutOfRangeTokenIsAClearError) {
  Engine engine(fixture("F32"), reference_options());
  auto s = engine.new_session();
  try {
    engine.decode(*s, 512);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->position(), 0);
}

TEST(Session, ResultsDoNotDependOnThreadCount) {
  Engine engine(fixture("Q4_K_M"), reference_options());
  auto s1 = engine.new_session();
  ThreadPool::set_global_threads(1);
  const auto one = engine.prefill(*s1, kPrompt, true);
  ThreadPool::set_global_threads(3);
  auto s3 = engine.new_session();
  const auto three = engine.prefill(*s3, kPrompt, true);
  ThreadPool::set_global_threads(0);
  EXPECT_EQ(one, three);
}

}  // namespace
}  // namespace jitllm

namespace jitllm {
namespace {

// JITLLM_DUMP writes the named intermediate tensors: rows of every step appended in order.
TEST(Dump, NamedTensorsAreWrittenPerLayer) {
  const std::string dir = ::testing::TempDir() + "/jitllm-dump";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // Through the knob registry (not setenv), so the setting ends with the scope for the tests
  // that run after this one in the same process.
  std::optional<Engine> held;
  {
    tuning::ScopedOverride names("JITLLM_DUMP", "attn_norm,result_output"), to("JITLLM_DUMP_DIR", dir);
    held.emplace(fixture("F32"), reference_options());
  }
  Engine& engine = *held;
  auto s = engine.new_session();
  const auto logits = engine.prefill(*s, std::span<const int32_t>(kPrompt.data(), 6), true, 4);
  const auto norm0 = testing::read_f32(dir + "/attn_norm.0.f32");
  const auto norm1 = testing::read_f32(dir + "/attn_norm.1.f32");
  const auto out = testing::read_f32(dir + "/result_output.f32");
  EXPECT_EQ(norm0.size(), 6u * 256u);  // two steps (4 + 2 rows) appended
  EXPECT_EQ(norm1.size(), 6u * 256u);
  EXPECT_EQ(out, logits);
  EXPECT_FALSE(std::filesystem::exists(dir + "/ffn_out.0.f32"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace jitllm
