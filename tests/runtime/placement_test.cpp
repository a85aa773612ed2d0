// Placement: the planner's rules (exact fits, one byte short, zero room, no cards, two cards,
// budgets, contiguous runs, the tied embedding), the --devices / --vram-budget parsers and their
// errors; and a split model on two host backends: the residual handed over between them and a
// backend holding only its own layers' KV give the same bits as one backend, and a reference /
// JIT split matches llama.cpp's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "backend/cpu/jit_kernels.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "backend/cpu/cpu_ops.h"
#include "runtime/cpu_kernels.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "runtime/placement.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

using testing::oracle_path;

// 4 layers of 100 bytes + 10 of KV each, a 50-byte head, a 40-byte embedding, 20 of scratch and
// 30 of reserve per card.
PlacementCosts four_layers() {
  PlacementCosts c;
  c.layer_weights = {100, 100, 100, 100};
  c.layer_kv = 10;
  c.head = 50;
  c.embedding = 40;
  c.scratch = 20;
  c.reserve = 30;
  return c;
}

// Free memory that holds exactly `layers` layers (+ the head, + the embedding) after reserve
// and scratch.
size_t exact(int layers, bool head, bool embd) {
  return 30 + 20 + size_t(layers) * 110 + (head ? 50 : 0) + (embd ? 40 : 0);
}

