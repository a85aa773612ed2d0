// Mixture of experts on the card: the routing kernel against route_experts (graph/moe.h), the
// indexed matvecs against each expert's own matvec (bit for bit: the same bodies over the same
// rows), the grouped matvecs against the per-pair ones, and the engine on a synthetic qwen3moe
// file (jitllm synth tiny-moe, Q4_K_M) against the CPU engine through every path of
// CudaOps::moe_ffn, decoding captured and replayed as graphs. Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <unistd.h>

#include "backend/cuda/packed_weight.h"
#include "core/tuning.h"
#include "convert/synth.h"
#include "cuda_test_util.h"
#include "graph/moe.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"

namespace jitllm::cuda::test {
namespace {

std::vector<int32_t> ints_from_device(const DeviceBuffer& b, size_t n) {
  std::vector<int32_t> v(n);
  b.download(v.data(), n * sizeof(int32_t));
  return v;
}

TEST(CudaMoe, RouteEqualsHostRouting) {
  // Logits from a few levels (ties: the lower id first), every gating rule, renormalised or not,
  // scaled or not; a row of NaN still chooses k distinct experts in range.
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(-12, 12);
  for (const int E : {8, 60, 128, 256}) {
    for (const int k : {1, 2, 8}) {
      for (const MoeGating gating : {MoeGating::Softmax, MoeGating::SoftmaxChosen}) {
        for (const bool norm : {false, true}) {
          const MoeRouting r{E, k, gating, norm, norm ? 2.5f : 0.0f};
          const int64_t n = 37;
          std::vector<float> logits(size_t(n * E));
          for (float& v : logits) v = float(level(rng)) * 0.125f;
          std::fill(logits.begin() + 5 * E, logits.begin() + 6 * E, NAN);  // row 5
          const DeviceBuffer dl = to_device(logits);
          DeviceBuffer ids(size_t(n * k) * 4), w(size_t(n * k) * 4);
          G->kernels->moe_route(dl.get(), n, E, k, gating == MoeGating::Softmax, norm,
                                r.weights_scale, ids.get(), w.get(), *G->stream);
          G->stream->sync();
          const std::vector<int32_t> got_ids = ints_from_device(ids, size_t(n * k));
          const std::vector<float> got_w = from_device(w, size_t(n * k));
          std::vector<int32_t> want_ids(size_t(n * k));
          std::vector<float> want_w(size_t(n * k));
          route_experts(logits.data(), n, r, want_ids.data(), want_w.data());
          for (int64_t row = 0; row < n; ++row) {
            const auto at = [&](const auto& v, int j) { return v[size_t(row * k + j)]; };
            if (row == 5) {
              std::set<int32_t> chosen;
              for (int j = 0; j < k; ++j) {
                EXPECT_TRUE(at(got_ids, j) >= 0 && at(got_ids, j) < E);
                chosen.insert(at(got_ids, j));
              }
              EXPECT_EQ(chosen.size(), size_t(k)) << "NaN row, " << E << " experts";
              continue;
            }
            for (int j = 0; j < k; ++j) {
              ASSERT_EQ(at(got_ids, j), at(want_ids, j))
                  << E << " experts, k " << k << ", row " << row << " slot " << j;
              EXPECT_NEAR(at(got_w, j), at(want_w, j), 1e-6f * std::max(1.0f, std::fabs(at(want_w, j))));
            }
          }
        }
      }
    }
  }
}

// One projection of E random experts of `type` on the card, and its table of addresses.
struct Experts {
  std::vector<DeviceWeight> w;
  DeviceBuffer tab;
  CudaKernels::ExpertTable table;
  Experts(QuantType type, int E, int64_t rows, int64_t k, std::mt19937& rng) {
    std::vector<uint64_t> host;
    for (int e = 0; e < E; ++e) {
      const std::vector<uint8_t> raw = random_weights(type, rows, k, rng, e == 1 ? 3 : 0);
      w.push_back(DeviceWeight::upload(pack_weight(type, raw.data(), rows, k)));
      host.push_back(w.back().buf.get());
      host.push_back(w.back().buf.get() + w.back().scale_offset);
    }
    tab = DeviceBuffer(host.size() * 8);
    tab.upload(host.data(), host.size() * 8);
    table = {tab.get(), w[0].kind, rows, k, E};
  }
};

TEST(CudaMoe, IndexedMatvecsEqualEachExpertsMatvec) {
  // Pairs of 3 rows choosing 2 of 8 experts (one expert twice, one with zero blocks): each pair's
  // SwiGLU row and down row equal the plain matvecs of its expert on its row, bit for bit, twice
  // into the same buffers.
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(9);
  const int E = 8, k = 2;
  const int64_t n = 3, n_embd = 512, ff = 256;
  for (const auto& [gate_type, down_type] :
       {std::pair{QuantType::Q4_K, QuantType::Q6_K}, std::pair{QuantType::Q8_0, QuantType::Q4_K},
        std::pair{QuantType::F16, QuantType::F16}}) {
    SCOPED_TRACE(quant_name(gate_type));
    const Experts gate(gate_type, E, ff, n_embd, rng), up(gate_type, E, ff, n_embd, rng);
    const Experts down(down_type, E, n_embd, ff, rng);
    const std::vector<int32_t> ids = {3, 1, 6, 3, 0, 7};  // [n][k]
    const std::vector<float> x = random_floats(size_t(n * n_embd), rng);
    const DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * n_embd));
    DeviceBuffer dids(ids.size() * 4);
    dids.upload(ids.data(), ids.size() * 4);
    const int64_t pairs = n * k;
    DeviceBuffer q8x(CudaKernels::q8_bytes(n, n_embd));
    const Q8Buffers qx{q8x.get(), q8x.get() + CudaKernels::q8_ds_offset(n, n_embd), 0};
    DeviceBuffer act(size_t(pairs * ff) * 4), aq(size_t(pairs * ff) * 2 + 1024), ys(size_t(pairs * n_embd) * 4);
    const size_t q_bytes = (size_t(pairs * ff) + 255) / 256 * 256;
    const Q8Buffers qa{aq.get(), aq.get() + q_bytes, 0};
    std::vector<float> got_act, got_ys;
    for (int rep = 0; rep < 2; ++rep) {
      G->kernels->matmul_ids_swiglu(gate.table, up.table, dids.get(), pairs, k, dx.get(), qx, false,
                                    act.get(), qa, 0.0f, *G->stream);
      G->kernels->matmul_ids(down.table, dids.get(), pairs, 1, act.get(), qa, true, ys.get(), *G->stream);
      G->stream->sync();
      const std::vector<float> a = from_device(act, size_t(pairs * ff));
      const std::vector<float> y = from_device(ys, size_t(pairs * n_embd));
      if (rep == 1) {
        EXPECT_EQ(a, got_act);
        EXPECT_EQ(y, got_ys);
      }
      got_act = a;
      got_ys = y;
    }
    for (int64_t p = 0; p < pairs; ++p) {
      const int e = ids[size_t(p)];
      const DeviceBuffer row = to_device(std::vector<float>(x.begin() + (p / k) * n_embd,
                                                            x.begin() + (p / k + 1) * n_embd),
                                         size_t(kMaxMatvecTile * n_embd));
      DeviceBuffer q1(CudaKernels::q8_bytes(1, n_embd)), q2(CudaKernels::q8_bytes(1, ff));
      DeviceBuffer h(size_t(ff) * 4 * kMaxMatvecTile), hq(CudaKernels::q8_bytes(1, ff)), y(size_t(n_embd) * 4);
      const MatmulSeg segs[2] = {{&gate.w[size_t(e)], 0, 0}, {&up.w[size_t(e)], 0, 0}};
      const Q8Buffers b1{q1.get(), q1.get() + CudaKernels::q8_ds_offset(1, n_embd), 0};
      const Q8Buffers bh{hq.get(), hq.get() + CudaKernels::q8_ds_offset(1, ff), 0};
      G->kernels->matmul_swiglu(segs, row.get(), 1, b1, *G->stream, false, h.get(), bh);
      G->kernels->matmul(down.w[size_t(e)], h.get(), 1, y.get(), bh, *G->stream, true);
      G->stream->sync();
      const std::vector<float> want_act = from_device(h, size_t(ff));
      const std::vector<float> want_y = from_device(y, size_t(n_embd));
      EXPECT_EQ(std::vector<float>(got_act.begin() + p * ff, got_act.begin() + (p + 1) * ff), want_act)
          << "pair " << p << " (expert " << e << ")";
      EXPECT_EQ(std::vector<float>(got_ys.begin() + p * n_embd, got_ys.begin() + (p + 1) * n_embd), want_y)
          << "pair " << p << " (expert " << e << ")";
    }
  }
}

