// Tool calling: each template's syntax is recognised, the grammar of a request's calls accepts
// exactly the calls its tools allow, calls are read out of outputs (whole or a byte at a time,
// cut short, or not calls at all), the conversation is adapted for the template, and the
// tools / tool_choice / parallel_tool_calls fields are validated.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "constrain/gbnf.h"
#include "constrain/matcher.h"
#include "server/api_error.h"
#include "server/tool_call_parser.h"
#include "server/tool_request.h"
#include "server/tool_syntax.h"
#include "testutil/shared_data.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string template_text(const std::string& file) {
  return testing::read_text(testing::oracle_path("templates/" + file));
}

TEST(ToolSyntax, ReadOffTheOracleTemplates) {
  const std::vector<std::pair<const char*, ToolSyntax>> cases = {
      {"Qwen-Qwen3-0.6B.jinja", ToolSyntax::Hermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolSyntax::Hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolSyntax::Hermes},
      {"ibm-granite-granite-4.0.jinja", ToolSyntax::Hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolSyntax::Llama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolSyntax::Llama3},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolSyntax::Llama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolSyntax::MistralList},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolSyntax::MistralArgs},
      {"unsloth-mistral-Devstral-Small-2507.jinja", ToolSyntax::MistralArgs},
      {"google-gemma-2-2b-it.jinja", ToolSyntax::Generic},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolSyntax::Generic},
      {"openai-gpt-oss-120b.jinja", ToolSyntax::Harmony},
      {"Qwen3-Coder.jinja", ToolSyntax::Unsupported},
      {"GLM-4.6.jinja", ToolSyntax::GlmXml},
      {"GLM-4.7-Flash.jinja", ToolSyntax::GlmXml},
      {"tencent-Hy3.jinja", ToolSyntax::Unsupported},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolSyntax::DeepSeekV31},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolSyntax::Unsupported},
      {"meetkai-functionary-medium-v3.1.jinja", ToolSyntax::Unsupported},
  };
  for (const auto& [file, syntax] : cases)
    EXPECT_EQ(tool_syntax_name(detect_tool_syntax(template_text(file))), std::string(tool_syntax_name(syntax)))
        << file;
}

ToolRequest request_of(const std::string& body) {
  const json j = json::parse(body);
  const ojson o = ojson::parse(body);
  return parse_tool_request(j, &o);
}

const char* kTwoTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                  "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}]})";

ToolRequest two_tools(const char* choice = nullptr, bool parallel = true) {
  json body = json::parse(kTwoTools);
  if (choice) body["tool_choice"] = json::parse(choice);
  body["parallel_tool_calls"] = parallel;
  const ojson o = ojson::parse(body.dump());
  return parse_tool_request(body, &o);
}

// Whether the grammar of `syntax` for `request` matches `text` exactly.
bool grammar_accepts(ToolSyntax syntax, const ToolRequest& request, const std::string& text) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  constrain::Matcher m(constrain::parse_gbnf(tool_call_grammar(syntax, request).gbnf),
                       std::make_shared<constrain::Vocabulary>(bytes, std::vector<int32_t>{}));
  const auto s = m.advance_bytes(m.start(), text);
  return s != constrain::Matcher::kDead && m.accepting(s);
}

TEST(ToolGrammar, HoldsCallsToTheToolsSchemas) {
  const ToolRequest any = two_tools("\"required\"");
  const std::string weather = R"(<tool_call>
{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}
</tool_call>)";
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Hermes, any, weather));
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Hermes, any, R"(<tool_call>{"name": "now", "arguments": {}}</tool_call>)"));
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Hermes, any, weather + "\n" + weather));
  // Not a tool, a missing required argument, a value outside the enum, text instead of a call.
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, any, R"(<tool_call>{"name": "rm", "arguments": {}}</tool_call>)"));
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, any, R"(<tool_call>{"name": "get_weather", "arguments": {"unit": "c"}}</tool_call>)"));
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, any, R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "k"}}</tool_call>)"));
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, any, "I would call get_weather"));
  // Whitespace after the last of several calls (the end token follows); none after a single one.
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Hermes, any, weather + "\n"));
  // parallel_tool_calls false: one call; a named choice: that function only.
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, two_tools("\"required\"", false), weather + "\n" + weather));
  const ToolRequest named = two_tools(R"({"type": "function", "function": {"name": "now"}})");
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, named, weather));
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Hermes, named, R"(<tool_call>{"name": "now", "arguments": {}}</tool_call>)"));

  EXPECT_TRUE(grammar_accepts(ToolSyntax::Llama3, any, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Llama3, any, R"(<|python_tag|>{"name": "now", "parameters": {}})"));
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Llama3, any, R"({"name": "now", "arguments": {}})"));
  EXPECT_TRUE(grammar_accepts(ToolSyntax::MistralList, any,
                              R"([TOOL_CALLS][{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Rome"}}])"));
  EXPECT_TRUE(grammar_accepts(ToolSyntax::MistralArgs, any,
                              R"([TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]now[ARGS]{})"));
  EXPECT_FALSE(grammar_accepts(ToolSyntax::MistralArgs, any, R"([TOOL_CALLS]sudo[ARGS]{})"));
}

