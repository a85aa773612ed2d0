// The logits pick on the card (CudaOps::pick_logits, pick_source.cpp) against the host's
// pick_row (graph/logits_pick.h): on real vocabularies (Qwen's padded 151936-wide head read to
// its 151665 tokens, Llama 3's 128256) and ragged small ones, rows full of exact ties, -inf
// columns, an all -inf row, NaN / +inf rows, every kind of request (top 1, 40, the 1024 cap,
// extra columns, the log-normaliser, whole rows, nothing, a grammar's mask), and a second call
// into the same buffers, with -0 and +0 tied at the boundary; then Engine::step_picked against
// the logits of the same steps, through captured and replayed decode steps and ragged steps of
// three sessions. Label gpu.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "backend/cuda/cuda_ops.h"
#include "cuda_test_util.h"
#include "graph/logits_pick.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

void expect_same(const PickedLogits& got, const PickedLogits& want, const std::string& where) {
  EXPECT_EQ(got.bad, want.bad) << where;
  if (want.bad >= 0) {
    EXPECT_EQ(std::isnan(got.bad_value), std::isnan(want.bad_value)) << where;
    return;
  }
  EXPECT_EQ(got.top_ids, want.top_ids) << where;
  EXPECT_EQ(got.top_values, want.top_values) << where;
  EXPECT_EQ(got.extra, want.extra) << where;
  EXPECT_EQ(got.row, want.row) << where;
  EXPECT_EQ(got.max, want.max) << where;
  EXPECT_NEAR(got.log_sum, want.log_sum, 1e-12 * std::max(1.0, std::fabs(want.log_sum))) << where;
}

TEST(CudaPick, EqualsTheHostPickOnRealShapes) {
  JITLLM_REQUIRE_GPU();
  CudaOps ops(0);
  ops.enter();
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> grid(-300, 60), hole(0, 99);
  const std::vector<int32_t> extra = {0, 5, 17, 4096};
  const std::pair<int64_t, int64_t> shapes[] = {
      {151936, 151665}, {128256, 128256}, {32000, 32000}, {5000, 4097}, {1030, 1025}, {7, 7}};
  for (const auto& [n_vocab, cols] : shapes) {
    for (const int64_t rows : {int64_t(1), int64_t(6), int64_t(64)}) {
      std::vector<float> x(size_t(rows * n_vocab));
      for (float& v : x) v = hole(rng) == 0 ? -INFINITY : 0.125f * float(grid(rng));
      if (n_vocab > cols) x[size_t(n_vocab - 1)] = 1e30f;  // padding: never a candidate
      if (rows > 1) std::fill(x.begin() + n_vocab, x.begin() + 2 * n_vocab, -INFINITY);
      if (rows > 2) x[size_t(2 * n_vocab + std::min<int64_t>(cols - 1, 70))] = INFINITY;
      if (rows > 3) {
        x[size_t(3 * n_vocab + cols - 1)] = NAN;
        x[size_t(3 * n_vocab + cols / 2)] = std::nanf("");
      }
      if (rows > 4) std::fill(x.begin() + 4 * n_vocab, x.begin() + 5 * n_vocab, 2.5f);  // all tied
      if (rows > 5) {  // row 5: -0 and +0 (equal values) mixed at the top, the rest -1
        std::fill(x.begin() + 5 * n_vocab, x.begin() + 6 * n_vocab, -1.0f);
        for (int64_t c = 0; c < cols; c += 3) x[size_t(5 * n_vocab + c)] = c % 2 ? -0.0f : 0.0f;
      }
      std::vector<int32_t> ex;
      for (int32_t c : extra)
        if (c < cols) ex.push_back(c);
      // A grammar's mask for every third row: one column in ten, column 5 always.
      std::vector<uint64_t> mask(size_t((cols + 63) / 64), 0);
      std::bernoulli_distribution allow(0.1);
      for (int64_t c = 0; c < cols; ++c)
        if (allow(rng) || c == 5) mask[size_t(c >> 6)] |= uint64_t(1) << (c & 63);
      std::vector<LogitsPick> picks;
      const int32_t tops[] = {1, 40, int32_t(std::min<int64_t>(kMaxPickTop, cols)), -1, 0, 41};
      for (int64_t r = 0; r < rows; ++r) {
        LogitsPick p{int32_t(std::min<int64_t>(tops[r % 6], cols)), ex, r % 2 == 0};
        if (r == 4) p.top = int32_t(std::min<int64_t>(300, cols));
        if (r % 3 == 1) p.allowed = mask;
        picks.push_back(p);
      }
      DeviceBuffer dx = to_device(x);
      const Act a{reinterpret_cast<float*>(dx.get()), rows, n_vocab};
      std::vector<PickedLogits> got(static_cast<size_t>(rows));
      for (int call = 0; call < 2; ++call) {
        ops.pick_logits(a, LogitsPicks{cols, picks, got.data()});
        for (int64_t r = 0; r < rows; ++r) {
          PickedLogits want;
          pick_row(x.data() + r * n_vocab, cols, picks[size_t(r)], want);
          expect_same(got[size_t(r)], want,
                      fmt::format("{} of {} columns, row {} of {}, top {}, call {}", cols, n_vocab,
                                  r, rows, picks[size_t(r)].top, call));
        }
      }
    }
  }
}