std::vector<CardBudget> one_card(size_t free, std::optional<size_t> budget = {}) {
  return {CardBudget{"cuda:0", free, budget}};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Placement, ExactFitTakesEverythingOneByteShortDropsTheLastUnit) {
  const PlacementCosts c = four_layers();
  Placement all = plan_placement(c, one_card(exact(4, true, true)));
  EXPECT_EQ(all.layer_device, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(all.head_device, 0);
  EXPECT_EQ(all.embedding_device, 0);
  EXPECT_EQ(all.devices[0].free_after, 30u);  // the reserve stays free
  EXPECT_EQ(all.devices[0].weight_bytes, 490u);
  EXPECT_EQ(all.devices[0].kv_bytes, 40u);

  // One byte short of the embedding: it stays on the host, nothing else moves.
  Placement no_embd = plan_placement(c, one_card(exact(4, true, true) - 1));
  EXPECT_EQ(no_embd.head_device, 0);
  EXPECT_EQ(no_embd.embedding_device, kHostDevice);
  EXPECT_EQ(no_embd.n_layers_on_cards(), 4);

  // One byte short of the head (with no embedding room): the head runs on the host.
  Placement no_head = plan_placement(c, one_card(exact(4, true, false) - 1));
  EXPECT_EQ(no_head.n_layers_on_cards(), 4);
  EXPECT_EQ(no_head.head_device, kHostDevice);
  // ... and the embedding may use what the head left (40 <= 49).
  EXPECT_EQ(no_head.embedding_device, 0);

  // One byte short of the fourth layer: 3 layers on the card; the head, which would fit in what
  // is left, stays on the host because runs are contiguous (the residual crosses once).
  Placement three = plan_placement(c, one_card(exact(4, false, false) - 1));
  EXPECT_EQ(three.layer_device, (std::vector<int>{0, 0, 0, kHostDevice}));
  EXPECT_EQ(three.head_device, kHostDevice);
  EXPECT_EQ(three.devices[0].first_layer, 0);
  EXPECT_EQ(three.devices[0].n_layers, 3);
  EXPECT_EQ(three.devices[1].name, "host");
  EXPECT_EQ(three.devices[1].first_layer, 3);
  EXPECT_EQ(three.devices[1].n_layers, 1);
  EXPECT_NE(three.table().find("offloaded 3/5 layers"), std::string::npos) << three.table();
}

TEST(Placement, ZeroRoomAndNoCardsRunEverythingOnTheHost) {
  const PlacementCosts c = four_layers();
  for (size_t free : {size_t(0), size_t(30), size_t(50), exact(1, false, false) - 1}) {
    Placement p = plan_placement(c, one_card(free));
    EXPECT_EQ(p.n_layers_on_cards(), 0) << free;
    EXPECT_EQ(p.head_device, kHostDevice) << free;
    EXPECT_EQ(p.embedding_device, kHostDevice) << free;
    EXPECT_EQ(p.devices[0].n_layers, 0);
  }
  Placement none = plan_placement(c, {});
  EXPECT_EQ(none.layer_device, (std::vector<int>(4, kHostDevice)));
  ASSERT_EQ(none.devices.size(), 1u);
  EXPECT_EQ(none.devices[0].name, "host");
  EXPECT_EQ(none.devices[0].n_layers, 4);
  EXPECT_TRUE(none.devices[0].head);
  EXPECT_NE(none.table().find("offloaded 0/5 layers"), std::string::npos) << none.table();
}

TEST(Placement, BudgetCapsTheFreeMemory) {
  const PlacementCosts c = four_layers();
  // Plenty free, budget for 2 layers (the budget counts scratch, not the reserve).
  Placement p = plan_placement(c, one_card(size_t(1) << 40, 20 + 2 * 110));
  EXPECT_EQ(p.layer_device, (std::vector<int>{0, 0, kHostDevice, kHostDevice}));
  EXPECT_EQ(p.devices[0].room, 220u);
  // A budget larger than the free memory changes nothing.
  Placement q = plan_placement(c, one_card(exact(2, false, false), size_t(1) << 40));
  EXPECT_EQ(q.n_layers_on_cards(), 2);
}

TEST(Placement, TwoCardsFillInOrderThenTheHost) {
  const PlacementCosts c = four_layers();
  std::vector<CardBudget> cards = {CardBudget{"cuda:0", exact(2, false, false), {}},
                                   CardBudget{"cuda:1", exact(1, true, false), {}}};
  Placement p = plan_placement(c, cards);
  EXPECT_EQ(p.layer_device, (std::vector<int>{0, 0, 1, kHostDevice}));
  EXPECT_EQ(p.head_device, kHostDevice);  // after a host layer the head stays on the host
  EXPECT_EQ(p.embedding_device, kHostDevice);
  EXPECT_EQ(p.devices[1].first_layer, 2);
  EXPECT_EQ(p.devices[1].n_layers, 1);

  cards[1].free_bytes = exact(2, true, false);
  Placement q = plan_placement(c, cards);
  EXPECT_EQ(q.layer_device, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(q.head_device, 1);
  EXPECT_TRUE(q.devices[1].head);
  EXPECT_EQ(q.devices[2].n_layers, 0);  // host
  EXPECT_NE(q.table().find("offloaded 5/5 layers"), std::string::npos) << q.table();

  // A first card too small for even one layer is skipped, not used for a later smaller unit.
  cards[0].free_bytes = exact(0, true, false);  // room for the head only
  cards[1].free_bytes = exact(4, true, false);
  Placement r = plan_placement(c, cards);
  EXPECT_EQ(r.layer_device, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(r.head_device, 1);
  EXPECT_EQ(r.devices[0].n_layers, 0);
  EXPECT_FALSE(r.devices[0].head);
}

TEST(Placement, RunsStayContiguousAndTheTiedTableCostsNothingTwice) {
  PlacementCosts c = four_layers();
  c.layer_weights = {100, 300, 100, 100};
  Placement p = plan_placement(c, one_card(30 + 20 + 250));
  EXPECT_EQ(p.layer_device, (std::vector<int>{0, kHostDevice, kHostDevice, kHostDevice}));

  c = four_layers();
  c.tied = true;
  c.head = 40;  // norm + the shared table
  // Exactly the layers and the head: the embedding (the same table) rides along for free.
  Placement t = plan_placement(c, one_card(exact(4, false, false) + 40));
  EXPECT_EQ(t.head_device, 0);
  EXPECT_EQ(t.embedding_device, 0);
  EXPECT_EQ(t.devices[0].weight_bytes, 440u);
}

TEST(Placement, VramBudgetStrings) {
  const size_t G = size_t(1) << 30, M = size_t(1) << 20;
  EXPECT_EQ(parse_vram_budget(""), std::vector<size_t>{});
  EXPECT_EQ(parse_vram_budget("6G"), std::vector<size_t>{6 * G});
  EXPECT_EQ(parse_vram_budget("6GB"), std::vector<size_t>{6 * G});
  EXPECT_EQ(parse_vram_budget("6GiB"), std::vector<size_t>{6 * G});
  EXPECT_EQ(parse_vram_budget("512M"), std::vector<size_t>{512 * M});
  EXPECT_EQ(parse_vram_budget("1.5g"), std::vector<size_t>{G + G / 2});
  EXPECT_EQ(parse_vram_budget("4096"), std::vector<size_t>{4096});
  EXPECT_EQ(parse_vram_budget("64K"), std::vector<size_t>{65536});
  EXPECT_EQ(parse_vram_budget("6G,4G"), (std::vector<size_t>{6 * G, 4 * G}));
  for (const char* bad : {"abc", "6X", "6G,,4G", "-1G", "G", "1.2.3G", "6G,", "99999999999T"}) {
    const std::string msg = error_of([&] { parse_vram_budget(bad); });
    EXPECT_NE(msg.find("--vram-budget"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_EQ(budgets_for_cards({}, 2), (std::vector<std::optional<size_t>>{{}, {}}));
  EXPECT_EQ(budgets_for_cards({5}, 2), (std::vector<std::optional<size_t>>{5, 5}));
  EXPECT_EQ(budgets_for_cards({5, 7}, 2), (std::vector<std::optional<size_t>>{5, 7}));
  const std::string msg = error_of([] { budgets_for_cards({5, 7}, 3); });
  EXPECT_NE(msg.find("--vram-budget: 2 sizes for 3 cards"), std::string::npos) << msg;
}

TEST(Placement, DevicesStrings) {
  EXPECT_TRUE(parse_devices("cpu").cards.empty());
  EXPECT_FALSE(parse_devices("cpu").all_cards);
  EXPECT_TRUE(parse_devices("cuda").all_cards);
  EXPECT_EQ(parse_devices("cuda:3").cards, std::vector<int>{3});
  EXPECT_EQ(parse_devices("cuda:1,cuda:0").cards, (std::vector<int>{1, 0}));
  EXPECT_EQ(parse_devices("cuda:0,cpu").cards, std::vector<int>{0});
  for (const char* bad : {"tpu:0", "cuda:x", "cuda:", "cuda:0,cuda:0", "cuda,cuda:1", "gpu"}) {
    const std::string msg = error_of([&] { parse_devices(bad); });
    EXPECT_NE(msg.find(std::string("--devices ") + bad), std::string::npos) << msg;
  }
}

TEST(Placement, EngineFlagsWithoutACard) {
  const auto file = load_model_file(oracle_path("models/synth-llama.Q8_0.gguf"));
  EngineOptions o;
  o.devices = "cpu";
  o.vram_budget = "6G";  // ignored on the host, but still a valid flag
  o.print_placement = false;
  Engine e(file, o);
  EXPECT_EQ(e.placement().n_layers_on_cards(), 0);
  o.vram_budget = "6Q";
  EXPECT_NE(error_of([&] { Engine bad(file, o); }).find("--vram-budget '6Q'"), std::string::npos);
  o.vram_budget = "";
  o.devices = "cuda:zero";
  EXPECT_NE(error_of([&] { Engine bad(file, o); }).find("--devices cuda:zero"), std::string::npos);
}

// An Ops that holds its own KV for layers [first, first + count) only, like a card: every host
// page of a sequence is shadowed by a private page of `count` layers, and attention() is
// refused for any other layer. Everything else is an inner CpuOps with its own scratch.
class PrivateKvOps final : public Ops {
 public:
  PrivateKvOps(const CpuKernels& k, int first, int count)
      : inner_(k), first_(first), count_(count) {}
  void begin(const Batch& batch, const KvLayout& kv) override {
    KvLayout mine = kv;
    mine.n_layer = count_;
    tables_.assign(batch.seqs.size(), {});
    seqs_.clear();
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
      for (int64_t p = 0; p < batch.seqs[s].n_pages; ++p) {
        uint8_t* host = batch.seqs[s].pages[p];
        auto it = pages_.find(host);
        if (it == pages_.end())
          it = pages_.emplace(host, make_aligned<uint8_t>(mine.page_bytes(), 64)).first;
        tables_[s].push_back(it->second.get());
      }
      seqs_.push_back(KvSeq{tables_[s].data(), int64_t(tables_[s].size())});
    }
    Batch b = batch;
    b.seqs = seqs_;
    inner_.begin(b, mine);
  }
  Act alloc(int64_t rows, int64_t cols) override { return inner_.alloc(rows, cols); }
  void embed(const TensorInfo& t, Act out) override { inner_.embed(t, out); }
  void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) override {
    inner_.rms_norm(x, w, eps, out);
  }
  void matmul(const TensorInfo& w, Act x, Act out) override { inner_.matmul(w, x, out); }
  void matmul_group(Act x, std::span<const MatmulOut> outs) override {
    inner_.matmul_group(x, outs);
  }
  void rope(Act x, int h, int d, const RopeParams& p) override { inner_.rope(x, h, d, p); }
  void attention(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec) override {
    if (il < first_ || il >= first_ + count_)
      throw_error("PrivateKvOps: layer {} is not one of {} + {}", il, first_, count_);
    ++attention_calls;
    inner_.attention(il - first_, q, k, v, out, spec);
  }
  void swiglu(Act g, Act u, Act out) override { inner_.swiglu(g, u, out); }
  void add(Act acc, Act x) override { inner_.add(acc, x); }
  void geglu(Act g, Act u, Act out) override { inner_.geglu(g, u, out); }
  void swiglu_oai(Act g, Act u, Act out, float alpha, float limit) override {
    inner_.swiglu_oai(g, u, out, alpha, limit);
  }
  void add_bias(Act x, const std::vector<float>& b) override { inner_.add_bias(x, b); }
  void scale(Act x, float s) override { inner_.scale(x, s); }
  void softcap(Act x, float cap) override { inner_.softcap(x, cap); }
  void copy_cols(Act x, int64_t first, Act out) override { inner_.copy_cols(x, first, out); }
  void copy_cols_into(Act x, Act out, int64_t first) override { inner_.copy_cols_into(x, out, first); }
  void select_rows(Act x, std::span<const int32_t> rows, Act out) override {
    inner_.select_rows(x, rows, out);
  }
  void weighted_sum_rows(Act x, std::span<const int32_t> rows, std::span<const float> coef,
                         Act out) override {
    inner_.weighted_sum_rows(x, rows, coef, out);
  }
  void read(Act x, float* host) override { inner_.read(x, host); }
  void write(Act x, const float* host) override {
    ++writes;
    inner_.write(x, host);
  }
  int attention_calls = 0, writes = 0;

 private:
  CpuOps inner_;
  int first_, count_;
  std::map<uint8_t*, AlignedPtr<uint8_t>> pages_;
  std::vector<std::vector<uint8_t*>> tables_;
  std::vector<KvSeq> seqs_;
};

// Runs a prompt (one step, all logits) and then `steps` greedy decode steps of one session on
// `route`; returns every logits row.
std::vector<float> run(Model& model, const OpsRoute& route, std::span<const int32_t> prompt,
                       int steps, int64_t page_tokens = 8) {
  KvLayout kv;
  kv.n_layer = model.config().n_layer;
  kv.kv_dim = model.config().kv_dim();
  kv.page_tokens = page_tokens;
  KvPagePool pool(kv);
  Session s(pool, 256);
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<float> all;
  std::vector<int32_t> next(prompt.begin(), prompt.end());
  for (int step = 0; step <= steps; ++step) {
    const int64_t n = int64_t(next.size());
    std::vector<int32_t> pos(static_cast<size_t>(n), 0), seq(pos), out(pos);
    for (int64_t i = 0; i < n; ++i) {
      pos[size_t(i)] = int32_t(s.position() + i);
      out[size_t(i)] = int32_t(i);
    }
    s.reserve(n);
    const KvSeq seqs[] = {s.kv()};
    Batch b{next, pos, seq, seqs, out};
    std::vector<float> logits(size_t(n * n_vocab));
    model.forward(route, b, kv, logits.data());
    s.append(next.data(), n);
    all.insert(all.end(), logits.begin(), logits.end());
    const float* last = logits.data() + (n - 1) * n_vocab;
    next = {int32_t(std::max_element(last, last + n_vocab) - last)};
  }
  return all;
}

const std::vector<int32_t> kPrompt = {1,   450, 439, 293, 110, 289, 307, 122, 113, 285, 114,
                                      123, 300, 17,  42,  511, 3,   77,  260, 401, 99,  200};

// The synthetic fixture (2 layers) and pydoc-llama (6 layers, trained).
class SplitModel : public ::testing::TestWithParam<const char*> {};

TEST_P(SplitModel, TwoHostBackendsEqualOneBitwise) {
  const auto file = load_model_file(oracle_path(GetParam()));
  auto model = create_model(file);
  const int n_layer = model->config().n_layer;
  std::vector<int32_t> prompt = kPrompt;
  for (auto& t : prompt) t %= int32_t(model->config().n_vocab);
  const CpuKernels& jit = resolve_cpu_kernels("");
  CpuOps one(jit);
  const std::vector<float> want = run(*model, OpsRoute::single(one, n_layer), prompt, 12);
  for (int k : {0, 1, n_layer / 2, n_layer - 1, n_layer}) {
    // Layers [0, k) (and the embedding) on A with its own KV, the rest and the head on B.
    PrivateKvOps a(jit, 0, k);
    CpuOps b(jit);
    OpsRoute r;
    r.embed = &a;
    for (int il = 0; il < n_layer; ++il) r.layers.push_back(il < k ? &a : static_cast<Ops*>(&b));
    r.head = &b;
    const std::vector<float> got = run(*model, r, prompt, 12);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "k=" << k;
    EXPECT_EQ(a.attention_calls, 13 * k) << k;
    EXPECT_EQ(a.writes, 0);  // the embedding starts on A: nothing crosses into it
  }
  // Three backends: the embedding and the head on A, layers [0, h) on B and the rest on C, each
  // with its own KV: the residual is handed over at every change (A -> B -> C -> A).
  const int h = n_layer / 2;
  PrivateKvOps b(jit, 0, h), c(jit, h, n_layer - h);
  CpuOps a(jit);
  OpsRoute r;
  r.embed = &a;
  for (int il = 0; il < n_layer; ++il) r.layers.push_back(il < h ? &b : &c);
  r.head = &a;
  const std::vector<float> got = run(*model, r, prompt, 5);
  ASSERT_LE(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  EXPECT_EQ(b.writes, 6);  // one hand-over into each per step
  EXPECT_EQ(c.writes, 6);
}

INSTANTIATE_TEST_SUITE_P(Models, SplitModel,
                         ::testing::Values("models/synth-llama.Q4_K_M.gguf",
                                           "pydoc-llama/pydoc-llama.Q8_0.gguf"));

// Layers [0, k) on the reference kernels and the rest on the generated ones: both follow
// llama.cpp's numerics, so the split model must match llama.cpp's logits like either alone.
TEST(SplitModelOracle, ReferenceAndJitHalvesMatchLlamaCpp) {
  const auto file = load_model_file(oracle_path("models/synth-llama.Q8_0.gguf"));
  auto model = create_model(file);
  const int n_layer = model->config().n_layer;
  const auto meta = nlohmann::json::parse(testing::read_text(oracle_path("logits/synth-llama.Q8_0.rand64.json")));
  const std::vector<int32_t> prompt = meta["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<float> want = testing::read_f32(oracle_path("logits/synth-llama.Q8_0.rand64.logits.f32"));
  CpuOps ref(reference_kernels()), jit(resolve_cpu_kernels(""));
  OpsRoute r;
  r.embed = &ref;
  for (int il = 0; il < n_layer; ++il)
    r.layers.push_back(il < n_layer / 2 ? &ref : &jit);
  r.head = &jit;
  const std::vector<float> got = run(*model, r, prompt, 0, 256);
  ASSERT_EQ(got.size(), want.size());
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  std::printf("reference/JIT split vs llama.cpp (Q8_0 rand64, %zu rows): max |diff| %.3g\n",
              got.size() / size_t(model->config().n_vocab), worst);
  EXPECT_LT(worst, 0.03f);  // the oracle README's tolerance for quantized formats
}

}  // namespace
}  // namespace jitllm
