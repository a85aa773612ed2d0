// GBNF parsing and the byte-level matcher on small hand-made vocabularies.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "constrain/gbnf.h"
#include "constrain/matcher.h"
#include "core/error.h"

namespace jitllm::constrain {
namespace {

// Tokens: 0 "a", 1 "ab", 2 "abc", 3 "bc", 4 "c", 5 "cc", 6 "x", 7 "" (a control token),
// 8 = the end token.
std::shared_ptr<const Vocabulary> small_vocab() {
  return std::make_shared<Vocabulary>(
      std::vector<std::string>{"a", "ab", "abc", "bc", "c", "cc", "x", "", "</s>"},
      std::vector<int32_t>{8});
}

std::vector<int32_t> allowed(Matcher& m, Matcher::State s) {
  std::vector<int32_t> out;
  const auto mask = m.mask(s);
  for (int32_t t = 0; t < 9; ++t)
    if ((mask[size_t(t) >> 6] >> (t & 63)) & 1) out.push_back(t);
  return out;
}

TEST(Gbnf, TokensThatStraddleTerminalsAreAllowedWhole) {
  Matcher m(parse_gbnf(R"(root ::= "a" "b" "c"+)"), small_vocab());
  Matcher::State s = m.start();
  EXPECT_EQ(allowed(m, s), (std::vector<int32_t>{0, 1, 2}));  // a, ab, abc
  s = m.advance(s, 1);                                        // "ab"
  ASSERT_NE(s, Matcher::kDead);
  EXPECT_FALSE(m.accepting(s));
  EXPECT_EQ(allowed(m, s), (std::vector<int32_t>{4, 5}));  // c, cc; never the end yet
  s = m.advance(s, 5);                                      // "cc"
  EXPECT_TRUE(m.accepting(s));
  EXPECT_EQ(allowed(m, s), (std::vector<int32_t>{4, 5, 8}));  // more c, or the end
  EXPECT_EQ(m.advance(s, 8), s);                               // the end keeps the state
  EXPECT_EQ(m.advance(s, 6), Matcher::kDead);                  // "x"
  EXPECT_EQ(m.advance(s, 7), Matcher::kDead);                  // a control token
  // A second call into the same state gives the same mask (cached).
  EXPECT_EQ(allowed(m, s), (std::vector<int32_t>{4, 5, 8}));
}

TEST(Gbnf, AlternativesGroupsAndBoundedRepetition) {
  Matcher m(parse_gbnf("root ::= (\"x\" | ab){2,3}\nab ::= \"a\" \"b\"   # a comment\n"),
            small_vocab());
  auto run = [&](std::vector<int32_t> tokens) {
    Matcher::State s = m.start();
    for (int32_t t : tokens) s = m.advance(s, t);
    return s;
  };
  EXPECT_EQ(run({6}), run({6}));
  EXPECT_FALSE(m.accepting(run({6})));
  EXPECT_TRUE(m.accepting(run({6, 1})));
  EXPECT_TRUE(m.accepting(run({1, 6, 1})));
  EXPECT_EQ(run({1, 6, 1, 6}), Matcher::kDead);  // a fourth repetition
  EXPECT_EQ(run({2}), Matcher::kDead);           // "abc": no c in this grammar
}

TEST(Gbnf, MultiLineRulesAndContinuations) {
  const Grammar g = parse_gbnf(
      "root ::= item\n"
      "       | \"x\"\n"
      "item ::= (\n"
      "  \"a\"\n"
      "  \"b\"\n"
      ")\n");
  Matcher m(g, small_vocab());
  EXPECT_TRUE(m.accepting(m.advance(m.start(), 1)));
  EXPECT_TRUE(m.accepting(m.advance(m.start(), 6)));
}

TEST(Gbnf, Utf8ClassesMatchByteFallbackPieces) {
  // α (CE B1) .. ω (CF 89): a token of the first byte alone is allowed, then the second.
  auto vocab = std::make_shared<Vocabulary>(
      std::vector<std::string>{"\xCE", "\xB1", "\xCE\xB1", "a", "\xCF\x89", "\xCF"},
      std::vector<int32_t>{});
  Matcher m(parse_gbnf("root ::= [α-ω]+"), vocab);
  Matcher::State s = m.start();
  const auto mask = m.mask(s);
  EXPECT_EQ(mask[0], 0b110101u);  // CE, CE B1, CF 89, CF; not B1 alone, not "a"
  s = m.advance(s, 0);
  ASSERT_NE(s, Matcher::kDead);
  EXPECT_FALSE(m.accepting(s));
  EXPECT_EQ(m.mask(s)[0], 0b10u);  // only the continuation byte B1
  s = m.advance(s, 1);
  EXPECT_TRUE(m.accepting(s));
  // Negated classes exclude the character and keep every other code point.
  Matcher n(parse_gbnf(R"(root ::= [^α])"), vocab);
  EXPECT_EQ(n.advance(n.start(), 2), Matcher::kDead);
  EXPECT_TRUE(n.accepting(n.advance(n.start(), 4)));
  EXPECT_TRUE(n.accepting(n.advance(n.start(), 3)));
}

TEST(Gbnf, EscapesInLiteralsAndClasses) {
  auto vocab = std::make_shared<Vocabulary>(
      std::vector<std::string>{"\n", "\"", "\\", "\t", "A", "é"}, std::vector<int32_t>{});
  Matcher m(parse_gbnf(R"(root ::= "\n" "\"" [\\] "\t" "\x41" "\u00e9")"), vocab);
  Matcher::State s = m.start();
  for (int32_t t = 0; t < 6; ++t) s = m.advance(s, t);
  EXPECT_TRUE(m.accepting(s));
}

TEST(Gbnf, ErrorsNameTheLineAndTheRule) {
  auto message = [](const std::string& text) {
    try {
      parse_gbnf(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= foo\n").find("rule 'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= x\nx ::= \"a\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\n\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(message("a ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\n").find("line 1 column"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"\nx ::= [b-a]").find("line 2"), std::string::npos);
  EXPECT_NE(message("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{2,1}").find("n < m"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{99999}").find("above 10000"), std::string::npos);
  EXPECT_NE(message("root ::= * \"a\"").find("follows nothing"), std::string::npos);
}

// Groups nest by recursion in the parser: 50,000 of them (a 100 KB request body) overflowed the
// stack of the thread that parsed them (SIGSEGV in jitllmd); past the bound they are an error.
TEST(Gbnf, DeeplyNestedGroupsAreAnErrorNotACrash) {
  auto nested = [](int depth) {
    return "root ::= " + std::string(size_t(depth), '(') + "\"a\"" + std::string(size_t(depth), ')');
  };
  EXPECT_NO_THROW(parse_gbnf(nested(1024)));
  for (int depth : {1025, 50000}) {
    try {
      parse_gbnf(nested(depth));
      ADD_FAILURE() << depth << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("groups nest more than 1024 deep"), std::string::npos)
          << e.what();
    }
  }
}

// `a ::= "" | ""` used n times doubles the ways to continue n times: the bound holds while the
// stacks are made (30 uses were 2^30 stacks, tens of GB, before), at the start or mid-output.
TEST(Gbnf, ExponentialAmbiguityIsRefusedWhileExpanding) {
  std::string uses;
  for (int i = 0; i < 30; ++i) uses += " a";
  for (const std::string& root : {"root ::=" + uses + " \"x\"", "root ::= \"x\"" + uses + " \"y\""}) {
    const std::string text = root + "\na ::= \"\" | \"\"";
    try {
      Matcher m(parse_gbnf(text), small_vocab());
      (void)m.advance_bytes(m.start(), "x");
      ADD_FAILURE() << "accepted " << text;
    } catch (const GrammarLimitError& e) {
      EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
    }
  }
}

// A rule that nests as deep as the output goes, with many alternatives at each level: every state
// holds thousands of stacks as deep as the output so far, so memory grew with its square (4,000
// alternatives, 20 levels: 2.7 GB). The matcher's states have a memory budget; past it, the
// request's grammar is refused.
TEST(Gbnf, StatesThatGrowWithTheOutputHaveAMemoryBudget) {
  std::string z = "z ::= \"a\"";
  for (int i = 1; i < 4000; ++i) z += " | \"a\"";
  const std::string text = "root ::= e\ne ::= \"-\" e \"x\" | z\n" + z;
  Matcher m(parse_gbnf(text), small_vocab());
  try {
    Matcher::State s = m.start();
    for (int i = 0; i < 2000 && s != Matcher::kDead; ++i) s = m.advance_bytes(s, "-");
    ADD_FAILURE() << "2000 levels of nesting were matched";
  } catch (const GrammarLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("memory budget"), std::string::npos) << e.what();
  }
}

// Which rules match the empty string is found in time linear in the grammar: a chain of 200,000
// rules took minutes with the passes-until-no-change it replaced (60,000: 13 s).
TEST(Gbnf, NullableRulesAreFoundInLinearTime) {
  std::string text = "root ::= r0 \"x\"\n";
  const int n = 200000;
  for (int i = 0; i < n; ++i) text += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  text += "r" + std::to_string(n) + " ::= \"\"\n";
  const auto t0 = std::chrono::steady_clock::now();
  const Grammar g = parse_gbnf(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20.0) << "a bound far above the linear time (well under a second), far below the quadratic";
  EXPECT_EQ(g.alts.size(), size_t(n) + 2);
}

TEST(Gbnf, AmbiguityAndStateCountAreBounded) {
  // Each 'a' may start any of 13 nested optional groups: the stack sets stay bounded (dedup),
  // and the matcher answers for a long input.
  Matcher m(parse_gbnf("root ::= (\"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\")*"), small_vocab());
  Matcher::State s = m.start();
  for (int i = 0; i < 200; ++i) s = m.advance(s, 0);
  EXPECT_TRUE(m.accepting(s));
  EXPECT_LT(m.n_states(), 10u);
}

}  // namespace
}  // namespace jitllm::constrain
