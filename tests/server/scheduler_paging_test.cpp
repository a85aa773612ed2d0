// jitllmd over a model whose experts are paged (--host-budget below the model): requests are
// served with the text the resident model gives, and /metrics exports the expert cache's
// counters (hits, misses, bytes read, time waited) for the model.
#include <gtest/gtest.h>

#include <filesystem>

#include "convert/convert.h"
#include "convert/synth.h"
#include "scheduler_fixture.h"

namespace jitllm::server {
namespace {

namespace fs = std::filesystem;

// The counter's value in the exposition (-1: absent).
double exported(const std::string& text, const std::string& series) {
  const size_t at = text.find(series + " ");
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size() + 1));
}

TEST(SchedulerPaging, PagedExpertsServeTheResidentTextAndExportTheirCounters) {
  const fs::path dir = fs::temp_directory_path() / ("jitllm-sched-paging-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string gguf = (dir / "tiny-moe.gguf").string(), jlm = (dir / "tiny-moe.jlm").string();
  write_synth_model(gguf, "tiny-moe", "q8_0", 5);
  convert_to_jlm(gguf, jlm);
  std::string resident_text;
  std::string budget;
  {
    Fixture f(1, 8, {}, jlm);
    ASSERT_EQ(f.engine->expert_cache(), nullptr);
    const HostPlan& p = f.engine->host_plan();
    budget = std::to_string(p.dense_bytes + p.kv_bytes + p.overhead + 3 * p.slot_bytes);
    auto job = greedy_job(*f.tok, "the quick brown fox", 24);
    f.sched->submit(job);
    resident_text = wait(*job).text.at(0);
    EXPECT_EQ(f.metrics.render().find("expert_cache"), std::string::npos);
  }
  Fixture f(1, 8, {}, jlm, true, 0, budget);
  ASSERT_NE(f.engine->expert_cache(), nullptr);
  auto job = greedy_job(*f.tok, "the quick brown fox", 24);
  f.sched->submit(job);
  EXPECT_EQ(wait(*job).text.at(0), resident_text);
  const std::string text = f.metrics.render();
  EXPECT_NE(text.find("# TYPE jitllm_expert_cache_misses_total counter"), std::string::npos);
  EXPECT_GT(exported(text, "jitllm_expert_cache_misses_total{model=\"pydoc\"}"), 0.0) << text;
  EXPECT_GE(exported(text, "jitllm_expert_cache_hits_total{model=\"pydoc\"}"), 0.0);
  EXPECT_GT(exported(text, "jitllm_expert_read_bytes_total{model=\"pydoc\"}"), 0.0);
  EXPECT_GE(exported(text, "jitllm_expert_read_wait_seconds_total{model=\"pydoc\"}"), 0.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace jitllm::server
