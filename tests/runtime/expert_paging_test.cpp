// Paged MoE experts under a host budget (runtime/host_budget.h, runtime/expert_cache.h) on
// jitllm synth's tiny-moe (qwen3moe, 2 layers of 8 experts, 2 used): a budget that holds the
// dense weights and only a few experts gives the resident run's logits bit for bit, over a
// prompt in chunks and greedy decode steps, while experts are evicted and read again; a damaged
// expert page is an error naming the layer, the expert and the tensor; a budget below one
// layer's working set is refused with the number needed; a GGUF is converted once into the
// cache; the machine's budget is read from /proc/meminfo and the memory cgroup.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>

#include "convert/convert.h"
#include "convert/synth.h"
#include "core/error.h"
#include "io/jlm_reader.h"
#include "runtime/engine.h"
#include "runtime/host_budget.h"
#include "runtime/model_loader.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class ExpertPaging : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("jitllm-paging-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    gguf_ = (dir_ / "tiny-moe.gguf").string();
    jlm_ = (dir_ / "tiny-moe.jlm").string();
    write_synth_model(gguf_, "tiny-moe", "q8_0", 3);
    convert_to_jlm(gguf_, jlm_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static EngineOptions options(const std::string& budget) {
    EngineOptions o;
    o.cpu_kernels = "jit";
    o.batch_invariant = true;  // the same kernels for a row whatever its step holds
    o.host_budget = budget;
    o.print_placement = false;
    return o;
  }
  // A budget that holds everything but the experts, and `slots` experts.
  static std::string budget_for(int64_t slots) {
    Engine resident(load_model_file(jlm_), options(""));
    const HostPlan& p = resident.host_plan();
    EXPECT_FALSE(p.paged);
    EXPECT_EQ(p.experts, 16);
    return std::to_string(p.dense_bytes + p.kv_bytes + p.overhead + uint64_t(slots) * p.slot_bytes);
  }
  // Logits of a 40-token prompt in chunks of 7, then of 12 greedy decode steps.
  static std::vector<float> run(Engine& e) {
    std::vector<int32_t> prompt(40);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 11) % 512);
    auto s = e.new_session(256);
    std::vector<float> all = e.prefill(*s, prompt, true, 7);
    int32_t t = int32_t(std::max_element(all.end() - 512, all.end()) - (all.end() - 512));
    for (int i = 0; i < 12; ++i) {
      const std::vector<float> l = e.decode(*s, t);
      all.insert(all.end(), l.begin(), l.end());
      t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    }
    return all;
  }

  static inline fs::path dir_;
  static inline std::string gguf_, jlm_;
};

TEST_F(ExpertPaging, LogitsEqualTheResidentRunBitForBit) {
  Engine resident(load_model_file(jlm_), options(""));
  ASSERT_EQ(resident.expert_cache(), nullptr);
  const std::vector<float> want = run(resident);
  for (const int64_t slots : {2, 3, 9}) {
    const std::string budget = budget_for(slots);
    Engine paged(load_model_file(jlm_), options(budget));
    ASSERT_NE(paged.expert_cache(), nullptr) << slots;
    EXPECT_TRUE(paged.host_plan().paged);
    EXPECT_EQ(paged.host_plan().slots, slots);
    EXPECT_EQ(paged.expert_cache()->capacity(), slots);
    const std::vector<float> got = run(paged);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << slots;
    // The reads went the way they were meant to where the machine allows it (O_DIRECT is
    // refused on tmpfs, io_uring by some sandboxes; both fall back, and say so here).
    if (!paged.expert_cache()->direct_io()) std::fprintf(stderr, "note: %s refused O_DIRECT\n", jlm_.c_str());
    if (!paged.expert_cache()->uring()) std::fprintf(stderr, "note: io_uring is not available here\n");
    const ExpertCacheStats st = paged.expert_cache()->stats();
    EXPECT_GT(st.misses, uint64_t(16)) << "experts were evicted and read again";
    if (slots > 8) EXPECT_GT(st.hits, uint64_t(0)) << "a layer's experts stay while the other's run";
    EXPECT_EQ(st.bytes_read, st.misses * paged.expert_cache()->slot_bytes());
  }
}

TEST_F(ExpertPaging, AHitIsNotEvictedByAMissOfTheSameFetchAndRunsFirst) {
  Engine resident(load_model_file(jlm_), options(""));
  ExpertCache cache(jlm_, resident.model(), 2 * resident.host_plan().slot_bytes);
  ASSERT_EQ(cache.capacity(), 2);
  const int32_t first[] = {0, 1}, second[] = {2, 0};
  cache.fetch(0, first);
  for (const int32_t e : first) cache.wait(0, e);
  cache.release();
  cache.fetch(0, second);  // expert 0 is the least recently used, yet this fetch needs it
  // The hit first (it waits for no read), then the miss; each once.
  int32_t id = -1;
  EXPECT_NE(cache.next(0, &id).gate->data, nullptr);
  EXPECT_EQ(id, 0);
  EXPECT_NE(cache.next(0, &id).gate->data, nullptr);
  EXPECT_EQ(id, 2);
  EXPECT_NE(error_of([&] { cache.next(0, &id); }).find("handed out"), std::string::npos);
  cache.release();
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 3u);
  EXPECT_NE(error_of([&] { ExpertCache small(jlm_, resident.model(), resident.host_plan().slot_bytes); })
                .find("fewer than a token's 2"),
            std::string::npos);
}