TEST(ToolGrammar, TriggersOnlyForAuto) {
  auto texts = [](const std::vector<GrammarTrigger>& ts) {
    std::vector<std::string> out;
    for (const auto& t : ts) out.push_back(t.text + (t.at_start ? " (start)" : ""));
    return out;
  };
  EXPECT_EQ(texts(tool_call_grammar(ToolSyntax::Hermes, two_tools("\"auto\"")).triggers),
            std::vector<std::string>{"<tool_call>"});
  EXPECT_TRUE(tool_call_grammar(ToolSyntax::Hermes, two_tools("\"required\"")).triggers.empty());
  EXPECT_EQ(texts(tool_call_grammar(ToolSyntax::MistralArgs, two_tools()).triggers),
            std::vector<std::string>{"[TOOL_CALLS]"});
  EXPECT_EQ(texts(tool_call_grammar(ToolSyntax::Llama3, two_tools()).triggers),
            (std::vector<std::string>{"<|python_tag|>", "{\"name\" (start)"}));
}

TEST(ToolGrammar, RefusesWhatItCannotHold) {
  const ToolRequest bad = request_of(R"({"tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"type": "string", "contentEncoding": "base64"}}}}}]})");
  try {
    tool_call_grammar(ToolSyntax::Hermes, bad);
    FAIL() << "an unsupported keyword was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.body()["error"]["param"], "tools[0].function.parameters");
  }
  EXPECT_THROW(tool_call_grammar(ToolSyntax::Unsupported, two_tools()), ApiError);
  // Arguments are an object: a schema of another type is refused, an empty one is any object.
  EXPECT_THROW(tool_call_grammar(ToolSyntax::Hermes, request_of(R"({"tools": [{"type": "function",
      "function": {"name": "f", "parameters": {"type": "string"}}}]})")), ApiError);
  const ToolRequest empty = request_of(R"({"tools": [{"type": "function", "function": {"name": "f",
      "parameters": {}}}], "tool_choice": "required"})");
  EXPECT_TRUE(grammar_accepts(ToolSyntax::Hermes, empty, R"(<tool_call>{"name": "f", "arguments": {"x": [1]}}</tool_call>)"));
  EXPECT_FALSE(grammar_accepts(ToolSyntax::Hermes, empty, R"(<tool_call>{"name": "f", "arguments": 3}</tool_call>)"));
}

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

Parsed parse(ToolSyntax syntax, const std::string& text, bool byte_by_byte) {
  ToolCallParser p(syntax, {"get_weather", "now", "f", "g"});
  Parsed out;
  if (byte_by_byte)
    for (char c : text) out.content += p.push(std::string(1, c), out.calls);
  else
    out.content += p.push(text, out.calls);
  out.content += p.finish(out.calls);
  return out;
}

