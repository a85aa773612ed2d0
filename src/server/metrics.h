// Server metrics in the Prometheus text exposition format (GET /metrics): counters, gauges and
// histograms with fixed buckets. Thread-safe; updates are a mutex-protected add, which is cheap
// next to a model step.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm::server {

// "name{key=\"value\"}" with value escaped as the exposition format asks (backslash, quote,
// newline), so no label value can end its series or forge another.
std::string labelled(std::string_view name, std::string_view key, std::string_view value);

class Metrics {
 public:
  Metrics();

  void add_counter(const std::string& name, double delta = 1.0);
  void set_gauge(const std::string& name, double value);
  void observe(const std::string& histogram, double value);

  double counter(const std::string& name) const;
  double gauge(const std::string& name) const;
  uint64_t histogram_count(const std::string& name) const;

  // The whole exposition, with # HELP / # TYPE lines, names prefixed "jitllm_".
  std::string render() const;

 private:
  struct Histogram {
    std::vector<double> bounds;    // upper bounds, ascending (the +Inf bucket is implicit)
    std::vector<uint64_t> counts;  // per bucket, not cumulative; size bounds+1
    double sum = 0;
    uint64_t count = 0;
  };
  struct Help {
    std::string type, text;
  };
  void describe(const std::string& name, const std::string& type, const std::string& text);

  mutable std::mutex mutex_;
  std::map<std::string, double> counters_, gauges_;
  std::map<std::string, Histogram> histograms_;
  std::map<std::string, Help> help_;
};

}  // namespace jitllm::server
