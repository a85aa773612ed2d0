// The System One case both the app and the server tests score: pydoc-llama F32 on the reference
// kernels (pages of 16 positions, so states span several), one state and three questions (noul,
// choice, score) planned with the plain prompt.
#pragma once

#include <memory>

#include "app/systemone.h"
#include "app/systemone_scoring.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::app::test {

struct SystemOneCase {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Tokenizer> tok;
  SystemOneRequest req;
  SystemOnePlan plan;
};

inline SystemOneCase pydoc_systemone_case() {
  SystemOneCase c;
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.kv_page_tokens = 16;
  c.engine = std::make_unique<Engine>(
      load_model_file(testing::oracle_path("pydoc-llama/pydoc-llama.F32.gguf")), o);
  c.tok = std::make_unique<Tokenizer>(c.engine->model().file().metadata);
  c.req = parse_systemone_request(
      {{"state", "The open() function returns a file object. Files must be closed after use."},
       {"questions",
        {{"closes", {{"type", "noul"}, {"instructions", "Must files be closed?"}}},
         {"kind", {{"type", "choice"}, {"instructions", "What does open() return?"},
                   {"choices", {"file object", "list", "string"}}}},
         {"sure", {{"type", "score"}, {"instructions", "How sure is it?"}}}}}});
  const SystemOneRequest& req = c.req;
  const Tokenizer& tok = *c.tok;
  c.plan = plan_systemone(
      req, [&](const SystemOneQuestion& q) { return systemone_plain_prompt(req.state, systemone_question_text(q)); },
      [&](const std::string& t) { return tok.encode(t, true); });
  return c;
}

}  // namespace jitllm::app::test
