// Anthropic Messages on the chat path: requests translated field by field into the chat
// request (merged turns, tool_use / tool_result as calls and tool messages, a final assistant
// turn continued), every refusal naming its field, messages and stop_reasons rendered from the
// job's output, the SSE events of a stream in order with their block indexes, errors in
// Anthropic's shape.
#include "server/anthropic_format.h"

#include <gtest/gtest.h>

#include <utility>

namespace jitllm::server {
namespace {

using json = nlohmann::json;

AnthropicRequest parse(const std::string& text, bool count_tokens = false) {
  const json body = parse_json_body(text);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  return parse_anthropic_request(body, &ordered, count_tokens);
}

// A body with the required fields and `extra` fields merged in (null removes one).
std::string body_with(const json& extra) {
  json b = {
      {"model", "m"}, {"max_tokens", 16}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  if (!extra.is_null()) b.merge_patch(extra);  // body_with({}): a null, no patch
  return b.dump();
}

void expect_refused(const std::string& body, const std::string& param, const std::string& text) {
  try {
    parse(body);
    ADD_FAILURE() << "accepted: " << body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.body()["error"]["param"], param) << body << " -> " << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos)
        << "message '" << e.what() << "' lacks '" << text << "'";
    const nlohmann::ordered_json a = anthropic_error_body(e);
    EXPECT_EQ(a.begin().key(), "type");  // Anthropic's key order
    EXPECT_EQ(a["type"], "error");
    EXPECT_EQ(a["error"]["type"], "invalid_request_error");
  }
}

const char* kConversation = R"({
  "model": "m", "max_tokens": 64, "temperature": 0.25, "top_p": 0.9, "top_k": 40,
  "stop_sequences": ["END", "\n\n"], "stream": true, "metadata": {"user_id": "u-1"},
  "service_tier": "auto", "thinking": {"type": "disabled"},
  "system": [{"type": "text", "text": "Be brief."},
             {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
  "tools": [{"name": "get_weather", "description": "Weather now",
             "input_schema": {"type": "object", "properties": {"unit": {"type": "string"},
                                                                "city": {"type": "string"}},
                              "required": ["city"]}}],
  "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
  "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": [
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_abc123", "name": "get_weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_abc123",
       "content": [{"type": "text", "text": "-3 C"}]},
      {"type": "text", "text": "And now?"}]},
    {"role": "user", "content": "Quickly."}]})";

TEST(AnthropicRequest, TranslatesEveryFieldIntoTheChatRequest) {
  const AnthropicRequest a = parse(kConversation);
  const ChatRequest& r = a.chat;
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.options.max_tokens, 64);
  EXPECT_DOUBLE_EQ(r.options.temperature, 0.25);
  EXPECT_DOUBLE_EQ(r.options.top_p, 0.9);
  EXPECT_EQ(r.options.top_k, 40);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(r.options.stream);
  EXPECT_EQ(a.continuation, "");

  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0].raw, json({{"role", "system"}, {"content", "Be brief.\n\nUse tools."}}));
  EXPECT_EQ(r.messages[1].raw, json({{"role", "user"}, {"content", "Weather in Oslo?"}}));
  const json& call = r.messages[2].raw["tool_calls"][0];
  EXPECT_EQ(r.messages[2].raw["content"], "Checking.");
  EXPECT_EQ(call["id"], "abc123");  // without Anthropic's toolu_
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Oslo"}}));
  EXPECT_EQ(r.messages[3].raw,
            json({{"role", "tool"}, {"tool_call_id", "abc123"}, {"content", "-3 C"}}));
  // The text after the result, and the next user message merged with it.
  EXPECT_EQ(r.messages[4].raw, json({{"role", "user"}, {"content", "And now?\n\nQuickly."}}));
  EXPECT_EQ(r.messages[4].content, "And now?\n\nQuickly.");

  const ToolRequest& t = r.tool_request;
  ASSERT_EQ(t.tools.size(), 1u);
  EXPECT_EQ(t.choice, ToolChoice::Required);
  EXPECT_FALSE(t.parallel);
  EXPECT_EQ(t.tools[0].description, "Weather now");
  // The schema's properties in the order written (the grammar generates them in it).
  EXPECT_EQ(t.tools[0].parameters["properties"].begin().key(), "unit");
  EXPECT_EQ(r.tools[0]["type"], "function");
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
}

