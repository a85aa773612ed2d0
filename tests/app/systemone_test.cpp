// System One: request validation, and the answers of the forked, prefix-sharing evaluation equal
// a from-scratch computation (every candidate prefilled alone, no forks, no cache). With the
// server's prefix cache, a second call with the same state reuses it and answers identically:
// tests/server/systemone_server_test.cpp.
#include "app/systemone.h"

#include <gtest/gtest.h>

#include <cmath>

#include "app/request_error.h"
#include "app/systemone_fixture.h"
#include "app/systemone_scoring.h"
#include "runtime/model_loader.h"
#include "sample/logprobs.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::app {
namespace {

using json = nlohmann::json;

// Refused, naming `param` (the server answers it as a 400 with that param:
// tests/server/systemone_server_test.cpp).
void expect_400(const json& body, const std::string& param) {
  try {
    parse_systemone_request(body);
    ADD_FAILURE() << "accepted " << body.dump();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.param(), param) << body.dump();
  }
}

TEST(SystemOne, RefusesMalformedRequests) {
  expect_400({{"questions", {{"a", {{"type", "noul"}, {"instructions", "x"}}}}}}, "body.state");
  expect_400({{"state", "s"}}, "questions");
  expect_400({{"state", "s"}, {"questions", json::object()}}, "questions");
  expect_400({{"state", "s"}, {"questions", {{"a", {{"type", "maybe"}, {"instructions", "x"}}}}}},
             "questions.a.type");
  expect_400({{"state", "s"}, {"questions", {{"a", {{"type", "noul"}}}}}},
             "questions.a.instructions");
  expect_400({{"state", "s"},
              {"questions", {{"a", {{"type", "choice"}, {"instructions", "x"}}}}}},
             "questions.a.choices");
  expect_400({{"state", "s"},
              {"questions",
               {{"a", {{"type", "choice"}, {"instructions", "x"}, {"choices", {"one"}}}}}}},
             "questions.a.choices");
  expect_400({{"state", "s"},
              {"questions",
               {{"a", {{"type", "score"}, {"instructions", "x"}, {"levels", {1, 1}}}}}}},
             "questions.a.levels");
  expect_400({{"state", 3}, {"questions", {{"a", {{"type", "noul"}, {"instructions", "x"}}}}}},
             "body.state");
  // 64 questions x 32 choices asked for ~4,000 forward passes (43 s): capped at 256 answers.
  json many = json::object();
  json choices = json::array();
  for (int c = 0; c < 32; ++c) choices.push_back("choice " + std::to_string(c));
  for (int q = 0; q < 64; ++q)
    many["q" + std::to_string(q)] = {{"type", "choice"}, {"instructions", "x"}, {"choices", choices}};
  expect_400({{"state", "s"}, {"questions", many}}, "questions");
  const auto ok = parse_systemone_request(
      {{"state", "s"},
       {"questions",
        {{"q", {{"type", "score"}, {"instructions", "rate"}}},
         {"c", {{"type", "choice"}, {"instructions", "pick"}, {"choices", {{"A", "first"}, {"B", "second"}}}}}}}});
  ASSERT_EQ(ok.questions.size(), 2u);
  const auto& score = ok.questions[0].name == "q" ? ok.questions[0] : ok.questions[1];
  EXPECT_EQ(score.labels, (std::vector<std::string>{"1", "2", "3", "4", "5"}));
}

// log P(tokens[p:] | tokens[:p]) computed on a fresh session.
double scratch_logprob(Engine& engine, const std::vector<int32_t>& tokens, size_t p) {
  auto s = engine.new_session();
  const std::vector<float> rows = engine.prefill(*s, tokens, true);
  const size_t nv = size_t(engine.config().n_vocab);
  double lp = 0;
  for (size_t j = p; j < tokens.size(); ++j)
    lp += logprobs(std::span<const float>(rows.data() + (j - 1) * nv, nv), tokens[j]);
  return lp;
}

TEST(SystemOne, ForkedEvaluationEqualsScratchComputation) {
  const test::SystemOneCase c = test::pydoc_systemone_case();
  Engine& engine = *c.engine;
  const SystemOneRequest& req = c.req;
  const SystemOnePlan& plan = c.plan;
  const SystemOneResult r = evaluate_systemone(plan, engine, /*cache=*/nullptr, 512, /*chunk=*/8);
  ASSERT_EQ(r.label_probs.size(), 3u);
  EXPECT_EQ(r.tokens_cached, 0);

  for (size_t qi = 0; qi < plan.questions.size(); ++qi) {
    const auto& cands = plan.questions[qi].candidates;
    size_t p = cands[0].tokens.size() - 1;
    for (const auto& c : cands)
      p = std::min({p, size_t(common_prefix(cands[0].tokens, c.tokens)), c.tokens.size() - 1});
    std::vector<double> mass(r.label_probs[qi].size(), 0.0);
    for (const auto& c : cands) mass[c.label] += std::exp(scratch_logprob(engine, c.tokens, p));
    double total = 0;
    for (double m : mass) total += m;
    double sum = 0;
    for (size_t l = 0; l < mass.size(); ++l) {
      EXPECT_NEAR(r.label_probs[qi][l], mass[l] / total, 2e-3) << "question " << qi << " label " << l;
      sum += r.label_probs[qi][l];
    }
    EXPECT_NEAR(sum, 1.0, 1e-9);
  }
  const json resp = systemone_response(req, r, "pydoc");
  EXPECT_EQ(resp["model"], "pydoc");
  EXPECT_TRUE(resp["answers"]["closes"]["p_yes"].is_number());
  EXPECT_TRUE(resp["answers"]["closes"]["answer"] == "yes" || resp["answers"]["closes"]["answer"] == "no");
  EXPECT_EQ(resp["answers"]["kind"]["distribution"].size(), 3u);
  EXPECT_TRUE(resp["answers"]["sure"]["expected"].is_number());
}

// The pieces a server runs between other sequences' steps are small: the state's chunks, then per
// question its own context and one piece per candidate answer (a whole question was one piece:
// 32 candidates held generation 3.5 s), with the same answers as all at once.
TEST(SystemOne, EachCandidateIsItsOwnPiece) {
  const test::SystemOneCase c = test::pydoc_systemone_case();
  const SystemOneResult whole = evaluate_systemone(c.plan, *c.engine, nullptr, 512, /*chunk=*/8);
  SystemOneEvaluation eval(c.plan, *c.engine, nullptr, 512, /*chunk=*/8);
  size_t pieces = 1;
  while (eval.step()) ++pieces;
  const SystemOneResult stepped = eval.finish();
  size_t question_pieces = 0;
  for (const auto& q : c.plan.questions) question_pieces += 1 + q.candidates.size();
  EXPECT_GT(pieces, question_pieces);                       // the state's chunks come first
  EXPECT_LE(pieces, question_pieces + c.plan.questions[0].candidates[0].tokens.size() / 8 + 1);
  ASSERT_EQ(stepped.label_probs.size(), whole.label_probs.size());
  for (size_t q = 0; q < whole.label_probs.size(); ++q)
    EXPECT_EQ(stepped.label_probs[q], whole.label_probs[q]) << "question " << q;
}

TEST(SystemOne, StateLongerThanTheContextIsRefused) {
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
  } catch (const RequestError& e) {
    EXPECT_EQ(e.param(), "state");
    EXPECT_EQ(e.code(), "context_length_exceeded");
  }
}

}  // namespace
}  // namespace jitllm::app
