// Reasoning split off the answer: <think> blocks (at the start, or opened by the prompt) into
// reasoning and content, whole and at every split point of the output, the text held back
// while a tag may be starting, thinking cut short by max_tokens, calls read only after the
// thinking, and the request fields that choose all this.
#include <gtest/gtest.h>

#include "constrain/gbnf.h"
#include "constrain/matcher.h"
#include "server/answer_cuts.h"
#include "server/answer_parser.h"
#include "server/api_error.h"
#include "server/reasoning_parser.h"
#include "server/request.h"
#include "server/tool_syntax.h"
#include "testutil/shared_data.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;

using answer_test::AnswerSplit;
void expect_split(const AnswerFormat& f, const std::string& text, const AnswerSplit& want) {
  answer_test::expect_answer_split(f, text, want);
}
using Split = AnswerSplit;

AnswerFormat think(bool starts_inside = false) {
  AnswerFormat f;
  f.reasoning = true;
  f.starts_thinking = starts_inside;
  return f;
}

TEST(ReasoningParser, SplitsThinkingFromTheAnswer) {
  expect_split(think(), "<think>\nI add 2 and 2.\n\nIt is 4.\n</think>\n\nThe answer is 4.",
               {"I add 2 and 2.\n\nIt is 4.", "The answer is 4.", {}});
  // Opened by the prompt (QwQ, DeepSeek-R1): the output starts inside.
  expect_split(think(true), "I add 2 and 2.\n</think>\n\nThe answer is 4.",
               {"I add 2 and 2.", "The answer is 4.", {}});
  // An empty thinking (Qwen3 with enable_thinking false writes it into the prompt).
  expect_split(think(), "<think>\n\n</think>\n\nHi!", {"", "Hi!", {}});
  // Only a <think> at the start opens it; later tags are text.
  expect_split(think(), "Hi <think>x</think> there", {"", "Hi <think>x</think> there", {}});
  expect_split(think(), "  Hi", {"", "  Hi", {}});
  expect_split(think(), "<thin", {"", "<thin", {}});
  expect_split(think(), "", {"", "", {}});
}

TEST(ReasoningParser, ThinkingCutShortIsReasoning) {
  // max_tokens ended the output inside the thinking: it is all reasoning, no content.
  expect_split(think(), "<think>\nFirst, the", {"First, the", "", {}});
  expect_split(think(true), "First, the", {"First, the", "", {}});
  // A close tag cut in half is the thought's text.
  expect_split(think(true), "First</thi", {"First</thi", "", {}});
}

TEST(ReasoningParser, HoldsBackWhatMayBeATag) {
  ReasoningParser p(false);
  std::string reasoning, content;
  p.push("<thi", reasoning, content);
  EXPECT_EQ(reasoning + content, "");
  p.push("nk>\nab", reasoning, content);
  EXPECT_EQ(reasoning, "ab");
  p.push("  </thi", reasoning, content);
  EXPECT_EQ(reasoning, "ab") << "neither the spaces nor the tag's start are shown yet";
  p.push("nk>\n\nAnswer", reasoning, content);
  EXPECT_EQ(reasoning, "ab");
  EXPECT_EQ(content, "Answer");
  p.finish(reasoning, content);
  EXPECT_EQ(content, "Answer");
}

TEST(ReasoningParser, NoneLeavesTheThinkingInTheContent) {
  AnswerFormat none;
  EXPECT_FALSE(none.parsed());
  AnswerFormat tools;
  tools.tool_syntax = ToolSyntax::Hermes;
  expect_split(tools, "<think>\nHm.\n</think>\n\nHi", {"", "<think>\nHm.\n</think>\n\nHi", {}});
}

TEST(ReasoningParser, CallsAreReadAfterTheThinkingOnly) {
  AnswerFormat f = think();
  f.tool_syntax = ToolSyntax::Hermes;
  f.tool_names = {"get_weather"};
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  expect_split(f, "<think>\nI need the weather.\n</think>\n\n" + call,
               {"I need the weather.", "", {"get_weather {\"city\":\"Paris\"}"}});
  // A call written inside the thinking is part of the thought.
  expect_split(f, "<think>" + call + "</think>Hi", {call, "Hi", {}});
  f.starts_thinking = true;
  expect_split(f, "Weather.</think>\n" + call, {"Weather.", "", {"get_weather {\"city\":\"Paris\"}"}});
}