TEST_F(ExpertPaging, MoreExpertsInTurnThanSlotsKeepAStableSet) {
  // Experts 0..3 asked for in turn, one at a time, with 3 slots: LRU would evict each just
  // before its turn comes again and never hit; the cache keeps two and churns the third slot.
  Engine resident(load_model_file(jlm_), options(""));
  ExpertCache cache(jlm_, resident.model(), 3 * resident.host_plan().slot_bytes);
  ASSERT_EQ(cache.capacity(), 3);
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round)
    for (int32_t e = 0; e < 4; ++e) {
      const int32_t one[] = {e};
      cache.fetch(1, one);
      cache.wait(1, e);
      cache.release();
    }
  EXPECT_GE(cache.stats().hits, uint64_t(2 * (kRounds - 2))) << cache.stats().misses << " misses";
}

TEST_F(ExpertPaging, ADamagedExpertIsAnErrorNamingIt) {
  const std::string damaged = (dir_ / "damaged.jlm").string();
  fs::copy_file(jlm_, damaged, fs::copy_options::overwrite_existing);
  const JlmFile file = JlmFile::open(damaged);
  uint64_t at = 0;
  for (const JlmGroup& g : file.groups())
    if (g.kind == JlmGroupKind::Expert && g.block == 1 && g.expert == 5) at = g.offset + 100;
  ASSERT_GT(at, 0u);
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(at));
    const char c = char(f.get() ^ 0x5a);
    f.seekp(std::streamoff(at));
    f.put(c);
  }
  const std::string budget = budget_for(4);
  // Opening does not read the experts (they are checked as they are paged in).
  std::unique_ptr<Engine> e;
  std::vector<int32_t> prompt(200);  // every expert is chosen by some row of a long prompt
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 131 + 7) % 512);
  const auto step = [&] {
    if (!e) e = std::make_unique<Engine>(load_model_file(damaged), options(budget));
    auto s = e->new_session(256);
    e->prefill(*s, prompt, false);
  };
  const std::string error = error_of(step);
  EXPECT_NE(error.find("expert 5 of layer 1 is damaged"), std::string::npos) << error;
  EXPECT_NE(error.find("blk.1.ffn_"), std::string::npos) << error;
  // The damaged bytes were not kept as the expert: the next step reads it again and says so.
  ASSERT_TRUE(e);
  EXPECT_EQ(error_of(step), error);
  // Resident, the experts are checked as the engine loads.
  EXPECT_NE(error_of([&] { Engine r(load_model_file(damaged), options("")); }).find("expert 5"),
            std::string::npos);
}

TEST_F(ExpertPaging, ABudgetBelowOneLayersWorkingSetIsRefusedWithTheNumberNeeded) {
  const std::string budget = budget_for(1);
  const std::string error = error_of([&] { Engine e(load_model_file(jlm_), options(budget)); });
  EXPECT_NE(error.find("--host-budget"), std::string::npos) << error;
  EXPECT_NE(error.find("needs at least"), std::string::npos) << error;
  EXPECT_NE(error.find("2 experts"), std::string::npos) << error;
  EXPECT_NE(error_of([] { resolve_host_budget("6Q"); }).find("--host-budget '6Q'"), std::string::npos);
  EXPECT_NE(error_of([] { resolve_host_budget("0"); }).find("more than nothing"), std::string::npos);
}

// $XDG_CACHE_HOME set for a scope, the previous value back after it.
struct CacheHome {
  explicit CacheHome(const fs::path& dir) {
    if (const char* v = std::getenv("XDG_CACHE_HOME")) had = true, saved = v;
    setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  }
  ~CacheHome() {
    if (had) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else unsetenv("XDG_CACHE_HOME");
  }
  bool had = false;
  std::string saved;
};

TEST_F(ExpertPaging, AGgufIsConvertedOnceIntoTheCacheWhenABudgetIsGiven) {
  const fs::path cache = dir_ / "cache";
  const CacheHome home(cache);
  const std::string budget = budget_for(3);
  std::string first;
  fs::file_time_type when;
  for (int round = 0; round < 2; ++round) {
    Engine e(load_model_file(gguf_), options(budget));
    ASSERT_NE(e.expert_cache(), nullptr);
    EXPECT_EQ(e.model().file().format, "jlm");
    if (round == 0) {
      first = e.model().file().path;
      when = fs::last_write_time(first);
      EXPECT_EQ(fs::path(first).parent_path(), cache / "jitllm");
    } else {
      EXPECT_EQ(e.model().file().path, first);
      EXPECT_EQ(fs::last_write_time(first), when) << "converted again";
    }
  }
}

TEST(HostBudget, TheMachinesBudgetComesFromMemAvailableAndTheCgroup) {
  EXPECT_EQ(parse_mem_available("MemTotal: 100 kB\nMemAvailable:    2048 kB\nFoo: 1 kB\n"), 2048u * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 100 kB\n"), 0u);
  EXPECT_EQ(parse_cgroup_limit("max\n"), 0u);
  EXPECT_EQ(parse_cgroup_limit("9223372036854771712\n"), 0u);  // v1's "no limit"
  EXPECT_EQ(parse_cgroup_limit("6442450944\n"), 6442450944u);
  EXPECT_EQ(parse_cgroup_limit(""), 0u);
  EXPECT_EQ(default_host_budget({.mem_available = 10000, .cgroup_limit = 0}), 9000u);
  EXPECT_EQ(default_host_budget({.mem_available = 10000, .cgroup_limit = 5000}), 4500u);
  EXPECT_EQ(default_host_budget({.mem_available = 0, .cgroup_limit = 5000}), 4500u);
  EXPECT_GT(read_host_memory().mem_available, 0u);
  EXPECT_EQ(resolve_host_budget("6G"), uint64_t(6) << 30);
}

}  // namespace
}  // namespace jitllm