TEST(CudaMoe, GroupedMatvecsEqualPerPairMatvecs) {
  // 7 rows choosing 3 of 8 experts (experts chosen by several rows, one by none): moe_sort's
  // order equals group_by_expert's, and the grouped matvecs over the rows in that order give
  // each pair the per-pair kernels' bits, at every tile, twice into the same buffers.
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(17);
  const int E = 8, k = 3;
  const int64_t n = 7, n_embd = 512, ff = 256, pairs = n * k, padded = pairs + 8;
  const std::vector<int32_t> ids = {3, 1, 6, 3, 0, 7, 1, 3, 6, 2, 3, 0,
                                    6, 1, 3, 3, 0, 1, 7, 6, 2};  // expert 4 and 5: no row
  const ExpertGroups want = group_by_expert(ids, n, k, E);
  DeviceBuffer dids(ids.size() * 4), sorted(size_t(E + 1 + 2 * pairs) * 4);
  dids.upload(ids.data(), ids.size() * 4);
  const CUdeviceptr offset = sorted.get(), src = offset + size_t(E + 1) * 4, where = src + size_t(pairs) * 4;
  G->kernels->moe_sort(dids.get(), pairs, E, k, offset, src, where, *G->stream);
  G->stream->sync();
  std::vector<int32_t> got(size_t(E + 1 + 2 * pairs));
  sorted.download(got.data(), got.size() * 4);
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + E + 1), want.offset);
  for (int64_t i = 0; i < pairs; ++i) {
    EXPECT_EQ(got[size_t(E + 1 + i)], want.order[size_t(i)] / k) << "position " << i;
    EXPECT_EQ(got[size_t(E + 1 + pairs + i)], want.where[size_t(i)]) << "pair " << i;
  }
  for (const auto& [gate_type, down_type] :
       {std::pair{QuantType::Q4_K, QuantType::Q6_K}, std::pair{QuantType::Q8_0, QuantType::Q8_0},
        std::pair{QuantType::F16, QuantType::F16}}) {
    SCOPED_TRACE(quant_name(gate_type));
    const Experts gate(gate_type, E, ff, n_embd, rng), up(gate_type, E, ff, n_embd, rng);
    const Experts down(down_type, E, n_embd, ff, rng);
    const std::vector<float> x = random_floats(size_t(n * n_embd), rng);
    // Per pair: the reference.
    const DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * n_embd));
    DeviceBuffer q8x(CudaKernels::q8_bytes(n, n_embd));
    const Q8Buffers qx{q8x.get(), q8x.get() + CudaKernels::q8_ds_offset(n, n_embd), 0};
    DeviceBuffer act(size_t(pairs * ff) * 4), aq(size_t(pairs * ff) * 2 + 1024), ys(size_t(pairs * n_embd) * 4);
    const Q8Buffers qa{aq.get(), aq.get() + (size_t(pairs * ff) + 255) / 256 * 256, 0};
    G->kernels->matmul_ids_swiglu(gate.table, up.table, dids.get(), pairs, k, dx.get(), qx, false,
                                  act.get(), qa, 0.0f, *G->stream);
    G->kernels->matmul_ids(down.table, dids.get(), pairs, 1, act.get(), qa, true, ys.get(), *G->stream);
    G->stream->sync();
    const std::vector<float> want_act = from_device(act, size_t(pairs * ff));
    const std::vector<float> want_ys = from_device(ys, size_t(pairs * n_embd));
    // Grouped: the rows gathered in expert order on the card.
    DeviceBuffer xs(size_t(padded * n_embd) * 4), gact(size_t(padded * ff) * 4), gys(size_t(pairs * n_embd) * 4);
    DeviceBuffer xq(size_t(padded * n_embd) * 2 + 1024), gq(size_t(padded * ff) * 2 + 1024);
    const Q8Buffers qxs{xq.get(), xq.get() + (size_t(padded * n_embd) + 255) / 256 * 256, 0};
    const Q8Buffers qg{gq.get(), gq.get() + (size_t(padded * ff) + 255) / 256 * 256, 0};
    G->kernels->gather_rows(dx.get(), xs.get(), src, pairs, int(n_embd), *G->stream);
    G->kernels->quantize_q8(xs.get(), pairs, n_embd, qxs, *G->stream);
    for (const int nt : {1, 2, 4, 8}) {
      for (int rep = 0; rep < 2; ++rep) {
        G->kernels->matmul_grouped_swiglu(gate.table, up.table, offset, nt, xs.get(), qxs, gact.get(),
                                          qg, 0.0f, *G->stream);
        G->kernels->matmul_grouped(down.table, offset, nt, gact.get(), qg, gys.get(), *G->stream);
        G->stream->sync();
        const std::vector<float> a = from_device(gact, size_t(pairs * ff));
        const std::vector<float> y = from_device(gys, size_t(pairs * n_embd));
        for (int64_t p = 0; p < pairs; ++p) {
          const int64_t at = want.where[size_t(p)];
          ASSERT_EQ(std::vector<float>(a.begin() + at * ff, a.begin() + (at + 1) * ff),
                    std::vector<float>(want_act.begin() + p * ff, want_act.begin() + (p + 1) * ff))
              << "tile " << nt << ", pair " << p << ", call " << rep;
          ASSERT_EQ(std::vector<float>(y.begin() + at * n_embd, y.begin() + (at + 1) * n_embd),
                    std::vector<float>(want_ys.begin() + p * n_embd, want_ys.begin() + (p + 1) * n_embd))
              << "tile " << nt << ", pair " << p << ", call " << rep;
        }
      }
    }
  }
}

