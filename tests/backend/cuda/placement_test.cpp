// A model placed partly on the card (--vram-budget forcing k of n layers there, the rest on the
// host's generated kernels) against the all-on-card run: a 300-token prompt over several KV
// pages in chunks, then greedy decode steps (captured and replayed as CUDA graphs). k = n is
// the all-on-card plan again (bitwise), k = 0 the host engine (bitwise); in between, logits
// within the format's tolerance and the same greedy tokens. With two cards, the model split
// over both equals the one-card run bit for bit (same kernels; only the residual crosses).
// JITLLM_PLACEMENT_MODEL=FILE adds a bigger model (device_run.sh placement: the synthetic
// Llama-3.2-1B Q4_K_M, 16 layers, tied head); the oracle fixtures have 2 layers. Label gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "backend/cuda/device.h"
#include "cuda_test_util.h"
#include "runtime/backends.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

using jitllm::testing::oracle_path;

constexpr int64_t kPromptTokens = 300;
constexpr int kDecodeSteps = 24;

EngineOptions base(const std::string& devices) {
  EngineOptions o;
  o.devices = devices;
  o.kv_page_tokens = 64;  // the prompt spans 5 pages
  o.kv_tokens = 512;
  o.print_placement = false;
  return o;
}

struct RunOut {
  std::vector<float> logits;  // prompt rows, then one row per decode step
  std::vector<int32_t> fed;   // the decode steps' input tokens
};

// The prompt in chunks of 128 (every row's logits), then greedy decode steps fed with `feed`
// when given (so every engine sees the same contexts), else with its own greedy choice.
RunOut run(Engine& e, const std::vector<int32_t>& prompt, const std::vector<int32_t>* feed) {
  RunOut out;
  const int64_t nv = e.config().n_vocab;
  auto s = e.new_session(512);
  out.logits = e.prefill(*s, prompt, true, 128);
  std::vector<float> last(out.logits.end() - nv, out.logits.end());
  for (int i = 0; i < kDecodeSteps; ++i) {
    const int32_t t = feed ? (*feed)[size_t(i)]
                           : int32_t(std::max_element(last.begin(), last.end()) - last.begin());
    out.fed.push_back(t);
    last = e.decode(*s, t);
    out.logits.insert(out.logits.end(), last.begin(), last.end());
  }
  return out;
}

std::vector<int32_t> random_prompt(int64_t vocab) {
  std::mt19937 rng(11);
  std::vector<int32_t> ids(static_cast<size_t>(kPromptTokens));
  for (auto& t : ids) t = int32_t(rng() % uint32_t(vocab - 1)) + 1;
  return ids;
}

// A budget that holds exactly layers [first, first + k) (k = n: also the head and the
// embedding).
std::string budget_for(const PlacementCosts& c, int k, int first = 0) {
  size_t b = c.scratch;
  for (int il = first; il < first + k; ++il) b += c.layer_weights[size_t(il)] + c.layer_kv;
  if (k == int(c.layer_weights.size())) b += c.head + (c.tied ? 0 : c.embedding);
  return std::to_string(b);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::isfinite(a[i]) ? std::fabs(a[i] - b[i]) : INFINITY);
  return m;
}

// Rows where the reference's top-2 margin exceeds 2 x tol must pick the same token.
void expect_same_greedy(const std::vector<float>& want, const std::vector<float>& got, int64_t nv,
                        float tol, const std::string& what) {
  for (size_t r = 0; r * size_t(nv) < want.size(); ++r) {
    const float* w = want.data() + r * size_t(nv);
    const float* g = got.data() + r * size_t(nv);
    std::vector<float> top(w, w + nv);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    if (top[0] - top[1] <= 2 * tol) continue;
    EXPECT_EQ(std::max_element(g, g + nv) - g, std::max_element(w, w + nv) - w)
        << what << " row " << r;
  }
}

// The oracle fixtures by name, or JITLLM_PLACEMENT_MODEL.
std::string model_path(const std::string& name) {
  if (name != "env") return oracle_path(name);
  const char* p = std::getenv("JITLLM_PLACEMENT_MODEL");
  return p ? p : "";
}

class CudaPlacement : public ::testing::TestWithParam<std::pair<const char*, float>> {};

TEST_P(CudaPlacement, KOfNLayersOnTheCardMatchTheAllOnCardRun) {
  JITLLM_REQUIRE_GPU();
  const auto [format, tol] = GetParam();
  const std::string path = model_path(format);
  if (path.empty()) GTEST_SKIP() << "JITLLM_PLACEMENT_MODEL is not set";
  const auto file = load_model_file(path);
  Engine all(file, base("cuda:0"));
  const int n = all.config().n_layer;
  const int64_t nv = all.config().n_vocab;
  ASSERT_EQ(all.placement().n_layers_on_cards(), n);
  ASSERT_EQ(all.placement().head_device, 0);
  const std::vector<int32_t> prompt = random_prompt(nv);
  const RunOut want = run(all, prompt, nullptr);
  Engine host(file, base("cpu"));
  const RunOut on_host = run(host, prompt, &want.fed);

  const PlacementCosts costs = card_costs(all.model(), base("cuda:0"));
  for (int k : std::set<int>{0, 1, n / 2, n - 1, n}) {
    EngineOptions o = base("cuda:0");
    o.vram_budget = budget_for(costs, k);
    Engine e(file, o);
    const Placement& p = e.placement();
    ASSERT_EQ(p.n_layers_on_cards(), k) << format << " budget " << o.vram_budget << "\n" << p.table();
    EXPECT_EQ(p.head_device, k == n ? 0 : kHostDevice) << p.table();
    for (int il = 0; il < n; ++il) EXPECT_EQ(p.layer_device[size_t(il)], il < k ? 0 : kHostDevice);
    const RunOut got = run(e, prompt, &want.fed);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    const float d = max_abs_diff(got.logits, want.logits);
    std::printf("[ cuda     ] %s: %d of %d layers on the card (budget %s B): max |diff| vs all on "
                "the card %.3g, vs the host engine %.3g\n",
                format, k, n, o.vram_budget.c_str(), d, max_abs_diff(got.logits, on_host.logits));
    if (k == n) {
      EXPECT_EQ(d, 0.0f) << "the whole model on the card again";
    } else if (k == 0) {
      EXPECT_EQ(max_abs_diff(got.logits, on_host.logits), 0.0f) << "everything on the host";
    }
    if (tol < 0) continue;  // a random 16-layer model: reported, see the note at the list
    EXPECT_LE(d, tol) << format << " k=" << k;
    expect_same_greedy(want.logits, got.logits, nv, tol, std::string(format) + " k=" + std::to_string(k));
  }
}

