// Mixture-of-experts pieces (graph/moe.h) on the CPU: the host routing against hand-worked
// cases (order, ties, renormalisation, scale, softmax over the chosen), the grouping of rows by
// expert, weighted_sum_rows, and Ops::moe_ffn's plain twin against a naive per-row loop (each row
// its own router logits, top k, experts and shared expert computed in double), with the
// reference and the generated kernels, ragged row counts, a row count of 1 and a second call
// into the same (poisoned) output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/jit_kernels.h"
#include "core/error.h"
#include "graph/moe.h"

namespace jitllm {
namespace {

TEST(MoeRouting, SoftmaxTopKInOrderWithTiesToTheLowerId) {
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};  // experts 1 and 3 tie
  MoeRouting r{5, 3, MoeGating::Softmax, false, 0.0f};
  int32_t ids[3];
  float w[3];
  route_experts(logits, 1, r, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 4);
  double sum = 0;
  for (const float l : logits) sum += std::exp(double(l));
  EXPECT_NEAR(w[0], std::exp(2.0) / sum, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / sum, 1e-6);

  r.norm_weights = true;
  route_experts(logits, 1, r, ids, w);
  const double chosen = 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / chosen, 1e-6);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-6);

  // Softmax over the chosen only (gpt-oss) is the renormalised softmax; a scale multiplies.
  float w2[3];
  r = MoeRouting{5, 3, MoeGating::SoftmaxChosen, false, 2.5f};
  route_experts(logits, 1, r, ids, w2);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(w2[j], 2.5f * w[j], 1e-6);
}

TEST(MoeRouting, EveryExpertAndBadCountsRefused) {
  const float logits[] = {3.0f, 1.0f, 2.0f, -4.0f, 0.0f, 5.0f};  // 2 rows of 3 experts
  int32_t ids[6];
  float w[6];
  route_experts(logits, 2, MoeRouting{3, 3, MoeGating::Softmax, true, 0.0f}, ids, w);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 6), (std::vector<int32_t>{0, 2, 1, 2, 1, 0}));
  EXPECT_THROW(route_experts(logits, 2, MoeRouting{3, 4, MoeGating::Softmax, true, 0.0f}, ids, w), Error);
  EXPECT_THROW(route_experts(logits, 2, MoeRouting{3, 0, MoeGating::Softmax, true, 0.0f}, ids, w), Error);
}

// DeepSeek-V3's routing: sigmoid probabilities, a selection bias for the choice only, groups
// scored by their best two (llama.cpp) and only the best groups' experts eligible; the weights
// are the unbiased probabilities, renormalised and scaled. DeepSeek-V2's groups by their best.
TEST(MoeRouting, SigmoidBiasAndGroupLimitedChoice) {
  // 8 experts in 4 groups of 2: {0,1} {2,3} {4,5} {6,7}.
  const float logits[] = {2.0f, -3.0f, 1.5f, 1.4f, 0.0f, 0.1f, 2.5f, -4.0f};
  const float bias[] = {0.0f, 0.0f, 0.0f, 0.0f, 0.9f, 0.0f, 0.0f, 0.0f};
  auto sig = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  MoeRouting r{8, 2, MoeGating::Sigmoid, false, 0.0f};
  int32_t ids[2];
  float w[2];
  route_experts(logits, 1, r, ids, w);  // no groups, no bias: the two largest logits
  EXPECT_EQ(ids[0], 6);
  EXPECT_EQ(ids[1], 0);
  EXPECT_FLOAT_EQ(w[0], sig(2.5f));
  // The bias lifts expert 4 (0.5 + 0.9) into the choice; its weight stays unbiased.
  r.selection_bias = bias;
  route_experts(logits, 1, r, ids, w);
  EXPECT_EQ(ids[0], 4);
  EXPECT_EQ(ids[1], 6);
  EXPECT_FLOAT_EQ(w[0], sig(0.0f));
  // Groups kept 2 of 4 by the sum of their best two selection scores: {4,5} (1.40 + 0.52) and
  // {2,3} (0.82 + 0.80) beat {6,7} (0.92 + 0.02) and {0,1} (0.88 + 0.05): 6 and 0 are out.
  r.n_group = 4;
  r.n_group_used = 2;
  r.norm_weights = true;
  r.weights_scale = 2.5f;
  route_experts(logits, 1, r, ids, w);
  EXPECT_EQ(ids[0], 4);
  EXPECT_EQ(ids[1], 2);
  const float sum = sig(0.0f) + sig(1.5f);
  EXPECT_NEAR(w[0], 2.5f * sig(0.0f) / sum, 1e-6);
  EXPECT_NEAR(w[1], 2.5f * sig(1.5f) / sum, 1e-6);
  // Scored by their best alone, {4,5} (1.40) and {6,7} (0.92) are kept.
  r.group_score = MoeGroupScore::Max;
  route_experts(logits, 1, r, ids, w);
  EXPECT_EQ(ids[0], 4);
  EXPECT_EQ(ids[1], 6);
  // Softmax with groups (DeepSeek-V2's group_limited_greedy): probabilities, not logits, chosen.
  MoeRouting v2{8, 2, MoeGating::Softmax, false, 1.5f};
  v2.n_group = 4;
  v2.n_group_used = 1;
  v2.group_score = MoeGroupScore::Max;
  route_experts(logits, 1, v2, ids, w);
  EXPECT_EQ(ids[0], 6);  // the group {6,7} holds the best expert
  EXPECT_EQ(ids[1], 7);
  double z = 0;
  for (const float l : logits) z += std::exp(double(l));
  EXPECT_NEAR(w[0], 1.5 * std::exp(2.5) / z, 1e-6);
  // Groups that cannot hold k experts, or do not divide the experts, are refused.
  v2.n_used = 3;
  EXPECT_THROW(route_experts(logits, 1, v2, ids, w), Error);
  v2.n_group = 3;
  EXPECT_THROW(route_experts(logits, 1, v2, ids, w), Error);
}