TEST(CudaMoe, GroupedTileFollowsTheRowsAnExpertGets) {
  EXPECT_EQ(CudaKernels::grouped_tile(1, 8, 128), 1);
  EXPECT_EQ(CudaKernels::grouped_tile(8, 8, 128), 2);   // 64 pairs on ~52 experts
  EXPECT_EQ(CudaKernels::grouped_tile(32, 8, 128), 4);  // 256 on ~112
  EXPECT_EQ(CudaKernels::grouped_tile(64, 8, 128), 8);  // 512 on ~126
  EXPECT_EQ(CudaKernels::grouped_tile(64, 2, 8), 8);
}

EngineOptions on(const char* devices) {
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = devices;
  return o;
}

// jitllm synth's tiny-moe (qwen3moe: 8 experts, 2 a token) at Q4_K_M.
std::shared_ptr<const ModelFile> tiny_moe() {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("jitllm-tiny-moe-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  write_synth_model(path, "tiny-moe", "q4_k_m", 3);
  auto file = load_model_file(path);
  std::filesystem::remove(path);  // mapped: the name can go
  return file;
}

// Every path of CudaOps::moe_ffn: the 100-token prompt through the host grouping and the GEMMs;
// with JITLLM_CUDA_MOE_GROUPED=4 the chunks of 5 grouped, with 65 per pair; decoding per pair.
class CudaMoePaths : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaMoePaths, SynthQwen3MoeOnTheCardEqualsTheCpuEngine) {
  JITLLM_REQUIRE_GPU();
  const auto file = tiny_moe();
  std::optional<tuning::ScopedOverride> grouped(std::in_place, "JITLLM_CUDA_MOE_GROUPED", GetParam());
  Engine cpu(file, on("cpu")), card(file, on("cuda"));
  grouped.reset();
  const int64_t V = card.config().n_vocab;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(int32_t((i * 37 + 11) % 500 + 3));
  auto cs = cpu.new_session();
  const std::vector<float> want = cpu.prefill(*cs, prompt, true, 256);
  float scale = 0;
  for (const float v : want) scale = std::max(scale, std::fabs(v));
  for (const int64_t chunk : {int64_t(256), int64_t(5)}) {
    auto s = card.new_session();
    const std::vector<float> got = card.prefill(*s, prompt, true, chunk);
    ASSERT_EQ(got.size(), want.size());
    float diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::fabs(got[i] - want[i]));
    EXPECT_LT(diff, 0.02f * scale) << "chunk " << chunk;
    // 24 decode steps on both engines (the card's captured and replayed), both fed the CPU's
    // greedy tokens, so a near-tie in random weights cannot make them part.
    auto c2 = cpu.new_session();
    cpu.prefill(*c2, prompt, false, 256);
    std::vector<float> lc(want.end() - V, want.end());
    float worst = 0;
    for (int i = 0; i < 24; ++i) {
      const int32_t t = int32_t(std::max_element(lc.begin(), lc.end()) - lc.begin());
      lc = cpu.decode(*c2, t);
      const std::vector<float> lg = card.decode(*s, t);
      for (int64_t j = 0; j < V; ++j) worst = std::max(worst, std::fabs(lc[size_t(j)] - lg[size_t(j)]));
    }
    EXPECT_LT(worst, 0.02f * scale) << "chunk " << chunk << ", decoding";
    std::printf("[ cuda tiny-moe grouped from %s rows, chunk %lld: max |diff| %.4g prompt, %.4g decoding, of %.3g\n",
                GetParam(), (long long)chunk, diff, worst, scale);
  }
}