TEST(ToolCallParser, ReadsEverySyntaxWholeOrByteByByte) {
  struct Case {
    ToolSyntax syntax;
    std::string text, content;
    std::vector<std::pair<std::string, std::string>> calls;
  };
  const std::vector<Case> cases = {
      {ToolSyntax::Hermes,
       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
       "<tool_call>{\"name\": \"now\", \"arguments\": \"{}\"}</tool_call>",
       "Let me look.", {{"get_weather", R"({"city":"Oslo"})"}, {"now", "{}"}}},
      {ToolSyntax::Llama3, R"(<|python_tag|>{"name": "now", "parameters": {"tz": "UTC"}})", "",
       {{"now", R"({"tz":"UTC"})"}}},
      {ToolSyntax::Llama3, R"({"name": "get_weather", "parameters": {"city": "a}b\"c"}})", "",
       {{"get_weather", R"({"city":"a}b\"c"})"}}},
      {ToolSyntax::MistralList,
       R"([TOOL_CALLS][{"name": "now", "arguments": {}, "id": "abcdefghi"}, {"name": "f", "arguments": {"k": [1, 2]}}])",
       "", {{"now", "{}"}, {"f", R"({"k":[1,2]})"}}},
      {ToolSyntax::MistralArgs, R"(Sure[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]123456789[ARGS]{})", "Sure",
       {{"f", R"({"a":1})"}, {"g", "{}"}}},
      // No call at all: the text, whitespace and a '<' that did not start one included.
      {ToolSyntax::Hermes, "a < b \n", "a < b \n", {}},
      // The trigger, then no call: all of it is content.
      {ToolSyntax::Hermes, "<tool_call> not json", "<tool_call> not json", {}},
      // Not a call, then one: the first is content, the second a call.
      {ToolSyntax::Hermes, "<tool_call>oops</tool_call> then <tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>",
       "<tool_call>oops</tool_call> then", {{"now", "{}"}}},
      // A function the request does not offer is no call.
      {ToolSyntax::Hermes, "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>",
       "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>", {}},
      // Llama's bare call counts only as the whole answer: JSON with a "name" after text is text.
      {ToolSyntax::Llama3, R"(Here: {"name": "now", "parameters": {}})", R"(Here: {"name": "now", "parameters": {}})", {}},
      {ToolSyntax::Llama3, R"({"name": "Alice", "age": 3})", R"({"name": "Alice", "age": 3})", {}},
      {ToolSyntax::Llama3, R"(  {"name": "now", "parameters": {}})", "", {{"now", "{}"}}},
      // A call cut short (max_tokens): its text goes back into the content.
      {ToolSyntax::Hermes, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call><tool_call>{\"na",
       "<tool_call>{\"na", {{"now", "{}"}}},
  };
  for (const Case& c : cases)
    for (bool bytes : {false, true}) {
      SCOPED_TRACE(c.text + (bytes ? " (byte by byte)" : ""));
      const Parsed p = parse(c.syntax, c.text, bytes);
      EXPECT_EQ(p.content, c.content);
      ASSERT_EQ(p.calls.size(), c.calls.size());
      for (size_t i = 0; i < c.calls.size(); ++i) {
        EXPECT_EQ(p.calls[i].name, c.calls[i].first);
        EXPECT_EQ(p.calls[i].arguments, c.calls[i].second);
        EXPECT_EQ(p.calls[i].id.size(), c.syntax == ToolSyntax::MistralArgs || c.syntax == ToolSyntax::MistralList ? 9u : 29u);
      }
    }
}

TEST(ToolCallParser, HandsOutEachCallWhenItsTextIsComplete) {
  ToolCallParser p(ToolSyntax::Hermes, {"now"});
  std::vector<ToolCall> calls;
  EXPECT_EQ(p.push("Hi <tool", calls), "Hi");  // a possible trigger and the space before it wait
  EXPECT_EQ(p.push("_call>{\"name\": \"now\", \"arguments\": {}}", calls), "");
  EXPECT_TRUE(calls.empty());  // </tool_call> not seen yet
  EXPECT_EQ(p.push("</tool_call>", calls), "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(p.finish(calls), "");
  EXPECT_EQ(calls.size(), 1u);
}

TEST(JsonValueEnd, FindsTheEndOrWaits) {
  EXPECT_EQ(json_value_end(R"( {"a": "}"} tail)"), 11u);
  EXPECT_EQ(json_value_end(R"([1, [2], "]"])"), 13u);
  EXPECT_EQ(json_value_end(R"("a\"b" x)"), 6u);
  EXPECT_EQ(json_value_end("12,"), 2u);
  EXPECT_EQ(json_value_end("12"), std::string::npos);
  EXPECT_EQ(json_value_end(R"({"a": [1, 2)"), std::string::npos);
  EXPECT_EQ(json_value_end("  "), std::string::npos);
}

ojson history() {
  return ojson::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "abcdefghi", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "abcdefghi", "content": "7 C, rain"}])");
}

