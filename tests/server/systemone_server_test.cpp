// What the server adds to System One (app/systemone_scoring.h): its prefix cache, from which a
// second call about the same state reuses the state in whole chunks and answers bitwise the
// same; and the HTTP shape of a refusal (400 invalid_request_error naming the param and code).
#include <gtest/gtest.h>

#include "app/request_error.h"
#include "app/systemone.h"
#include "app/systemone_fixture.h"
#include "app/systemone_scoring.h"
#include "runtime/model_loader.h"
#include "server/api_error.h"
#include "server/prefix_cache.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;
using namespace app;

TEST(SystemOneServer, PrefixCacheReusesTheStateBitwise) {
  const app::test::SystemOneCase c = app::test::pydoc_systemone_case();
  Engine& engine = *c.engine;
  const SystemOnePlan& plan = c.plan;
  PrefixCache cache(4);
  const SystemOneResult r = evaluate_systemone(plan, engine, &cache, 512, /*chunk=*/8);
  ASSERT_EQ(r.label_probs.size(), 3u);
  EXPECT_EQ(r.tokens_cached, 0);
  // The same state again: reused from the cache in whole chunks, bitwise the same answers.
  const SystemOneResult again = evaluate_systemone(plan, engine, &cache, 512, 8);
  EXPECT_GE(again.tokens_cached, 16);
  EXPECT_EQ(again.tokens_cached % 8, 0);
  EXPECT_LT(again.tokens_run, r.tokens_run);
  EXPECT_EQ(again.label_probs, r.label_probs);
}

TEST(SystemOneServer, RefusalsAre400sNamingTheParam) {
  try {
    parse_systemone_request({{"questions", {{"a", {{"type", "noul"}, {"instructions", "x"}}}}}});
    ADD_FAILURE() << "accepted a request without a state";
  } catch (const RequestError& re) {
    const ApiError e = api_error(re);
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.body()["error"]["type"], "invalid_request_error");
    EXPECT_EQ(e.body()["error"]["param"], "body.state");
    EXPECT_EQ(e.body()["error"]["code"], "invalid_value");
  }

  EngineOptions o;
  o.cpu_kernels = "reference";
  Engine engine(load_model_file(testing::oracle_path("pydoc-llama/pydoc-llama.Q8_0.gguf")), o);
  const Tokenizer tok(engine.model().file().metadata);
  std::string state;
  for (int i = 0; i < 100; ++i) state += "The function returns a value. ";
  const SystemOneRequest req = parse_systemone_request(
      {{"state", state}, {"questions", {{"a", {{"type", "noul"}, {"instructions", "ok?"}}}}}});
  const SystemOnePlan plan = plan_systemone(
      req, [&](const SystemOneQuestion& q) { return systemone_plain_prompt(req.state, q.instructions); },
      [&](const std::string& t) { return tok.encode(t, true); });
  try {
    evaluate_systemone(plan, engine, nullptr, 128);
    ADD_FAILURE() << "accepted a state longer than the context";
  } catch (const RequestError& re) {
    const ApiError e = api_error(re);
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.body()["error"]["param"], "state");
    EXPECT_EQ(e.body()["error"]["code"], "context_length_exceeded");
  }
}

}  // namespace
}  // namespace jitllm::server
