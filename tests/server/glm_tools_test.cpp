// GLM's XML-ish tool calls: read out of its output (whole, at every split point, a byte at a
// time; string arguments raw, others JSON; cut short; not calls), held by their grammar (the
// arguments' schemas, strings raw with their length and enum), and an earlier call rendered
// back by GLM 4.6's template.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "constrain/gbnf.h"
#include "constrain/matcher.h"
#include "server/answer_cuts.h"
#include "server/answer_parser.h"
#include "server/api_error.h"
#include "server/tool_syntax.h"
#include "testutil/shared_data.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const char* kTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
                  "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}]})";

ToolRequest tools(const char* choice = "auto") {
  json body = json::parse(kTools);
  body["tool_choice"] = choice;
  const ojson ordered = ojson::parse(body.dump());
  return parse_tool_request(body, &ordered);
}

// Content and calls in their order, a call as "[name args]".
std::string read_cut(const std::string& text, const std::vector<size_t>& cuts) {
  AnswerFormat f;
  f.tool_syntax = ToolSyntax::GlmXml;
  f.tool_names = {"get_weather", "now"};
  f.string_arguments = string_arguments(tools());
  std::string out;
  answer_test::feed_cut(f, text, cuts, [&](const AnswerPiece& a) {
    out += a.content;
    for (const ToolCall& c : a.calls) out += "[" + c.name + " " + c.arguments + "]";
  });
  return out;
}

void expect_read(const std::string& text, const std::string& want) {
  answer_test::expect_every_cut(text, want, read_cut);
}

TEST(GlmTools, ReadsCallsStringsRawOthersAsJson) {
  expect_read("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>12</arg_value>\n"
              "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
              R"([get_weather {"city":"12","days":3}])");
  // A string argument whose text is a JSON word stays a string.
  expect_read("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>null</arg_value>\n</tool_call>",
              R"([get_weather {"city":"null"}])");
  // GLM 4.7's form without newlines, two calls, text before them.
  expect_read("Sure.\n<tool_call>now</tool_call><tool_call>get_weather<arg_key>city</arg_key>"
              "<arg_value>Oslo \"N\"</arg_value></tool_call>",
              R"(Sure.[now {}][get_weather {"city":"Oslo \"N\""}])");
}

TEST(GlmTools, WhatIsNotACallStaysText) {
  const std::string other = "<tool_call>rm\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call>";
  expect_read(other, other);
  const std::string cut = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Osl";
  expect_read(cut, cut);
  const std::string no_value = "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>";
  expect_read(no_value, no_value);
}

bool grammar_accepts(const ToolRequest& r, const std::string& text) {
  return answer_test::grammar_accepts_text(tool_call_grammar(ToolSyntax::GlmXml, r).gbnf, text);
}

TEST(GlmTools, GrammarHoldsTheArgumentsSchemas) {
  const ToolRequest r = tools("required");
  const auto call = [](const std::string& args) { return "<tool_call>get_weather\n" + args + "</tool_call>"; };
  EXPECT_TRUE(grammar_accepts(r, call("<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n")));
  EXPECT_TRUE(grammar_accepts(r, call("<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
                                      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
                                      "<arg_key>unit</arg_key>\n<arg_value>c</arg_value>\n")));
  EXPECT_TRUE(grammar_accepts(r, "<tool_call>now</tool_call>"));
  EXPECT_FALSE(grammar_accepts(r, call("<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n")))
      << "city is required";
  EXPECT_FALSE(grammar_accepts(r, call("<arg_key>city</arg_key>\n<arg_value>Oslo, Norway, Europe</arg_value>\n")))
      << "maxLength 12";
  EXPECT_FALSE(grammar_accepts(r, call("<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
                                       "<arg_key>days</arg_key>\n<arg_value>9</arg_value>\n")))
      << "maximum 7";
  EXPECT_FALSE(grammar_accepts(r, call("<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
                                       "<arg_key>unit</arg_key>\n<arg_value>k</arg_value>\n")));
  EXPECT_FALSE(grammar_accepts(r, "<tool_call>rm</tool_call>"));
  // Lengths that are not whole numbers in range are a 400, not a server error.
  for (const char* bad : {R"("5")", "-1", "2.5", "100000"}) {
    json b = json::parse(std::string(R"({"tools": [{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"s": {"type": "string", "maxLength": )") +
                         bad + "}}}}}]}");
    try {
      tool_call_grammar(ToolSyntax::GlmXml, parse_tool_request(b, nullptr));
      ADD_FAILURE() << "maxLength " << bad << " accepted";
    } catch (const ApiError& e) {
      EXPECT_NE(std::string(e.what()).find("maxLength"), std::string::npos) << e.what();
    }
  }
  // A string keyword raw text cannot be held to is refused by name.
  json body = json::parse(R"({"tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}}}]})");
  try {
    tool_call_grammar(ToolSyntax::GlmXml, parse_tool_request(body, nullptr));
    ADD_FAILURE() << "pattern accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.body()["error"]["param"], "tools[0].function.parameters");
    EXPECT_NE(std::string(e.what()).find("properties.s': 'pattern'"), std::string::npos) << e.what();
  }
}

TEST(GlmTools, TheTemplateRendersAnEarlierCall) {
  const std::string source = testing::read_text(testing::oracle_path("templates/GLM-4.6.jinja"));
  ASSERT_EQ(detect_tool_syntax(source), ToolSyntax::GlmXml);
  chat::ChatTemplate tmpl(source, "", "<|endoftext|>");
  ojson messages = ojson::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "cold"}])");
  ojson t = ojson::parse(kTools)["tools"];
  adapt_conversation(ToolSyntax::GlmXml, tools(), messages, t);
  chat::ChatRenderOptions o;
  o.extra_globals = {{"tools", t}};
  const std::string prompt = tmpl.render(messages, o);
  EXPECT_NE(prompt.find("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
                        "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"),
            std::string::npos)
      << prompt;
  // What the parser reads back from that text is the call that was sent.
  const std::string read = read_cut(prompt.substr(prompt.find("<tool_call>get_weather")), {});
  EXPECT_EQ(read.rfind(R"([get_weather {"city":"Oslo","days":2}])", 0), 0u) << read;
}

}  // namespace
}  // namespace jitllm::server
