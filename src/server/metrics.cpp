// Metrics: counters, gauges and fixed-bucket histograms rendered as Prometheus text.
#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace jitllm::server {

namespace {

// Latency buckets in seconds: 1 ms (a decode step on a card) .. 60 s.
const std::vector<double> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   30, 60};
const std::vector<double> kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128};

std::string number(double v) {
  if (v == double(int64_t(v))) return fmt::format("{}", int64_t(v));
  return fmt::format("{}", v);
}

}  // namespace

std::string labelled(std::string_view name, std::string_view key, std::string_view value) {
  std::string out(name);
  out += '{';
  out += key;
  out += "=\"";
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  out += "\"}";
  return out;
}

Metrics::Metrics() {
  describe("requests_total", "counter", "HTTP requests received, by endpoint");
  describe("requests_failed_total", "counter", "requests answered with an error status");
  describe("prompt_tokens_total", "counter", "prompt tokens processed");
  describe("prompt_tokens_cached_total", "counter", "prompt tokens reused from the prefix cache");
  describe("prefix_cache_hits_total", "counter", "requests that reused a cached prefix");
  describe("generated_tokens_total", "counter", "tokens generated");
  describe("sessions_cancelled_total", "counter", "sessions dropped after a client disconnect");
  describe("sequences_preempted_total", "counter",
           "running sequences parked because the KV cache was full (their KV recomputed later)");
  describe("sessions_active", "gauge", "sessions in the running batch");
  describe("requests_queued", "gauge", "requests waiting to join the batch");
  describe("kv_pages_used", "gauge", "KV cache pages in use");
  describe("kv_pages_total", "gauge", "KV cache pages in the pool");
  describe("time_to_first_token_seconds", "histogram", "request arrival to first token");
  describe("inter_token_latency_seconds", "histogram", "time between two tokens of a stream");
  describe("batch_size", "histogram", "sessions decoded together in one step");
  describe("step_seconds", "histogram", "one engine step (the device's work and the picks' copy home)");
  describe("scheduler_seconds_total", "counter",
           "the scheduler's time by phase: admit (admission and cancellations), picks (the "
           "step's inputs and logits picks), step (the engine), draw, emit (stop strings, text, "
           "events), retire (finished sequences, gauges)");
  describe("iteration_seconds", "histogram",
           "one scheduler iteration with work: admission, the steps, the draws and the events");
  histograms_["time_to_first_token_seconds"] = {kLatencyBuckets,
                                                std::vector<uint64_t>(kLatencyBuckets.size() + 1)};
  histograms_["inter_token_latency_seconds"] = {kLatencyBuckets,
                                                std::vector<uint64_t>(kLatencyBuckets.size() + 1)};
  histograms_["batch_size"] = {kBatchBuckets, std::vector<uint64_t>(kBatchBuckets.size() + 1)};
  for (const char* c : {"prompt_tokens_total", "prompt_tokens_cached_total",
                        "prefix_cache_hits_total", "generated_tokens_total",
                        "sessions_cancelled_total", "sequences_preempted_total",
                        "requests_failed_total"})
    counters_[c] = 0;
  describe("prefix_cache_sessions", "gauge", "finished sessions kept for prefix reuse");
  // Paged MoE experts (--host-budget below the model; runtime/expert_cache.h), per model.
  describe("expert_cache_hits_total", "counter", "experts a step asked for that were in memory");
  describe("expert_cache_misses_total", "counter", "experts read from disk");
  describe("expert_read_bytes_total", "counter", "bytes of expert pages read from disk");
  describe("expert_read_wait_seconds_total", "counter", "time steps waited for expert pages");
  // Gauges are per model (labelled by the scheduler that owns them), so none exist up front.
}

void Metrics::describe(const std::string& name, const std::string& type, const std::string& text) {
  help_[name] = {type, text};
}

void Metrics::add_counter(const std::string& name, double delta) {
  std::lock_guard lock(mutex_);
  counters_[name] += delta;
}

void Metrics::set_gauge(const std::string& name, double value) {
  std::lock_guard lock(mutex_);
  gauges_[name] = value;
}

void Metrics::observe(const std::string& name, double value) {
  std::lock_guard lock(mutex_);
  auto it = histograms_.find(name);
  if (it == histograms_.end())
    it = histograms_.emplace(name, Histogram{kLatencyBuckets,
                                             std::vector<uint64_t>(kLatencyBuckets.size() + 1)})
             .first;
  Histogram& h = it->second;
  const size_t bucket =
      size_t(std::lower_bound(h.bounds.begin(), h.bounds.end(), value) - h.bounds.begin());
  h.counts[bucket]++;
  h.sum += value;
  h.count++;
}

double Metrics::counter(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second;
}

double Metrics::gauge(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = gauges_.find(name);
  return it == gauges_.end() ? 0 : it->second;
}

uint64_t Metrics::histogram_count(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = histograms_.find(name);
  return it == histograms_.end() ? 0 : it->second.count;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  // Labelled series are stored as "name{label=\"x\"}"; HELP/TYPE are emitted once per base name.
  std::map<std::string, bool> described;
  auto header = [&](const std::string& series) {
    const std::string base = series.substr(0, series.find('{'));
    if (described[base]) return;
    described[base] = true;
    auto it = help_.find(base);
    if (it != help_.end()) {
      out += fmt::format("# HELP jitllm_{} {}\n", base, it->second.text);
      out += fmt::format("# TYPE jitllm_{} {}\n", base, it->second.type);
    }
  };
  for (const auto& [name, value] : counters_) {
    header(name);
    out += fmt::format("jitllm_{} {}\n", name, number(value));
  }
  for (const auto& [name, value] : gauges_) {
    header(name);
    out += fmt::format("jitllm_{} {}\n", name, number(value));
  }
  for (const auto& [name, h] : histograms_) {
    header(name);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      out += fmt::format("jitllm_{}_bucket{{le=\"{}\"}} {}\n", name, number(h.bounds[i]),
                         cumulative);
    }
    cumulative += h.counts.back();
    out += fmt::format("jitllm_{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
    out += fmt::format("jitllm_{}_sum {}\n", name, number(h.sum));
    out += fmt::format("jitllm_{}_count {}\n", name, h.count);
  }
  return out;
}

}  // namespace jitllm::server