EngineOptions on(const char* devices) {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = devices;
  return o;
}

// Engine::step_picked on the card equals the host's pick of step()'s logits for the same steps
// (twin sessions), through one session's captured and replayed decode steps, then ragged steps
// of three sessions (a two-token chunk in the first).
TEST(CudaPick, StepPickedEqualsThePickOfTheLogits) {
  JITLLM_REQUIRE_GPU();
  const auto file = load_model_file(jitllm::testing::oracle_path("models/synth-llama.Q4_K_M.gguf"));
  Engine e(file, on("cuda"));
  const int64_t nv = e.config().n_vocab, cols = nv - 3;
  const std::vector<int32_t> touched = {2, 9, 400};
  auto check_step = [&](std::span<const StepInput> with_logits, std::span<const StepInput> picked,
                        const std::vector<LogitsPick>& picks, const std::string& where) {
    const std::vector<float> l = e.step(with_logits);
    const std::vector<PickedLogits> got = e.step_picked(picked, picks, cols);
    std::vector<int32_t> next;
    for (size_t i = 0; i < picks.size(); ++i) {
      PickedLogits want;
      pick_row(l.data() + i * size_t(nv), cols, picks[i], want);
      expect_same(got[i], want, where + fmt::format(" row {}", i));
      next.push_back(want.top_ids.empty() ? 1 : want.top_ids[0]);
    }
    return next;
  };
  auto a = e.new_session(128), b = e.new_session(128);
  const std::vector<int32_t> prompt = {1, 22, 333, 44, 5};
  e.prefill(*a, prompt, false);
  e.prefill(*b, prompt, false);
  int32_t t = 7;
  for (int i = 0; i < 12; ++i) {
    const StepInput ia{a.get(), std::span<const int32_t>(&t, 1)};
    const StepInput ib{b.get(), std::span<const int32_t>(&t, 1)};
    const std::vector<LogitsPick> picks = {LogitsPick{i % 3 == 0 ? 1 : 40, touched, i % 2 == 0}};
    t = check_step({&ia, 1}, {&ib, 1}, picks, fmt::format("decode step {}", i))[0];
  }
  std::vector<std::unique_ptr<Session>> s, u;
  for (int i = 0; i < 3; ++i) {
    s.push_back(e.new_session(64));
    u.push_back(e.new_session(64));
  }
  std::vector<int32_t> next = {3, 30, 300};
  for (int step = 0; step < 5; ++step) {
    const std::vector<int32_t> two = {next[0], 11};
    std::vector<StepInput> in, un;
    for (size_t i = 0; i < 3; ++i) {
      const std::span<const int32_t> tk = step == 0 && i == 0 ? std::span<const int32_t>(two)
                                                              : std::span<const int32_t>(&next[i], 1);
      in.push_back(StepInput{s[i].get(), tk});
      un.push_back(StepInput{u[i].get(), tk});
    }
    const std::vector<LogitsPick> picks = {LogitsPick{64, touched, true}, LogitsPick{},
                                           LogitsPick{1}};
    next = check_step(in, un, picks, fmt::format("ragged step {}", step));
    next[1] = 17;
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