TEST(MoeRouting, GroupsRowsByExpertInRowOrder) {
  // 4 rows choosing 2 of 4 experts: expert 3 is chosen by nobody.
  const std::vector<int32_t> ids = {1, 0, 2, 1, 0, 1, 2, 0};
  const ExpertGroups g = group_by_expert(ids, 4, 2, 4);
  EXPECT_EQ(g.offset, (std::vector<int32_t>{0, 3, 6, 8, 8}));
  EXPECT_EQ(g.order, (std::vector<int32_t>{1, 4, 7, 0, 3, 5, 2, 6}));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(g.order[size_t(g.where[i])], int32_t(i));
  EXPECT_THROW(group_by_expert(std::vector<int32_t>{0, 4}, 1, 2, 4), Error);
  EXPECT_THROW(group_by_expert(std::vector<int32_t>{0, 1, 2}, 1, 2, 4), Error);
}

TEST(MoeRouting, WeightedSumRowsAssignsAndChecks) {
  CpuOps ops;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<float> out(4, std::numeric_limits<float>::quiet_NaN());  // [2, 2] poisoned
  const Act xa{x.data(), 3, 2}, oa{out.data(), 2, 2};
  const std::vector<int32_t> rows = {2, 0, 1, 1};
  const std::vector<float> coef = {0.5f, 2.0f, 1.0f, -1.0f};
  for (int call = 0; call < 2; ++call) {
    ops.weighted_sum_rows(xa, rows, coef, oa);
    EXPECT_EQ(out, (std::vector<float>{0.5f * 5 + 2 * 1, 0.5f * 6 + 2 * 2, 0.0f, 0.0f}));
  }
  EXPECT_THROW(ops.weighted_sum_rows(xa, std::vector<int32_t>{3, 0, 1, 1}, coef, oa), Error);
  EXPECT_THROW(ops.weighted_sum_rows(xa, std::vector<int32_t>{0, 0, 1}, coef, oa), Error);
}

// A random F32 matrix [k, rows] (ne order) that outlives the TensorInfo viewing it.
struct Matrices {
  std::vector<std::vector<float>> store;
  std::mt19937 rng{21};
  TensorInfo make(int64_t k, int64_t rows, float scale) {
    std::normal_distribution<float> nd(0.0f, scale);
    store.emplace_back(size_t(k * rows));
    for (float& v : store.back()) v = nd(rng);
    TensorInfo t;
    t.name = "m" + std::to_string(store.size());
    t.type = QuantType::F32;
    t.shape = {k, rows};
    t.bytes = size_t(k * rows) * sizeof(float);
    t.data = reinterpret_cast<const uint8_t*>(store.back().data());
    return t;
  }
};

// out = w . x for a [k, rows] F32 matrix, in double.
std::vector<double> product(const TensorInfo& w, const std::vector<double>& x) {
  const auto* m = reinterpret_cast<const float*>(w.data);
  std::vector<double> out(size_t(w.shape[1]));
  for (int64_t r = 0; r < w.shape[1]; ++r) {
    double s = 0;
    for (int64_t i = 0; i < w.shape[0]; ++i) s += double(m[r * w.shape[0] + i]) * x[size_t(i)];
    out[size_t(r)] = s;
  }
  return out;
}

