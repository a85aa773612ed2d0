// DeepSeek V3.1's tool calls: read out of its output behind its thinking (whole, at every split
// point, a byte at a time; cut short; not calls), held by their grammar, and the conversation
// as its template renders it (the tools described in the system message, which the template
// does not do, and an earlier call's arguments).
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "constrain/gbnf.h"
#include "constrain/matcher.h"
#include "server/answer_cuts.h"
#include "server/answer_parser.h"
#include "server/tool_syntax.h"
#include "testutil/shared_data.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const std::string kBegin = "<\uFF5Ctool\u2581calls\u2581begin\uFF5C>";
const std::string kEnd = "<\uFF5Ctool\u2581calls\u2581end\uFF5C>";
const std::string kCall = "<\uFF5Ctool\u2581call\u2581begin\uFF5C>";
const std::string kCallEnd = "<\uFF5Ctool\u2581call\u2581end\uFF5C>";
const std::string kSep = "<\uFF5Ctool\u2581sep\uFF5C>";

using Split = answer_test::AnswerSplit;

AnswerFormat deepseek() {
  AnswerFormat f;
  f.reasoning = true;
  f.starts_thinking = true;  // V3.1's generation prompt opens <think>
  f.tool_syntax = ToolSyntax::DeepSeekV31;
  f.tool_names = {"get_weather", "now"};
  return f;
}

void expect_split(const std::string& text, const Split& want) {
  answer_test::expect_answer_split(deepseek(), text, want);
}

TEST(DeepSeekTools, CallsAfterTheThinking) {
  const std::string weather = kCall + "get_weather" + kSep + R"({"city": "Paris"})" + kCallEnd;
  const std::string now = kCall + "now" + kSep + "{}" + kCallEnd;
  expect_split("Need it.</think>" + kBegin + weather + now + kEnd,
               {"Need it.", "", {R"(get_weather {"city":"Paris"})", "now {}"}});
  // Text before the calls; the block's end missing when the output stopped after the last call.
  expect_split("Hm.</think>Checking." + kBegin + weather,
               {"Hm.", "Checking.", {R"(get_weather {"city":"Paris"})"}});
}

TEST(DeepSeekTools, WhatIsNotACallStaysText) {
  const std::string other = kBegin + kCall + "rm" + kSep + "{}" + kCallEnd + kEnd;
  expect_split("x</think>" + other, {"x", other, {}});
  const std::string cut = kBegin + kCall + "get_weather" + kSep + R"({"city": "Pa)";
  expect_split("x</think>" + cut, {"x", cut, {}});
  // Calls complete before the cut stay calls; the cut one is content.
  const std::string now = kCall + "now" + kSep + "{}" + kCallEnd;
  expect_split("x</think>" + kBegin + now + kCall + "now" + kSep + "{",
               {"x", kCall + "now" + kSep + "{", {"now {}"}});
  const std::string not_object = kBegin + kCall + "now" + kSep + "[1]" + kCallEnd + kEnd;
  expect_split("x</think>" + not_object, {"x", not_object, {}});
}

bool grammar_accepts(const char* choice, bool parallel, const std::string& text) {
  json body = json::parse(R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}]})");
  body["tool_choice"] = choice;
  body["parallel_tool_calls"] = parallel;
  const ToolRequest r = parse_tool_request(body, nullptr);
  return answer_test::grammar_accepts_text(tool_call_grammar(ToolSyntax::DeepSeekV31, r).gbnf, text);
}

TEST(DeepSeekTools, GrammarHoldsTheBlock) {
  const std::string weather = kCall + "get_weather" + kSep + R"({"city": "Oslo"})" + kCallEnd;
  const std::string now = kCall + "now" + kSep + "{}" + kCallEnd;
  EXPECT_TRUE(grammar_accepts("required", true, kBegin + weather + kEnd));
  EXPECT_TRUE(grammar_accepts("required", true, kBegin + weather + now + kEnd));
  EXPECT_FALSE(grammar_accepts("required", false, kBegin + weather + now + kEnd));
  EXPECT_FALSE(grammar_accepts("required", true, kBegin + kCall + "get_weather" + kSep + "{}" + kCallEnd + kEnd))
      << "city is required";
  EXPECT_FALSE(grammar_accepts("required", true, kBegin + kCall + "rm" + kSep + "{}" + kCallEnd + kEnd));
  EXPECT_FALSE(grammar_accepts("required", true, "No call."));
  const ToolRequest autos = parse_tool_request(
      json::parse(R"({"tools": [{"type": "function", "function": {"name": "now"}}]})"), nullptr);
  const ToolGrammar g = tool_call_grammar(ToolSyntax::DeepSeekV31, autos);
  ASSERT_EQ(g.triggers.size(), 1u);
  EXPECT_EQ(g.triggers[0].text, kBegin);
}

TEST(DeepSeekTools, TheTemplateGetsTheToolsDescribedAndTheCallsBack) {
  const std::string source =
      testing::read_text(testing::oracle_path("templates/deepseek-ai-DeepSeek-V3.1.jinja"));
  ASSERT_EQ(detect_tool_syntax(source), ToolSyntax::DeepSeekV31);
  chat::ChatTemplate tmpl(source, "<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>",
                          "<\uFF5Cend\u2581of\u2581sentence\uFF5C>");
  ojson messages = ojson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}])");
  ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather now", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}}}}])");
  const ojson body = {{"tools", tools}};  // key order kept, as the server reads bodies
  const ToolRequest request = parse_tool_request(json::parse(body.dump()), &body);
  adapt_conversation(ToolSyntax::DeepSeekV31, request, messages, tools);
  const std::string prompt = tmpl.render(messages);
  EXPECT_NE(prompt.find("Be brief.\n\n## Tools\nYou have access to the following tools:\n\n"
                        "### get_weather\nDescription: Weather now\n\nParameters: "
                        R"({"type":"object","properties":{"city":{"type":"string"}}})"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find(kBegin + kCall + "get_weather" + kSep + R"({"city": "Paris"})" + kCallEnd + kEnd),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<\uFF5Ctool\u2581output\u2581begin\uFF5C>18C"), std::string::npos) << prompt;
}

}  // namespace
}  // namespace jitllm::server