TEST(AdaptConversation, ArgumentsBecomeObjectsForTemplatesThatKnowTools) {
  ojson messages = history();
  ojson tools = ojson::parse(kTwoTools)["tools"];
  adapt_conversation(ToolSyntax::Hermes, two_tools(), messages, tools);
  EXPECT_EQ(messages[1]["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"city": "Oslo"})"));
  EXPECT_EQ(tools.size(), 2u);
  // Through the model's own templates: the call and its result are in the prompt.
  for (const char* file : {"Qwen-Qwen3-0.6B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                           "mistralai-Mistral-Nemo-Instruct-2407.jinja"}) {
    SCOPED_TRACE(file);
    chat::ChatTemplate t(template_text(file), "<s>", "</s>");
    chat::ChatRenderOptions o;
    o.extra_globals["tools"] = tools;
    const std::string prompt = t.render(messages, o);
    EXPECT_NE(prompt.find("get_weather"), std::string::npos);
    EXPECT_NE(prompt.find("7 C, rain"), std::string::npos);
    EXPECT_NE(prompt.find("Oslo\""), std::string::npos);
    EXPECT_EQ(prompt.find("\\\"city"), std::string::npos) << "arguments were written as a string";
  }
}

TEST(AdaptConversation, GenericWritesToolsCallsAndResultsAsText) {
  ojson messages = history();
  ojson tools = ojson::parse(kTwoTools)["tools"];
  adapt_conversation(ToolSyntax::Generic, two_tools(), messages, tools);
  EXPECT_TRUE(tools.is_null());
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0]["role"], "system");
  EXPECT_NE(messages[0]["content"].get<std::string>().find("\"get_weather\""), std::string::npos);
  EXPECT_EQ(messages[2]["content"],
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>");
  EXPECT_FALSE(messages[2].contains("tool_calls"));
  EXPECT_EQ(messages[3]["role"], "user");
  EXPECT_EQ(messages[3]["content"], "<tool_response>\n7 C, rain\n</tool_response>");
  // A malformed call in the history is a 400 naming it.
  ojson bad = history();
  bad[1]["tool_calls"][0] = "x";
  ojson no_tools;
  try {
    adapt_conversation(ToolSyntax::Generic, two_tools(), bad, no_tools);
    ADD_FAILURE() << "a malformed tool call was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.body()["error"]["param"], "messages[1].tool_calls[0]");
  }
  // A template that raises on any role but system/user/assistant renders it.
  chat::ChatTemplate t(
      "{% for m in messages %}{% if m.role not in ['system','user','assistant'] %}"
      "{{ raise_exception('bad role') }}{% endif %}{{ m.role }}:{{ m.content }}\n{% endfor %}", "", "");
  EXPECT_NO_THROW(t.render(messages));
}

void expect_refused(const std::string& body, const std::string& param) {
  try {
    request_of(body);
    FAIL() << "accepted: " << body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.body()["error"]["param"], param) << body;
  }
}

TEST(ToolRequest, ValidatesToolsChoiceAndParallel) {
  const ToolRequest r = two_tools();
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.choice, ToolChoice::Auto);
  EXPECT_TRUE(r.calls_expected());
  EXPECT_EQ(r.tools[1].parameters, ojson::parse(R"({"type": "object", "properties": {}})"));
  // The schema keeps the order it was written in.
  EXPECT_EQ(r.tools[0].parameters["properties"].begin().key(), "city");
  EXPECT_FALSE(request_of("{}").calls_expected());
  EXPECT_FALSE(two_tools("\"none\"").calls_expected());
  EXPECT_FALSE(two_tools("\"auto\"", false).parallel);
  EXPECT_EQ(two_tools(R"({"type": "function", "function": {"name": "now"}})").named, "now");

  expect_refused(R"({"tools": {}})", "tools");
  expect_refused(R"({"tools": [{"type": "code", "function": {"name": "f"}}]})", "tools[0].type");
  expect_refused(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})", "tools[0].function.name");
  expect_refused(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})",
                 "tools[0].function.parameters");
  expect_refused(R"({"tools": [{"type": "function", "function": {"name": "f"}},
                               {"type": "function", "function": {"name": "f"}}]})", "tools[1].function.name");
  expect_refused(R"({"tool_choice": "required"})", "tool_choice");
  expect_refused(R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"})", "tool_choice");
  expect_refused(R"({"tools": [{"type": "function", "function": {"name": "f"}}],
                     "tool_choice": {"type": "function", "function": {"name": "g"}}})", "tool_choice");
  expect_refused(R"({"parallel_tool_calls": "yes"})", "parallel_tool_calls");
}

}  // namespace
}  // namespace jitllm::server