std::vector<double> gated_ffn(const TensorInfo& gate, const TensorInfo& up, const TensorInfo& down,
                              const std::vector<double>& x) {
  std::vector<double> g = product(gate, x);
  const std::vector<double> u = product(up, x);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return product(down, g);
}

struct MoeCase {
  bool shared, norm;
  const char* kernels;
};

class MoeFfnTwin : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeFfnTwin, MatchesANaivePerRowLoop) {
  const MoeCase& tc = GetParam();
  const int64_t n_embd = 40, ff = 24, sff = 20;
  const int E = 6, k = 2;
  Matrices m;
  const TensorInfo router = m.make(n_embd, E, 0.5f);
  std::vector<TensorInfo> gate, up, down;
  for (int e = 0; e < E; ++e) {
    gate.push_back(m.make(n_embd, ff, 0.2f));
    up.push_back(m.make(n_embd, ff, 0.2f));
    down.push_back(m.make(ff, n_embd, 0.2f));
  }
  const TensorInfo sgate_w = m.make(n_embd, 1, 0.3f), sg = m.make(n_embd, sff, 0.2f),
                   su = m.make(n_embd, sff, 0.2f), sd = m.make(sff, n_embd, 0.2f);
  MoeExperts w;
  w.router = &router;
  w.gate = gate;
  w.up = up;
  w.down = down;
  if (tc.shared) {
    w.shared_gate = &sgate_w;
    w.shared_ffn_gate = &sg;
    w.shared_ffn_up = &su;
    w.shared_ffn_down = &sd;
  }
  const MoeRouting r{E, k, MoeGating::Softmax, tc.norm, 0.0f};
  CpuOps ops(std::string(tc.kernels) == "jit" ? jit_kernels() : reference_kernels());
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const int64_t n : {int64_t(9), int64_t(1), int64_t(37)}) {
    ops.begin(Batch{}, KvLayout{});
    std::vector<float> x(size_t(n * n_embd));
    for (float& v : x) v = nd(rng);
    MoeScratch s;
    s.logits = ops.alloc(n, E);
    s.xs = ops.alloc(n * k, n_embd);
    s.gate = ops.alloc(n * k, ff);
    s.up = ops.alloc(n * k, ff);
    s.ys = ops.alloc(n * (k + 1), n_embd);
    s.shared_gate = ops.alloc(n, 1);
    s.sgate = ops.alloc(n, sff);
    s.sup = ops.alloc(n, sff);
    const Act out = ops.alloc(n, n_embd);
    std::fill(out.data, out.data + n * n_embd, std::numeric_limits<float>::quiet_NaN());
    for (int call = 0; call < 2; ++call) {
      ops.moe_ffn(Act{x.data(), n, n_embd}, w, r, s, out);
      double worst = 0, scale = 0;
      for (int64_t row = 0; row < n; ++row) {
        const std::vector<double> xr(x.begin() + row * n_embd, x.begin() + (row + 1) * n_embd);
        const std::vector<double> l = product(router, xr);
        std::vector<float> lf(l.begin(), l.end());
        int32_t ids[k];
        float wt[k];
        route_experts(lf.data(), 1, r, ids, wt);
        std::vector<double> want(size_t(n_embd), 0.0);
        for (int j = 0; j < k; ++j) {
          const std::vector<double> y = gated_ffn(gate[size_t(ids[j])], up[size_t(ids[j])], down[size_t(ids[j])], xr);
          for (int64_t i = 0; i < n_embd; ++i) want[size_t(i)] += wt[j] * y[size_t(i)];
        }
        if (tc.shared) {
          const double g = 1.0 / (1.0 + std::exp(-product(sgate_w, xr)[0]));
          const std::vector<double> y = gated_ffn(sg, su, sd, xr);
          for (int64_t i = 0; i < n_embd; ++i) want[size_t(i)] += g * y[size_t(i)];
        }
        for (int64_t i = 0; i < n_embd; ++i) {
          worst = std::max(worst, std::fabs(double(out.data[row * n_embd + i]) - want[size_t(i)]));
          scale = std::max(scale, std::fabs(want[size_t(i)]));
        }
      }
      EXPECT_LT(worst, 1e-4 * scale) << n << " rows, call " << call;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeFfnTwin,
                         ::testing::Values(MoeCase{false, true, "reference"},
                                           MoeCase{true, false, "reference"},
                                           MoeCase{false, true, "jit"},
                                           MoeCase{true, false, "jit"}),
                         [](const ::testing::TestParamInfo<MoeCase>& i) {
                           return std::string(i.param.shared ? "shared_" : "") +
                                  (i.param.norm ? "norm_" : "") + i.param.kernels;
                         });

}  // namespace
}  // namespace jitllm
