// What the scheduler tests share: the pydoc model's engine and tokenizer with a Scheduler over
// them, greedy jobs, and waiting for a job's text.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "quant/types.h"
#include "runtime/model_loader.h"
#include "server/scheduler.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

struct Fixture {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Tokenizer> tok;
  Metrics metrics;
  std::unique_ptr<Scheduler> sched;
  explicit Fixture(int parallel, size_t cache = 8,
                   std::function<void(std::string_view)> fault_hook = {},
                   const std::string& model = testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf"),
                   bool deterministic = true, size_t max_kv_pages = 0,
                   const std::string& host_budget = "") {
    EngineOptions o;
    o.host_budget = host_budget;  // "": the machine's (everything resident for these models)
    o.kv_page_tokens = 16;
    o.max_kv_pages = max_kv_pages;  // 0: no cap (a capped pool: the scheduler's KV budget)
    o.batch_invariant = deterministic;  // kernels too (no AMX tiles)
    engine = std::make_unique<Engine>(load_model_file(model), o);
    tok = std::make_unique<Tokenizer>(engine->model().file().metadata);
    SchedulerOptions so;
    so.parallel = parallel;
    so.cache_sessions = cache;
    // Batch-invariant steps: the tests compare batched sequences with their solo runs.
    so.deterministic = deterministic;
    so.model_id = "pydoc";
    so.fault_hook = std::move(fault_hook);
    sched = std::make_unique<Scheduler>(*engine, *tok, metrics, so);
  }
};

inline std::shared_ptr<Job> greedy_job(const Tokenizer& tok, const std::string& prompt, int max_tokens) {
  auto job = std::make_shared<Job>();
  job->prompt = tok.encode(prompt, true);
  job->max_tokens = max_tokens;
  job->sampling.temperature = 0;
  return job;
}

struct Result {
  std::vector<std::string> text;
  std::vector<std::string> finish;
  Usage usage;
};

inline Result wait(Job& job) {
  Result r;
  r.text.resize(size_t(job.n));
  r.finish.resize(size_t(job.n));
  bool done = false;
  for (int spins = 0; !done && spins < 600; ++spins)
    for (JobEvent& ev : job.take(std::chrono::milliseconds(100), done)) {
      r.text.at(size_t(ev.index)) += ev.text;
      if (ev.finish_reason) r.finish[size_t(ev.index)] = *ev.finish_reason;
    }
  EXPECT_TRUE(done) << "job did not finish in 60 s";
  EXPECT_FALSE(job.error.has_value()) << (job.error ? job.error->what() : "");
  r.usage = job.usage;
  return r;
}

// The pydoc model with the embedding row of `token` made NaN (any prompt holding it gives NaN
// logits), written to a temporary file; returns its path ("" when token_embd's type is not one
// this knows how to poison).
inline std::string write_nan_embedding_model(int32_t token) {
  const std::string src = testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf");
  std::ifstream in(src, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  const GgufParsed parsed = parse_gguf(bytes.data(), bytes.size(), src);
  const TensorInfo* embd = nullptr;
  for (const TensorInfo& t : parsed.tensors)
    if (t.name == "token_embd.weight") embd = &t;
  if (!embd) return "";
  const size_t row = parsed.data_offset + embd->offset +
                     size_t(token) * (embd->bytes / size_t(embd->rows()));
  if (embd->type == QuantType::Q8_0 || embd->type == QuantType::F16) {
    const uint16_t nan_f16 = 0x7E00;  // Q8_0: the first block's scale; F16: the first value
    std::memcpy(bytes.data() + row, &nan_f16, 2);
  } else if (embd->type == QuantType::F32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data() + row, &nan, 4);
  } else {
    return "";
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nan-embedding-" + std::to_string(::getpid()) + ".gguf")).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              std::streamsize(bytes.size()));
  return path;
}

// Waits for a job that must fail; returns its error.
inline ApiError wait_error(Job& job) {
  bool done = false;
  for (int spins = 0; !done && spins < 600; ++spins) job.take(std::chrono::milliseconds(100), done);
  EXPECT_TRUE(done) << "job did not finish in 60 s";
  EXPECT_TRUE(job.error.has_value()) << "the job should have failed";
  return job.error.value_or(ApiError(0, "", "no error"));
}

}  // namespace jitllm::server