TEST(AnthropicRequest, ToolChoicesMapOntoTheToolEngine) {
  const json tools = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}},
                                     {"name": "g", "input_schema": {"type": "object"}}])");
  auto choice = [&](const json& tc) {
    json extra = json::object();
    extra["tools"] = tools;
    if (!tc.is_null()) extra["tool_choice"] = tc;
    return parse(body_with(extra)).chat.tool_request;
  };
  EXPECT_EQ(choice(nullptr).choice, ToolChoice::Auto);
  EXPECT_TRUE(choice(nullptr).parallel);
  EXPECT_EQ(choice({{"type", "auto"}}).choice, ToolChoice::Auto);
  EXPECT_EQ(choice({{"type", "none"}}).choice, ToolChoice::None);
  EXPECT_EQ(choice({{"type", "any"}}).choice, ToolChoice::Required);
  const ToolRequest named = choice({{"type", "tool"}, {"name", "g"}});
  EXPECT_EQ(named.choice, ToolChoice::Named);
  EXPECT_EQ(named.named, "g");
  EXPECT_EQ(parse(body_with({})).chat.tool_request.choice, ToolChoice::None);
  EXPECT_TRUE(parse(body_with({})).chat.tools.is_null());
}

TEST(AnthropicRequest, AFinalAssistantTurnIsContinued) {
  const AnthropicRequest a = parse(body_with(
      {{"messages",
        {{{"role", "user"}, {"content", "Count"}},
         {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "1, 2,"}}}}}}}}));
  EXPECT_EQ(a.continuation, "1, 2,");
  ASSERT_EQ(a.chat.messages.size(), 1u);  // the assistant turn is not a message of the prompt
  EXPECT_EQ(a.chat.messages[0].role, "user");
  // An empty final assistant message is no continuation, and allowed.
  const AnthropicRequest e = parse(body_with(
      {{"messages",
        {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", ""}}}}}));
  EXPECT_EQ(e.continuation, "");
  EXPECT_EQ(e.chat.messages.size(), 1u);
}

TEST(AnthropicRequest, ThinkingBlocksGoBackAsTheTurnsReasoning) {
  const AnthropicRequest a = parse(body_with(
      {{"messages",
        {{{"role", "user"}, {"content", "Hi"}},
         {{"role", "assistant"},
          {"content", {{{"type", "thinking"}, {"thinking", "Greet back."}, {"signature", ""}},
                       {{"type", "text"}, {"text", "Hello!"}}}}},
         {{"role", "user"}, {"content", "Bye"}}}}}));
  ASSERT_EQ(a.chat.messages.size(), 3u);
  EXPECT_EQ(a.chat.messages[1].raw["reasoning_content"], "Greet back.");
  EXPECT_EQ(a.chat.messages[1].content, "Hello!");
  EXPECT_FALSE(a.chat.reasoning_format.has_value()) << "the server's reasoning format applies";
  // A continued answer is not split.
  const AnthropicRequest c = parse(body_with(
      {{"messages", {{{"role", "user"}, {"content", "Count"}}, {{"role", "assistant"}, {"content", "1,"}}}}}));
  EXPECT_EQ(c.chat.reasoning_format, ReasoningFormat::None);
  expect_refused(body_with({{"messages",
                             {{{"role", "user"}, {"content", "Hi"}},
                              {{"role", "assistant"},
                               {"content", {{{"type", "redacted_thinking"}, {"data", "x"}}}}},
                              {{"role", "user"}, {"content", "Bye"}}}}}),
                 "messages[1].content[0].type", "redacted");
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  EXPECT_EQ(parse(body_with({{"max_tokens", nullptr}}), true).chat.options.max_tokens, -1);
  expect_refused(body_with({{"max_tokens", nullptr}}), "max_tokens", "is required");
}

TEST(AnthropicRequest, RefusesWhatItDoesNotHonourNamingTheField) {
  const json user_hi = {{"role", "user"}, {"content", "Hi"}};
  auto msgs = [&](json content, const char* role = "user") {
    return body_with({{"messages", {{{"role", role}, {"content", std::move(content)}}}}});
  };
  const json tool = {{"name", "f"}, {"input_schema", {{"type", "object"}}}};
  const std::pair<std::string, std::pair<std::string, std::string>> cases[] = {
      {body_with({{"max_tokens", 0}}), {"max_tokens", "between 1 and"}},
      {body_with({{"max_tokens", "8"}}), {"max_tokens", "integer"}},
      {body_with({{"temperature", 1.5}}), {"temperature", "between 0 and 1"}},
      {body_with({{"top_p", -0.1}}), {"top_p", "between 0 and 1"}},
      {body_with({{"top_k", 2.5}}), {"top_k", "integer"}},
      {body_with({{"stream", "yes"}}), {"stream", "boolean"}},
      {body_with({{"stop_sequences", "END"}}), {"stop_sequences", "array"}},
      {body_with({{"stop_sequences", {""}}}), {"stop_sequences[0]", "empty"}},
      {body_with({{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}),
       {"thinking", "thinking"}},
      {body_with({{"service_tier", "priority"}}), {"service_tier", "one tier"}},
      {body_with({{"metadata", {{"session", "x"}}}}), {"metadata.session", "not a field"}},
      {body_with({{"container", "c"}}), {"container", "container"}},
      {body_with({{"mcp_servers", json::array()}}), {"mcp_servers", "MCP"}},
      {body_with({{"frequency_penalty", 0.5}}),
       {"frequency_penalty", "not a field this server honours"}},
      {body_with({{"messages", nullptr}}), {"messages", "is required"}},
      {body_with({{"messages", json::array()}}), {"messages", "must not be empty"}},
      {msgs("Hi", "assistant"), {"messages[0].role", "first message must be a user message"}},
      {msgs("Hi", "system"), {"messages[0].role", "top-level 'system'"}},
      {msgs(""), {"messages[0].content", "must not be empty"}},
      {msgs({{{"type", "image"}, {"source", {{"type", "base64"}}}}}),
       {"messages[0].content[0].type", "text-only"}},
      {msgs({{{"type", "document"}}}), {"messages[0].content[0].type", "text-only"}},
      {msgs({{{"type", "thinking"}, {"thinking", "x"}}}),
       {"messages[0].content[0].type", "thinking"}},
      {msgs({{{"type", "text"}, {"text", ""}}}), {"messages[0].content[0].text", "non-empty"}},
      {msgs({{{"type", "text"}, {"text", "a"}, {"citations", {{{"type", "x"}}}}}}),
       {"messages[0].content[0].citations", "citations"}},
      {msgs({{{"type", "text"}, {"text", "a"}, {"cache_control", {{"type", "forever"}}}}}),
       {"messages[0].content[0].cache_control", "ephemeral"}},
      {msgs({{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", json::object()}}}),
       {"messages[0].content[0].type", "assistant messages"}},
      {msgs({{{"type", "tool_result"}, {"tool_use_id", "toolu_nope"}, {"content", "x"}}}),
       {"messages[0].content[0].tool_use_id", "not the id of a tool_use"}},
      {msgs({{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", {{{"type", "image"}}}}}}),
       {"messages[0].content[0].content[0].type", "tool_result"}},
      {body_with({{"messages", {user_hi, {{"role", "assistant"}, {"content", "Sure "}}}}}),
       {"messages[1].content", "whitespace"}},
      {body_with({{"messages", {user_hi, {{"role", "assistant"}, {"content", "Sure"}}}},
                  {"tools", {tool}},
                  {"tool_choice", {{"type", "any"}}}}),
       {"tool_choice", "cannot be combined"}},
      {body_with({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}),
       {"tools[0].type", "server tools"}},
      {body_with({{"tools", {{{"name", "f"}}}}}), {"tools[0].input_schema", "JSON Schema"}},
      {body_with({{"tools", {{{"name", "f"}, {"input_schema", {{"type", "array"}}}}}}}),
       {"tools[0].input_schema.type", "\"object\""}},
      {body_with({{"tools", {{{"name", "bad name"}, {"input_schema", {{"type", "object"}}}}}}}),
       {"tools[0].name", "letters"}},
      {body_with({{"tools", {tool, tool}}}), {"tools[1].name", "two tools"}},
      {body_with({{"tool_choice", {{"type", "any"}}}}), {"tool_choice", "needs tools"}},
      {body_with({{"tools", {tool}}, {"tool_choice", {{"type", "tool"}, {"name", "g"}}}}),
       {"tool_choice.name", "not among the tools"}},
      {body_with({{"tools", {tool}}, {"tool_choice", "auto"}}), {"tool_choice", "object"}},
      {body_with({{"tools", {tool}}, {"tool_choice", {{"type", "required"}}}}),
       {"tool_choice.type", "auto, any"}},
  };
  for (const auto& [body, expected] : cases) expect_refused(body, expected.first, expected.second);
}

ResponseInfo info_for(const std::string& id) {
  ResponseInfo info;
  info.id = id;
  info.model = "m";
  info.chat = true;
  return info;
}

ChoiceText choice(std::string text, std::string finish, std::optional<std::string> stop = {}) {
  ChoiceText c;
  c.text = std::move(text);
  c.finish_reason = std::move(finish);
  c.stop_sequence = std::move(stop);
  return c;
}

TEST(AnthropicMessage, StopReasonsFollowWhatEndedTheOutput) {
  const AnthropicEnding stops{{"END"}, false};
  EXPECT_STREQ(anthropic_stop_reason(choice("a", "stop"), stops), "end_turn");
  EXPECT_STREQ(anthropic_stop_reason(choice("a", "length"), stops), "max_tokens");
  EXPECT_STREQ(anthropic_stop_reason(choice("a", "stop", "END"), stops), "stop_sequence");
  // The template's own end-of-turn text is the end of the turn, not a stop_sequence.
  EXPECT_STREQ(anthropic_stop_reason(choice("a", "stop", "<|im_end|>"), stops), "end_turn");
  ChoiceText called = choice("", "tool_calls");
  called.tool_calls.push_back({"call_abc", "f", R"({"x":1})"});
  EXPECT_STREQ(anthropic_stop_reason(called, stops), "tool_use");
  // A call cut short by max_tokens went back into the text.
  called.finish_reason = "length";
  EXPECT_STREQ(anthropic_stop_reason(called, stops), "max_tokens");
  // max_tokens asked for more than the context held: the context ended it.
  EXPECT_STREQ(anthropic_stop_reason(choice("a", "length"), AnthropicEnding{{}, true}),
               "model_context_window_exceeded");
  EXPECT_STREQ(anthropic_stop_reason(choice("a", "stop"), AnthropicEnding{{}, true}), "end_turn");
}

TEST(AnthropicMessage, RendersTextAndToolUseBlocks) {
  ResponseInfo info = info_for("msg_1");
  ChoiceText c = choice("Let me look.", "tool_calls");
  c.tool_calls.push_back({"call_XYZ", "get_weather", R"({"city":"Oslo"})"});
  // In Anthropic's key order.
  EXPECT_EQ(anthropic_message(info, c, Usage{12, 7, 0}, {}).dump(),
            R"({"id":"msg_1","type":"message","role":"assistant","model":"m",)"
            R"("content":[{"type":"text","text":"Let me look."},)"
            R"({"type":"tool_use","id":"toolu_XYZ","name":"get_weather","input":{"city":"Oslo"}}],)"
            R"("stop_reason":"tool_use","stop_sequence":null,)"
            R"("usage":{"input_tokens":12,"output_tokens":7}})");
  const nlohmann::ordered_json s = anthropic_message(
      info, choice("x", "stop", "END"), Usage{1, 2, 0}, AnthropicEnding{{"END"}, false});
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");
  // Nothing written: no empty text block.
  EXPECT_EQ(anthropic_message(info, choice("", "stop"), Usage{}, {})["content"].dump(), "[]");
}

// SSE text -> (event, data) pairs; each event's name must equal its data's type.
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << sse.substr(at);
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(at, end - at);
    at = end + 2;
    const size_t nl = frame.find('\n');
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    EXPECT_EQ(frame.compare(nl + 1, 6, "data: "), 0) << frame;
    const std::string name = frame.substr(7, nl - 7);
    json data = json::parse(frame.substr(nl + 7));
    EXPECT_EQ(data["type"], name);
    out.emplace_back(name, std::move(data));
  }
  return out;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, json>>& events) {
  std::vector<std::string> names;
  for (const auto& e : events) names.push_back(e.first);
  return names;
}

JobEvent piece(std::string text, std::optional<std::string> finish = {}) {
  JobEvent ev;
  ev.text = std::move(text);
  ev.finish_reason = std::move(finish);
  return ev;
}

TEST(AnthropicStream, TextEventsInOrder) {
  ResponseInfo info = info_for("msg_s");
  AnthropicStream s(info, AnthropicEnding{{"END"}, false}, 9);
  JobEvent last = piece("", "stop");
  last.stop_sequence = "END";
  // One statement each: the operands of + have no order of evaluation.
  std::string sse = s.start();
  sse += s.push(piece(""));
  sse += s.push(piece("Hel"));
  sse += s.push(piece("lo"));
  sse += s.push(last);
  sse += s.finish(Usage{9, 3, 0});
  const auto events = events_of(sse);
  EXPECT_EQ(names_of(events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  const json& start = events[0].second["message"];
  EXPECT_EQ(start["id"], "msg_s");
  EXPECT_EQ(start["content"], json::array());
  EXPECT_EQ(start["usage"]["input_tokens"], 9);
  EXPECT_EQ(events[2].second["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[3].second["delta"], json({{"type", "text_delta"}, {"text", "Hel"}}));
  EXPECT_EQ(events[4].second["index"], 0);
  EXPECT_EQ(events[5].second["index"], 0);
  EXPECT_EQ(events[6].second["delta"],
            json({{"stop_reason", "stop_sequence"}, {"stop_sequence", "END"}}));
  EXPECT_EQ(events[6].second["usage"], json({{"input_tokens", 9}, {"output_tokens", 3}}));
}

TEST(AnthropicMessage, ReasoningIsAThinkingBlockFirst) {
  ChoiceText c = choice("Hi!", "stop");
  c.reasoning = "Greet.";
  EXPECT_EQ(anthropic_message(info_for("msg_r"), c, Usage{1, 2, 0}, {})["content"].dump(),
            R"([{"type":"thinking","thinking":"Greet.","signature":""},{"type":"text","text":"Hi!"}])");
}

TEST(AnthropicStream, ReasoningIsAThinkingBlockBeforeTheText) {
  ResponseInfo info = info_for("msg_k");
  info.answer.reasoning = true;
  info.answer.starts_thinking = true;
  AnthropicStream s(info, {}, 5);
  std::string sse = s.start();
  const std::string out = "Greet them.\n</think>\n\nHello!";
  for (size_t i = 0; i < out.size(); i += 3) sse += s.push(piece(out.substr(i, 3)));
  sse += s.push(piece("", "stop"));
  sse += s.finish(Usage{5, 9, 0});
  std::string thought, text;
  std::vector<std::string> order;
  for (const auto& [name, data] : events_of(sse)) {
    if (name == "content_block_start")
      order.push_back("start " + data["content_block"]["type"].get<std::string>() + " " +
                      data["index"].dump());
    if (name == "content_block_stop") order.push_back("stop " + data["index"].dump());
    if (name != "content_block_delta") continue;
    const json& d = data["delta"];
    if (d["type"] == "thinking_delta") thought += d["thinking"].get<std::string>();
    if (d["type"] == "text_delta") text += d["text"].get<std::string>();
    if (d["type"] == "signature_delta") order.push_back("signature " + d["signature"].dump());
  }
  EXPECT_EQ(thought, "Greet them.");
  EXPECT_EQ(text, "Hello!");
  EXPECT_EQ(order, (std::vector<std::string>{"start thinking 0", "signature \"\"", "stop 0",
                                             "start text 1", "stop 1"}));
}

TEST(AnthropicStream, ToolCallsBecomeToolUseBlocksAfterTheText) {
  ResponseInfo info = info_for("msg_t");
  info.answer.tool_syntax = ToolSyntax::Generic;
  info.answer.tool_names = {"get_weather"};
  AnthropicStream s(info, {}, 5);
  std::string sse = s.start();
  const std::string out =
      "Sure.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}</tool_call>";
  for (size_t i = 0; i < out.size(); i += 7) sse += s.push(piece(out.substr(i, 7)));
  sse += s.push(piece("", "stop"));
  sse += s.finish(Usage{5, 20, 0});
  const auto events = events_of(sse);
  std::string text, partial;
  json tool_start;
  std::vector<int> stops;
  for (const auto& [name, data] : events) {
    if (name == "content_block_delta" && data["delta"]["type"] == "text_delta") {
      EXPECT_EQ(data["index"], 0);
      text += data["delta"]["text"].get<std::string>();
    }
    if (name == "content_block_delta" && data["delta"]["type"] == "input_json_delta") {
      EXPECT_EQ(data["index"], 1);
      partial += data["delta"]["partial_json"].get<std::string>();
    }
    if (name == "content_block_start" && data["index"] == 1) tool_start = data["content_block"];
    if (name == "content_block_stop") stops.push_back(data["index"].get<int>());
  }
  EXPECT_EQ(text, "Sure.");
  EXPECT_EQ(tool_start["type"], "tool_use");
  EXPECT_EQ(tool_start["name"], "get_weather");
  EXPECT_EQ(tool_start["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(tool_start["input"], json::object());
  EXPECT_EQ(json::parse(partial), json({{"city", "Oslo"}}));
  EXPECT_EQ(stops, (std::vector<int>{0, 1}));
  EXPECT_EQ(events[events.size() - 2].second["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(events.back().first, "message_stop");
}

TEST(AnthropicStream, AnErrorEndsTheStreamInAnthropicsShape) {
  AnthropicStream s(info_for("msg_e"), {}, 1);
  std::string sse = s.start();
  sse += s.push(piece("a"));
  sse += s.fail(ApiError(500, "server_error", "the model's output is not usable"));
  const auto events = events_of(sse);
  EXPECT_EQ(events.back().first, "error");
  EXPECT_EQ(events.back().second["error"],
            json({{"type", "api_error"}, {"message", "the model's output is not usable"}}));
}

TEST(AnthropicErrors, TypesFollowTheStatus) {
  EXPECT_STREQ(anthropic_error_type(400), "invalid_request_error");
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(anthropic_error_type(413), "request_too_large");
  EXPECT_STREQ(anthropic_error_type(503), "overloaded_error");
  EXPECT_STREQ(anthropic_error_type(500), "api_error");
  EXPECT_TRUE(is_anthropic_path("/v1/messages"));
  EXPECT_TRUE(is_anthropic_path("/v1/messages/count_tokens"));
  EXPECT_FALSE(is_anthropic_path("/v1/messagesx"));
  EXPECT_FALSE(is_anthropic_path("/v1/chat/completions"));
}

}  // namespace
}  // namespace jitllm::server