// Tolerances: twice the CPU oracle test's vs llama.cpp (0.03 quantized, 2e-3 F16), as the card
// and the host are each within it of llama.cpp's logits. The synthetic 1B (random weights, 16
// layers) is checked only where it must be exact (k = 0, k = n) and its differences reported:
// its layers amplify a rounding difference made early (H200, 300-token prompt: host vs card
// max |diff| 17.9 with layers 0.. on the host, 0.056 with only layers 8.. there), so no
// tolerance holds for it. The measured fixture rows: Q4_K_M 0.0236..0.0307, F16 0.0027.
INSTANTIATE_TEST_SUITE_P(Models, CudaPlacement,
                         ::testing::Values(std::make_pair("models/synth-llama.Q4_K_M.gguf", 0.06f),
                                           std::make_pair("models/synth-llama.F16.gguf", 4e-3f),
                                           std::make_pair("env", -1.0f)));

TEST(CudaPlacementCards, TwoCardsEqualOneCard) {
  JITLLM_REQUIRE_GPU();
  if (Device::count() < 2) GTEST_SKIP() << "one card on this machine: the two-card split needs two";
  std::vector<std::string> models = {oracle_path("models/synth-llama.Q4_K_M.gguf")};
  if (!model_path("env").empty()) models.push_back(model_path("env"));
  for (const std::string& path : models) {
    const auto file = load_model_file(path);
    EngineOptions probe = base("cuda:0");
    probe.print_placement = false;
    Engine sizing(file, probe);
    const int n = sizing.config().n_layer;
    const int64_t nv = sizing.config().n_vocab;
    const PlacementCosts costs = card_costs(sizing.model(), base("cuda"));
    // One card holding every layer and the head; the embedding there only when it is the head's
    // (tied) table, as on the two cards below, so both look the rows up in the same place.
    EngineOptions o1 = base("cuda:0");
    const size_t all = std::stoull(budget_for(costs, n));
    o1.vram_budget = std::to_string(all - (costs.tied ? 0 : costs.embedding));
    Engine one(file, o1);
    ASSERT_EQ(one.placement().n_layers_on_cards(), n) << one.placement().table();
    const std::vector<int32_t> prompt = random_prompt(nv);
    const RunOut want = run(one, prompt, nullptr);
    // "cuda" = every card; card 0 capped at half the layers, card 1 takes the rest and the head.
    EngineOptions o = base("cuda");
    o.vram_budget = budget_for(costs, n / 2) + ",1T";
    Engine two(file, o);
    const Placement& p = two.placement();
    std::printf("%s", p.table().c_str());
    ASSERT_EQ(p.devices[0].n_layers, n / 2);
    ASSERT_EQ(p.devices[1].first_layer, n / 2);
    ASSERT_EQ(p.devices[1].n_layers, n - n / 2);
    EXPECT_EQ(p.head_device, 1);
    EXPECT_EQ(p.embedding_device == kHostDevice, one.placement().embedding_device == kHostDevice);
    const RunOut got = run(two, prompt, &want.fed);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    const float d = max_abs_diff(got.logits, want.logits);
    std::printf("[ cuda     ] %s: two cards vs one max |diff| %.3g\n", path.c_str(), d);
    if (!costs.tied) EXPECT_EQ(d, 0.0f) << "same kernels, same embedding lookup: the same bits";
    if (!costs.tied) expect_same_greedy(want.logits, got.logits, nv, 0.0f, path + " two cards");
    // Cards then the host: card 0 and card 1 one layer each, the rest (and the head) on the host.
    o.vram_budget = budget_for(costs, 1) + "," + budget_for(costs, 1, 1);
    Engine three(file, o);
    ASSERT_EQ(three.placement().n_layers_on_cards(), 2) << three.placement().table();
    const RunOut got3 = run(three, prompt, &want.fed);
    const float d3 = max_abs_diff(got3.logits, want.logits);
    std::printf("[ cuda     ] %s: cards + host vs one card max |diff| %.3g\n", path.c_str(), d3);
    if (path != model_path("env")) {  // the random 16-layer model: reported (see above)
      EXPECT_LE(d3, 0.06f);
      expect_same_greedy(want.logits, got3.logits, nv, 0.06f, path + " cards + host");
    }
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
