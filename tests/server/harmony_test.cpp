// gpt-oss's harmony format: its output read into reasoning, content and tool calls (whole, at
// every split point, a byte at a time; cut short; not harmony at all), the grammar of its calls
// (both header orders, the analysis before a required call), the lazy trigger, and the
// conversation as its template wants it (reasoning_effort, an earlier turn's thinking).
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "server/answer_cuts.h"
#include "server/answer_parser.h"
#include "server/tool_syntax.h"
#include "testutil/shared_data.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

using answer_test::AnswerSplit;
using Split = AnswerSplit;

// Every call's id is OpenAI's shape.
void expect_split(const AnswerFormat& f, const std::string& text, const Split& want) {
  answer_test::expect_answer_split(f, text, want,
                        [](const ToolCall& c) { EXPECT_EQ(c.id.substr(0, 5), "call_"); });
}

AnswerFormat harmony(bool separate = true, bool calls = true) {
  AnswerFormat f;
  f.harmony = true;
  f.reasoning = separate;
  if (calls) {
    f.tool_syntax = ToolSyntax::Harmony;
    f.tool_names = {"get_weather", "now"};
  }
  return f;
}

const std::string kThought = "<|channel|>analysis<|message|>User asks 2+2. Easy.<|end|>";
const std::string kNext = "<|start|>assistant";

TEST(HarmonyParser, AnalysisIsReasoningFinalIsContent) {
  expect_split(harmony(), kThought + kNext + "<|channel|>final<|message|>It is 4.",
               {"User asks 2+2. Easy.", "It is 4.", {}});
  // No analysis; a preamble on the commentary channel is shown too.
  expect_split(harmony(), "<|channel|>final<|message|>Hi!", {"", "Hi!", {}});
  expect_split(harmony(), "<|channel|>commentary<|message|>Checking.<|end|>" + kNext +
                              "<|channel|>final<|message|>Done.",
               {"", "Checking.Done.", {}});
  // reasoning_format none: the analysis stays in the content with its markers.
  expect_split(harmony(false), kThought + kNext + "<|channel|>final<|message|>It is 4.",
               {"", kThought + "It is 4.", {}});
}

TEST(HarmonyParser, ReadsCallsInBothHeaderOrders) {
  const Split want = {"User asks 2+2. Easy.", "", {R"(get_weather {"city":"Paris"})"}};
  expect_split(harmony(), kThought + kNext +
                              R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"})",
               want);
  expect_split(harmony(), kThought + kNext +
                              R"( to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"})",
               want);
  // The call may be the first message, and may be followed by its <|end|>.
  expect_split(harmony(), R"(<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}<|end|>)",
               {"", "", {"now {}"}});
}

TEST(HarmonyParser, WhatIsNotACallStaysText) {
  const std::string other =
      R"(<|channel|>commentary to=functions.rm_rf <|constrain|>json<|message|>{"path": "/"})";
  expect_split(harmony(), kThought + kNext + other, {"User asks 2+2. Easy.", other, {}});
  // tool_choice none (no calls read): the call's text is content.
  const std::string call =
      R"(<|channel|>commentary to=functions.now <|constrain|>json<|message|>{})";
  expect_split(harmony(true, false), call, {"", call, {}});
  // Arguments that are no object, and a call cut by max_tokens.
  const std::string not_object =
      R"(<|channel|>commentary to=functions.now <|constrain|>json<|message|>[1])";
  expect_split(harmony(), not_object, {"", not_object, {}});
  const std::string cut =
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Pa)";
  expect_split(harmony(), cut, {"", cut, {}});
  // A builtin recipient this server does not run.
  const std::string browser = R"(<|channel|>commentary to=browser.search<|message|>{"q": "x"})";
  expect_split(harmony(), browser, {"", browser, {}});
  // Not harmony at all, and a header that never ends.
  expect_split(harmony(), "Hello there <|end|>", {"", "Hello there <|end|>", {}});
  expect_split(harmony(), "<|channel|>final", {"", "<|channel|>final", {}});
}

TEST(HarmonyParser, ThinkingCutShortIsReasoningAndTagsAreHeldBack) {
  expect_split(harmony(), "<|channel|>analysis<|message|>First, the", {"First, the", "", {}});
  AnswerParser p(harmony());
  AnswerPiece a = p.push("<|channel|>analysis<|message|>ab<|en");
  EXPECT_EQ(a.reasoning, "ab");
  EXPECT_EQ(a.content, "");
  a = p.push("d|><|start|>assistant<|channel|>final<|mess");
  EXPECT_EQ(a.reasoning + a.content, "") << "a header is shown once it is read";
  a = p.push("age|>Hi");
  EXPECT_EQ(a.content, "Hi");
}