TEST(ReasoningFormat, DetectedFromTemplatesAndPrompts) {
  const auto source = [](const char* file) {
    return testing::read_text(testing::oracle_path(std::string("templates/") + file));
  };
  for (const char* f : {"Qwen-Qwen3-0.6B.jinja", "Qwen-QwQ-32B.jinja",
                        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"})
    EXPECT_TRUE(template_thinks(source(f))) << f;
  for (const char* f : {"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja"})
    EXPECT_FALSE(template_thinks(source(f))) << f;
  EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_closes_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_closes_thinking("<|im_start|>assistant\n<think>\n"));
}

TEST(ReasoningFormat, RequestFields) {
  auto parse = [](const json& extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    body.merge_patch(extra);
    return parse_chat_request(body);
  };
  EXPECT_FALSE(parse(json::object()).reasoning_format.has_value());
  EXPECT_EQ(parse({{"reasoning_format", "none"}}).reasoning_format, ReasoningFormat::None);
  EXPECT_EQ(parse({{"reasoning_format", "deepseek"}}).reasoning_format, ReasoningFormat::Deepseek);
  EXPECT_EQ(parse({{"reasoning_effort", "high"}}).reasoning_effort, "high");
  EXPECT_EQ(parse({{"chat_template_kwargs", {{"enable_thinking", false}}}}).template_kwargs.dump(),
            R"({"enable_thinking":false})");
  const auto refused = [&](const json& extra, const std::string& param) {
    try {
      parse(extra);
      ADD_FAILURE() << extra.dump() << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.body()["error"]["param"], param) << extra.dump();
    }
  };
  refused({{"reasoning_format", "deepseek-legacy"}}, "reasoning_format");
  refused({{"reasoning_format", 1}}, "reasoning_format");
  refused({{"reasoning_effort", "max"}}, "reasoning_effort");
  refused({{"chat_template_kwargs", "x"}}, "chat_template_kwargs");
  refused({{"chat_template_kwargs", {{"messages", json::array()}}}}, "chat_template_kwargs");
  refused({{"messages", {{{"role", "assistant"}, {"content", "a"}, {"reasoning_content", 3}}}}},
          "messages[0].reasoning_content");
}

// The grammar of a required call lets a thinking model think first.
bool grammar_accepts(const ToolRequest& request, ThinkingLead lead, const std::string& text) {
  return answer_test::grammar_accepts_text(tool_call_grammar(ToolSyntax::Hermes, request, lead).gbnf, text);
}

TEST(ReasoningGrammar, RequiredCallsMayFollowTheThinking) {
  json body = json::parse(R"({"tool_choice": "required", "tools": [{"type": "function",
      "function": {"name": "now", "parameters": {"type": "object"}}}]})");
  const ToolRequest r = parse_tool_request(body, nullptr);
  const std::string call = R"(<tool_call>{"name": "now", "arguments": {}}</tool_call>)";
  EXPECT_TRUE(grammar_accepts(r, ThinkingLead::Optional, call));
  EXPECT_TRUE(grammar_accepts(r, ThinkingLead::Optional, "<think>\nI need the time; a < b.\n</think>\n\n" + call));
  EXPECT_FALSE(grammar_accepts(r, ThinkingLead::None, "<think>\nx\n</think>\n" + call));
  EXPECT_FALSE(grammar_accepts(r, ThinkingLead::Optional, "<think>\nx\n</think>\nNo call."));
  // The thought cannot hold its own end: the first </think> closes it.
  EXPECT_FALSE(grammar_accepts(r, ThinkingLead::Optional, "<think>a</think>b</think>" + call));
  EXPECT_TRUE(grammar_accepts(r, ThinkingLead::Open, "I need the time.\n</think>\n" + call));
  EXPECT_FALSE(grammar_accepts(r, ThinkingLead::Open, call));
}

}  // namespace
}  // namespace jitllm::server
