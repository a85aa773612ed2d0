// Hostile and broken templates: every one must end in a jitllm::Error that says what went wrong
// (line/column for syntax errors, the limit for runaway templates), quickly, without crashing,
// hanging or allocating without bound.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "chat/chat_template.h"
#include "chat/interpreter.h"
#include "chat/parser.h"

namespace jitllm::chat {
namespace {

using ::testing::HasSubstr;

std::string render(const std::string& source, RenderLimits limits = {}) {
  TemplateAst ast = parse_template(source);
  return Interpreter(limits).render(ast, {});
}

// The error message of rendering `source`, or "" when it rendered.
std::string error_of(const std::string& source, RenderLimits limits = {}) {
  try {
    render(source, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ChatHostile, UnterminatedTagsStringsAndCommentsNameTheirPosition) {
  EXPECT_THAT(error_of("ab\n  {{ x"), HasSubstr("template:2:3: unterminated variable tag"));
  EXPECT_THAT(error_of("{% if x"), HasSubstr("template:1:1: unterminated block tag"));
  EXPECT_THAT(error_of("x\n{# note"), HasSubstr("template:2:1: unterminated comment"));
  EXPECT_THAT(error_of("{{ 'abc }}"), HasSubstr("template:1:4: unterminated string literal"));
  EXPECT_THAT(error_of("{% raw %}abc"), HasSubstr("unterminated raw block"));
  EXPECT_THAT(error_of("line\n{% if x %}\nbody"), HasSubstr("template:3:5: unexpected end of template, expected 'elif' or 'else' or 'endif'"));
  EXPECT_THAT(error_of("{{ 1 + }}"), HasSubstr("template:1:8: expected an expression"));
  EXPECT_THAT(error_of("{% frobnicate %}"), HasSubstr("template:1:4: unknown tag 'frobnicate'"));
  EXPECT_THAT(error_of("{{ (1 ] }}"), HasSubstr("template:1:7: unexpected ']', expected ')'"));
  EXPECT_THAT(error_of("{% break %}"), HasSubstr("'break' outside of a for loop"));
  EXPECT_THAT(error_of("{{ x ! y }}"), HasSubstr("unexpected character '!'"));
  EXPECT_THAT(error_of("{{ '\\x4' }}"), HasSubstr("truncated \\x escape"));
  EXPECT_THAT(error_of("{{ 99999999999999999999 }}"), HasSubstr("out of range"));
}

TEST(ChatHostile, DeepNestingIsAnErrorNotAStackOverflow) {
  const int n = 100000;
  EXPECT_THAT(error_of("{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}"), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("{{ " + repeat("[", n) + repeat("]", n) + " }}"), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of(repeat("{% if true %}", n)), HasSubstr("nested deeper than 200"));
  EXPECT_THAT(error_of("{{ " + repeat("not ", n) + "x }}"), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("{{ " + repeat("-", n) + "1 }}"), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("{{ 1" + repeat(" + 1", n) + " }}"), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("{{ x" + repeat(".a", n) + " }}"), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("{{ x" + repeat("|trim", n) + " }}"), HasSubstr("nested deeper"));
  // Nesting within the limits still renders.
  EXPECT_EQ(render("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}"), "1");
}

TEST(ChatHostile, HugeLoopsHitTheStepLimitQuickly) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of("{% for i in range(10**9) %}x{% endfor %}"), HasSubstr("template step limit of 5000000 exceeded"));
  EXPECT_THAT(error_of("{{ ([1] * 10**9)|length }}"), HasSubstr("template step limit"));
  EXPECT_THAT(error_of("{{ range(-9223372036854775807, 9223372036854775807)|length }}"), HasSubstr("template step limit"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
  RenderLimits small;
  small.max_steps = 200000;
  EXPECT_THAT(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small),
              HasSubstr("template step limit of 200000 exceeded"));
  EXPECT_THAT(error_of("{% for i in range(1000) %}{{ i }}{{ i }}{{ i }}{% endfor %}", small),
              ::testing::IsEmpty());
  small.max_steps = 1000;
  EXPECT_THAT(error_of("{% for i in range(1000) %}{{ i }}{% endfor %}", small),
              HasSubstr("template step limit of 1000 exceeded"));
}

TEST(ChatHostile, MacroRecursionIsBounded) {
  EXPECT_THAT(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("recursion/nesting limit of 500 exceeded"));
  EXPECT_THAT(error_of("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}"),
              HasSubstr("recursion/nesting limit"));
  // Bounded recursion is fine.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"), "54321");
}

TEST(ChatHostile, HugeStringsAreBounded) {
  EXPECT_THAT(error_of("{{ 'x' * 10**12 }}"), HasSubstr("exceeds the limit of 67108864 bytes"));
  EXPECT_THAT(error_of("{{ 'abc' * 9223372036854775807 }}"), HasSubstr("exceeds the limit"));
  RenderLimits small;  // the same checks at 1 MiB keep the test fast
  small.max_string_bytes = 1 << 20;
  EXPECT_THAT(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", small),
              HasSubstr("exceeds the limit of 1048576 bytes"));
  EXPECT_THAT(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", small),
              HasSubstr("exceeds the limit"));
  EXPECT_THAT(error_of("{% set s = 'x' * 100000 %}{% for i in range(100) %}{{ s }}{% endfor %}", small),
              HasSubstr("exceeds the limit"));
  EXPECT_THAT(error_of("{% set s = 'x' * 100000 %}{{ ([s] * 20) | join }}", small), HasSubstr("exceeds the limit"));
  EXPECT_THAT(error_of("{% set s = 'x' * 100000 %}{{ s.replace('x', 'yy').replace('y', 'zzzzzz') }}", small),
              HasSubstr("exceeds the limit"));
  EXPECT_THAT(error_of("{{ ('x' * 1000)|center(10**11) }}"), HasSubstr("exceeds the limit"));
}

TEST(ChatHostile, DeepAndSelfContainingValuesDoNotCrash) {
  // Containers cannot be made to contain themselves (a leak, and endless printing).
  EXPECT_THAT(error_of("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}"), HasSubstr("cannot store a list object inside itself"));
  EXPECT_THAT(error_of("{% set l = [[]] %}{% set _ = l[0].append(l) %}"), HasSubstr("inside itself"));
  EXPECT_THAT(error_of("{% set ns = namespace(a=[]) %}{% set ns.b = [ns] %}"), HasSubstr("inside itself"));
  EXPECT_THAT(error_of("{% set d = {} %}{% set _ = d.update({'x': [d]}) %}"), HasSubstr("inside itself"));
  EXPECT_EQ(render("{% set l = [1] %}{% set m = [l, l] %}{% set _ = m.append(l) %}{{ m }}"), "[[1], [1], [1]]");
  // A very deep acyclic list (each new list appended to the previous one) is built, refused
  // when printed, and released without recursion in its destructor.
  const std::string chain =
      "{% set root = [] %}{% set cur = namespace(v=root) %}{% for i in range(100000) %}{% set n = [] %}"
      "{% set _ = cur.v.append(n) %}{% set cur.v = n %}{% endfor %}";
  EXPECT_EQ(render(chain + "{{ root|length }}"), "1");
  EXPECT_THAT(error_of(chain + "{{ root }}"), HasSubstr("nested deeper than 1000"));
  EXPECT_THAT(error_of(chain + "{{ root|tojson }}"), HasSubstr("nested deeper than 1000"));
  // Re-wrapping a growing value re-walks it for cycles: the step limit bounds that.
  EXPECT_THAT(error_of("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
              HasSubstr("template step limit"));
  // Deeply nested JSON input is refused cleanly.
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  nlohmann::ordered_json* cur = &deep;
  for (int i = 0; i < 5000; ++i) {
    cur->push_back(nlohmann::ordered_json::array());
    cur = &(*cur)[0];
  }
  EXPECT_THROW(Value::from_json(deep), Error);
}

TEST(ChatHostile, RuntimeErrorsAreClear) {
  EXPECT_THAT(error_of("\n\n{{ foo() }}"), HasSubstr("template line 3: 'foo' is undefined"));
  EXPECT_THAT(error_of("{{ 1 // 0 }}"), HasSubstr("division or modulo by zero"));
  EXPECT_THAT(error_of("{{ 2 ** 64 }}"), HasSubstr("integer overflow"));
  EXPECT_THAT(error_of("{{ x.y }}"), HasSubstr("'x' is undefined"));
  EXPECT_THAT(error_of("{{ {}.a.b }}"), HasSubstr("'dict object' has no attribute 'a'"));
  EXPECT_THAT(error_of("{{ 1 < 'a' }}"), HasSubstr("'<' not supported between instances of 'int' and 'str'"));
  EXPECT_THAT(error_of("{{ [1]|nofilter }}"), HasSubstr("no filter named 'nofilter'"));
  EXPECT_THAT(error_of("{{ 1 is notatest }}"), HasSubstr("no test named 'notatest'"));
  EXPECT_THAT(error_of("{% set x = 1 %}{% set x.y = 2 %}"), HasSubstr("not a namespace object"));
  EXPECT_THAT(error_of("{% for a, b in [1] %}{% endfor %}"), HasSubstr("not iterable"));
  // Arguments of the wrong type (found by chat_template_fuzz: batch(undefined) aborted).
  for (const char* bad : {"{{ [1, 2, 3]|batch(A2)|list }}", "{{ 'a'|center('x') }}", "{{ [1]|batch('2') }}",
                          "{{ [1, 2].pop('a') }}", "{{ 1.5|round('x') }}", "{{ 'x'|int(0, 'a') }}",
                          "{{ 'ab'.split(1) }}", "{{ 'a'|replace('a', 'b', 'c') }}", "{{ [1].insert('x', 2) }}"})
    EXPECT_THAT(error_of(bad), ::testing::StartsWith("template line 1: ")) << bad;
}

TEST(ChatHostile, RaiseExceptionIsATemplateRaised) {
  ChatTemplate t("{{ raise_exception('Only user and assistant roles are supported!') }}", "", "");
  try {
    t.render(nlohmann::ordered_json::array());
    FAIL() << "expected TemplateRaised";
  } catch (const TemplateRaised& e) {
    EXPECT_EQ(e.message(), "Only user and assistant roles are supported!");
  }
}

}  // namespace
}  // namespace jitllm::chat
