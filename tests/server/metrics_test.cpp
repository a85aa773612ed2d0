// Metrics: the Prometheus text has HELP/TYPE lines, labelled series and cumulative buckets.
#include "server/metrics.h"

#include <gtest/gtest.h>

namespace jitllm::server {
namespace {

TEST(Metrics, RendersPrometheusText) {
  Metrics m;
  m.add_counter("generated_tokens_total", 5);
  m.add_counter("generated_tokens_total", 2);
  m.add_counter("requests_total{endpoint=\"/v1/completions\"}");
  m.set_gauge("sessions_active", 3);
  m.observe("time_to_first_token_seconds", 0.02);
  m.observe("time_to_first_token_seconds", 0.3);
  m.observe("time_to_first_token_seconds", 100);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE jitllm_generated_tokens_total counter\n"
                      "jitllm_generated_tokens_total 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("jitllm_requests_total{endpoint=\"/v1/completions\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("jitllm_sessions_active 3\n"), std::string::npos);
  // Buckets are cumulative: 0.02 falls in le=0.025, 0.3 in le=0.5, 100 only in +Inf.
  EXPECT_NE(text.find("jitllm_time_to_first_token_seconds_bucket{le=\"0.01\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("jitllm_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("jitllm_time_to_first_token_seconds_bucket{le=\"0.5\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("jitllm_time_to_first_token_seconds_bucket{le=\"60\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("jitllm_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("jitllm_time_to_first_token_seconds_count 3\n"), std::string::npos);
  EXPECT_EQ(m.histogram_count("time_to_first_token_seconds"), 3u);
  EXPECT_DOUBLE_EQ(m.counter("generated_tokens_total"), 7);
}

TEST(Metrics, LabelValuesAreEscaped) {
  // A path like '/v1/x"} 1e9\njitllm_forged 1' must stay inside its label value.
  EXPECT_EQ(labelled("requests_total", "endpoint", "a\"} 1e9\nforged 1\\"),
            "requests_total{endpoint=\"a\\\"} 1e9\\nforged 1\\\\\"}");
  Metrics m;
  m.add_counter(labelled("requests_total", "endpoint", "x\"}\njitllm_forged 1"));
  const std::string text = m.render();
  EXPECT_EQ(text.find("\njitllm_forged"), std::string::npos) << text;
}

}  // namespace
}  // namespace jitllm::server