INSTANTIATE_TEST_SUITE_P(GroupedFrom, CudaMoePaths, ::testing::Values("4", "65"));

TEST(CudaMoe, GraphReplayEqualsDirectLaunches) {
  // MoE decode steps route on the card, so they are captured and replayed like dense ones, and
  // give the direct launches' bits; one session (per pair), then 5 decoding together (grouped, as
  // JITLLM_CUDA_MOE_GROUPED=4 asks).
  JITLLM_REQUIRE_GPU();
  const auto file = tiny_moe();
  auto run = [&](const char* graph) {
    std::optional<tuning::ScopedOverride> g(std::in_place, "JITLLM_CUDA_GRAPH", graph);
    std::optional<tuning::ScopedOverride> grouped(std::in_place, "JITLLM_CUDA_MOE_GROUPED", "4");
    Engine e(file, on("cuda"));
    g.reset();
    grouped.reset();
    auto s = e.new_session(128);
    std::vector<float> l = e.prefill(*s, std::vector<int32_t>{1, 22, 333, 44}, false), all;
    for (int i = 0; i < 40; ++i) {
      l = e.decode(*s, int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
      all.insert(all.end(), l.begin(), l.end());
    }
    std::vector<std::unique_ptr<Session>> many;
    std::vector<std::vector<int32_t>> tokens;
    for (int i = 0; i < 5; ++i) {
      many.push_back(e.new_session(64));
      tokens.push_back({int32_t(3 + 100 * i)});
    }
    for (int step = 0; step < 6; ++step) {
      std::vector<StepInput> in;
      for (int i = 0; i < 5; ++i) in.push_back(StepInput{many[size_t(i)].get(), tokens[size_t(i)]});
      const std::vector<float> out = e.step(in);
      all.insert(all.end(), out.begin(), out.end());
      const int64_t V = e.config().n_vocab;
      for (int i = 0; i < 5; ++i)
        tokens[size_t(i)] = {int32_t(std::max_element(out.begin() + i * V, out.begin() + (i + 1) * V) -
                                     (out.begin() + i * V))};
    }
    return all;
  };
  const std::vector<float> direct = run("0"), graphs = run("1");
  ASSERT_EQ(direct.size(), graphs.size());
  EXPECT_EQ(direct, graphs);
}

}  // namespace
}  // namespace jitllm::cuda::test
