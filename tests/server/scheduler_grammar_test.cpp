// Grammars in the scheduler: a grammar from the first token holds the whole output and ends it
// when complete; a lazily applied one (tool_choice auto) leaves the output free until its
// trigger shows, then holds from the trigger on, within the token that brought it (for a
// thinking model, only in the answer after the thinking).
#include <gtest/gtest.h>

#include "app/grammar_vocabulary.h"
#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "server/scheduler_fixture.h"

namespace jitllm::server {
namespace {

std::shared_ptr<constrain::Matcher> matcher(const Tokenizer& tok, const std::string& gbnf) {
  return std::make_shared<constrain::Matcher>(constrain::parse_gbnf(gbnf),
                                              app::make_grammar_vocabulary(tok, tok.n_vocab()));
}

struct Tokens {
  std::vector<int32_t> ids;
  std::string text;
};

// The free greedy output, token by token.
Tokens free_run(Fixture& f, const std::string& prompt, int n) {
  auto job = greedy_job(*f.tok, prompt, n);
  job->logprobs = true;
  f.sched->submit(job);
  Tokens out;
  bool done = false;
  for (int spins = 0; !done && spins < 600; ++spins)
    for (JobEvent& ev : job->take(std::chrono::milliseconds(100), done)) {
      out.text += ev.text;
      for (const auto& t : ev.tokens) out.ids.push_back(t.id);
    }
  return out;
}

TEST(SchedulerGrammar, AGrammarFromTheStartHoldsAndEndsTheOutput) {
  Fixture f(2);
  auto job = greedy_job(*f.tok, "The function returns", 40);
  job->matcher = matcher(*f.tok, R"(root ::= " [" ("yes" | "no") "]")");
  f.sched->submit(job);
  const Result r = wait(*job);
  EXPECT_TRUE(r.text[0] == " [yes]" || r.text[0] == " [no]") << r.text[0];
  EXPECT_EQ(r.finish[0], "stop");
}

TEST(SchedulerGrammar, ALazyGrammarSwitchesOnAtItsTrigger) {
  Fixture f(2);
  const std::string prompt = "The function returns";
  const Tokens free = free_run(f, prompt, 16);
  ASSERT_GE(free.ids.size(), 8u);
  // The trigger: the text of a token well into the output, first seen there.
  size_t k = 3, end = 0;
  std::string trigger;
  for (; k < free.ids.size(); ++k) {
    std::string before;
    for (size_t i = 0; i < k; ++i) before += f.tok->piece(free.ids[i]);
    trigger = f.tok->piece(free.ids[k]);
    end = before.size() + trigger.size();
    if (trigger.size() >= 2 && (before + trigger).find(trigger) == before.size()) break;
  }
  ASSERT_LT(k, free.ids.size()) << "no token of the output makes a trigger";
  auto job = greedy_job(*f.tok, prompt, 40);
  job->matcher = matcher(*f.tok, "root ::= " + constrain::gbnf_literal(trigger) + R"( " 1 2 3")");
  job->grammar_triggers = {{trigger, false}};
  f.sched->submit(job);
  const Result r = wait(*job);
  // Free (the same greedy text) up to the trigger, then held, and ended when complete.
  EXPECT_EQ(r.text[0], free.text.substr(0, end) + " 1 2 3");
  EXPECT_EQ(r.finish[0], "stop");

  // A trigger that never shows leaves the output free.
  auto never = greedy_job(*f.tok, prompt, 16);
  never->matcher = matcher(*f.tok, R"(root ::= "@@" "x")");
  never->grammar_triggers = {{"@@", false}};
  f.sched->submit(never);
  EXPECT_EQ(wait(*never).text[0], free.text);

  // A trigger whose token brings text the grammar refuses stays text (and is counted).
  std::string before, cut;
  size_t j = 0;
  for (; j < free.ids.size(); before += f.tok->piece(free.ids[j]), ++j) {
    const std::string t = f.tok->piece(free.ids[j]);
    cut = t.substr(0, t.size() - 1);
    if (t.size() >= 3 && (before + t).find(cut) == before.size()) break;
  }
  ASSERT_LT(j, free.ids.size()) << "no token of the output makes a cut trigger";
  auto refused = greedy_job(*f.tok, prompt, int(j) + 1);
  refused->matcher = matcher(*f.tok, "root ::= " + constrain::gbnf_literal(cut) + R"( "\x01")");
  refused->grammar_triggers = {{cut, false}};
  f.sched->submit(refused);
  EXPECT_EQ(wait(*refused).text[0], before + f.tok->piece(free.ids[j]));
  EXPECT_GE(f.metrics.counter("grammar_triggers_refused_total"), 1.0);
  // A trigger that only counts at the start does not count later on.
  auto late = greedy_job(*f.tok, prompt, 16);
  late->matcher = matcher(*f.tok, "root ::= " + constrain::gbnf_literal(trigger) + R"( " 1 2 3")");
  late->grammar_triggers = {{trigger, true}};
  f.sched->submit(late);
  EXPECT_EQ(wait(*late).text[0], free.text);

  // A thinking model: inside a thinking the prompt opened (this output never closes it) the
  // trigger is part of the thought and the output stays free; with none opened it counts.
  for (const bool opened : {true, false}) {
    auto thinking = greedy_job(*f.tok, prompt, 40);
    thinking->matcher = matcher(*f.tok, "root ::= " + constrain::gbnf_literal(trigger) + R"( " 1 2 3")");
    thinking->grammar_triggers = {{trigger, false}};
    thinking->triggers_after_thinking = true;
    thinking->starts_thinking = opened;
    f.sched->submit(thinking);
    const std::string text = wait(*thinking).text[0];
    if (opened)
      EXPECT_EQ(text.substr(0, free.text.size()), free.text);
    else
      EXPECT_EQ(text, free.text.substr(0, end) + " 1 2 3");
  }
}

}  // namespace
}  // namespace jitllm::server