bool grammar_accepts(ToolChoice choice, const std::string& text) {
  json body = json::parse(R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}]})");
  body["tool_choice"] = choice == ToolChoice::Auto ? "auto" : "required";
  const ToolRequest r = parse_tool_request(body, nullptr);
  return answer_test::grammar_accepts_text(tool_call_grammar(ToolSyntax::Harmony, r).gbnf, text);
}

TEST(HarmonyGrammar, HoldsCallsInBothOrdersAfterAnOptionalAnalysis) {
  const std::string channel_first =
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"})";
  EXPECT_TRUE(grammar_accepts(ToolChoice::Required, channel_first));
  EXPECT_TRUE(grammar_accepts(ToolChoice::Required, kThought + kNext + channel_first));
  EXPECT_TRUE(grammar_accepts(ToolChoice::Required,
                              R"( to=functions.now<|channel|>commentary json<|message|>{})"));
  EXPECT_FALSE(grammar_accepts(ToolChoice::Required,
                               R"(<|channel|>commentary to=functions.now2 <|constrain|>json<|message|>{})"));
  EXPECT_FALSE(grammar_accepts(ToolChoice::Required,
                               R"(<|channel|>commentary to=functions.get_weather json<|message|>{})"))
      << "city is required";
  EXPECT_FALSE(grammar_accepts(ToolChoice::Required, "<|channel|>final<|message|>No call."));
  // Auto: the grammar starts at the trigger, the recipient.
  const ToolRequest autos = parse_tool_request(
      json::parse(R"({"tools": [{"type": "function", "function": {"name": "now"}}]})"), nullptr);
  const ToolGrammar g = tool_call_grammar(ToolSyntax::Harmony, autos);
  ASSERT_EQ(g.triggers.size(), 1u);
  EXPECT_EQ(g.triggers[0].text, " to=functions.");
  EXPECT_TRUE(grammar_accepts(ToolChoice::Auto, R"( to=functions.now <|constrain|>json<|message|>{})"));
  EXPECT_TRUE(grammar_accepts(ToolChoice::Auto, R"( to=functions.now<|channel|>commentary json<|message|>{})"));
}

TEST(HarmonyGrammar, AJsonAnswerGoesInTheFinalChannel) {
  const std::string gbnf = harmony_answer_gbnf(constrain::json_object_gbnf());
  auto accepts = [&](const std::string& text) { return answer_test::grammar_accepts_text(gbnf, text, "harmony-answer"); };
  EXPECT_TRUE(accepts(R"(<|channel|>final<|message|>{"a": 1})"));
  EXPECT_TRUE(accepts(kThought + kNext + R"(<|channel|>final <|constrain|>json<|message|>{})"));
  EXPECT_FALSE(accepts(R"({"a": 1})")) << "the header comes first";
  EXPECT_FALSE(accepts(R"(<|channel|>final<|message|>[1])")) << "an object";
  // What the parser makes of it: the thought and the JSON.
  AnswerParser p(harmony(true, false));
  AnswerPiece a = p.push(kThought + kNext + R"(<|channel|>final <|constrain|>json<|message|>{"a": 1})");
  AnswerPiece rest = p.finish();
  EXPECT_EQ(a.reasoning + rest.reasoning, "User asks 2+2. Easy.");
  EXPECT_EQ(a.content + rest.content, R"({"a": 1})");
}

TEST(HarmonyTemplate, EffortAndEarlierThinkingAsTheTemplateWantsThem) {
  const std::string source =
      testing::read_text(testing::oracle_path("templates/openai-gpt-oss-120b.jinja"));
  ASSERT_EQ(detect_tool_syntax(source), ToolSyntax::Harmony);
  chat::ChatTemplate tmpl(source, "<|startoftext|>", "<|return|>");
  ojson messages = ojson::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}])");
  ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const ToolRequest request = parse_tool_request(json({{"tools", json::parse(tools.dump())}}), nullptr);
  adapt_conversation(ToolSyntax::Harmony, request, messages, tools);
  chat::ChatRenderOptions o;
  o.extra_globals = {{"tools", tools}, {"reasoning_effort", "high"}};
  const std::string prompt = tmpl.render(messages, o);
  EXPECT_NE(prompt.find("Reasoning: high"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
                        "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                        "<|message|>{\"city\": \"Paris\"}<|call|>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<|start|>functions.get_weather to=assistant<|channel|>commentary"
                        "<|message|>\"18C\"<|end|>"),
            std::string::npos)
      << prompt;
  EXPECT_EQ(prompt.substr(prompt.size() - 18), "<|start|>assistant");
}

}  // namespace
}  // namespace jitllm::server
