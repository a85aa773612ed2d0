// /v1/responses: the request read into a chat request (messages, tools, text.format, the
// refusals by name, the chat parser's refusals renamed), the response object and its event
// stream (order, sequence numbers, a streamed response ending as the whole one), and the routes
// wired into HttpServer (driven through a socketpair, no model: a valid request gets 503).
#include "server/responses_format.h"
#include "server/responses_request.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "core/log.h"
#include "server/socket_talk.h"
#include "server/http_server.h"

namespace jitllm::server {
namespace {

using ojson = nlohmann::ordered_json;

ResponsesRequest parse(const std::string& body) { return parse_responses_request(ojson::parse(body)); }

// The refusal of `body`: its status and the param it names ("" when it passed).
std::pair<int, std::string> refusal(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    const auto err = e.body()["error"];
    return {e.status(), err["param"].is_string() ? err["param"].get<std::string>() : "(null)"};
  }
  return {200, ""};
}

std::string refusal_message(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return e.what();
  }
  return "";
}

TEST(ResponsesRequest, StringInputAndInstructions) {
  const ResponsesRequest r = parse(R"({"model": "m", "input": "Hello", "instructions": "Be brief.",
                                       "max_output_tokens": 20, "temperature": 0, "top_p": 0.5})");
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[0].content, "Be brief.");
  EXPECT_EQ(r.chat.messages[1].role, "user");
  EXPECT_EQ(r.chat.messages[1].content, "Hello");
  EXPECT_EQ(r.chat.model, "m");
  EXPECT_EQ(r.chat.options.max_tokens, 20);
  EXPECT_EQ(r.chat.options.temperature, 0.0);
  EXPECT_EQ(r.chat.options.top_p, 0.5);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 20);
  EXPECT_EQ(r.echo["store"], false);
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["text"]["format"]["type"], "text");
  EXPECT_EQ(r.message_origin, (std::vector<std::string>{"instructions", "input"}));
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  const ResponsesRequest r = parse(R"({"input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Add "},
                                                      {"type": "input_text", "text": "2 and 3"}]},
      {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
       "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]},
      {"type": "function_call", "call_id": "call_a", "name": "add", "arguments": "{\"a\":2,\"b\":3}"},
      {"type": "function_call", "call_id": "call_b", "name": "add", "arguments": "{\"a\":1,\"b\":1}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "5"},
      {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "2"}]}],
    "stream": true})");
  ASSERT_EQ(r.chat.messages.size(), 5u);
  EXPECT_EQ(r.chat.messages[0].role, "system");  // developer: templates know system
  EXPECT_EQ(r.chat.messages[1].content, "Add 2 and 3");
  const ChatMessage& turn = r.chat.messages[2];
  EXPECT_EQ(turn.role, "assistant");
  EXPECT_EQ(turn.content, "Calling.");
  ASSERT_EQ(turn.raw["tool_calls"].size(), 2u);  // both calls in the assistant's turn
  EXPECT_EQ(turn.raw["tool_calls"][0]["id"], "call_a");
  EXPECT_EQ(turn.raw["tool_calls"][1]["function"]["arguments"], "{\"a\":1,\"b\":1}");
  EXPECT_EQ(r.chat.messages[3].role, "tool");
  EXPECT_EQ(r.chat.messages[3].raw["tool_call_id"], "call_a");
  EXPECT_EQ(r.chat.messages[4].content, "2");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.message_origin,
            (std::vector<std::string>{"input[0]", "input[1]", "input[2]", "input[5]", "input[6]"}));
}

TEST(ResponsesRequest, ReasoningItemsAndEffort) {
  // An earlier response's output (reasoning, then a message; reasoning, then a call) comes back
  // as assistant turns holding reasoning_content.
  const ResponsesRequest r = parse(R"({"input": [
      {"role": "user", "content": "x"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "status": "completed",
       "content": [{"type": "reasoning_text", "text": "Think "}, {"type": "reasoning_text", "text": "more."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
      {"role": "user", "content": "y"},
      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Call."}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
    "reasoning": {"effort": "high", "summary": null}})");
  ASSERT_EQ(r.chat.messages.size(), 5u);
  EXPECT_EQ(r.chat.messages[1].raw["reasoning_content"], "Think more.");
  EXPECT_EQ(r.chat.messages[1].content, "Hi.");
  EXPECT_EQ(r.chat.messages[3].raw["reasoning_content"], "Call.");
  EXPECT_EQ(r.chat.messages[3].raw["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.chat.reasoning_effort, "high");
  EXPECT_EQ(r.echo["reasoning"], (ojson{{"effort", "high"}, {"summary", nullptr}}));
  EXPECT_FALSE(r.chat.reasoning_format.has_value()) << "the server's reasoning format applies";
}

TEST(ResponsesRequest, ACallWithoutTextIsItsOwnTurn) {
  const ResponsesRequest r = parse(R"({"input": [
      {"role": "user", "content": "x"},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "ok"},
      {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"}]})");
  ASSERT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[1].role, "assistant");
  EXPECT_EQ(r.chat.messages[1].raw["tool_calls"].size(), 1u);
  EXPECT_EQ(r.chat.messages[3].raw["tool_calls"][0]["id"], "c2");
}

TEST(ResponsesRequest, LogprobsAreIncludedOnRequest) {
  EXPECT_FALSE(parse(R"({"input": "x"})").chat.options.logprobs);
  ResponsesRequest r = parse(R"({"input": "x", "include": ["message.output_text.logprobs"]})");
  EXPECT_TRUE(r.chat.options.logprobs);
  EXPECT_EQ(r.chat.options.top_logprobs, 0);
  r = parse(R"({"input": "x", "top_logprobs": 3})");
  EXPECT_TRUE(r.chat.options.logprobs);
  EXPECT_EQ(r.chat.options.top_logprobs, 3);
  EXPECT_EQ(r.echo["top_logprobs"], 3);
  EXPECT_EQ(refusal(R"({"input": "x", "include": "message.output_text.logprobs"})").second, "include");
}

TEST(ResponsesRequest, TruncationDropsWholeOldestTurns) {
  const ResponsesRequest r = parse(R"({"instructions": "S", "truncation": "auto", "input": [
      {"role": "system", "content": "S2"},
      {"role": "user", "content": "u1"},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c", "output": "r"},
      {"role": "assistant", "content": "a1"},
      {"role": "user", "content": "u2"},
      {"role": "assistant", "content": "a2"},
      {"role": "user", "content": "u3"}]})");
  EXPECT_TRUE(r.truncate);
  EXPECT_EQ(r.echo["truncation"], "auto");
  EXPECT_FALSE(parse(R"({"input": "x"})").truncate);
  // [S, S2, u1, call, result, a1, u2, a2, u3]: the conversation may start at u2 or u3.
  const std::vector<size_t> starts = truncation_starts(r.chat.messages);
  EXPECT_EQ(starts, (std::vector<size_t>{6, 8}));
  const ResponsesRequest t = truncated(r, starts[0]);
  std::vector<std::string> kept;
  for (const ChatMessage& m : t.chat.messages) kept.push_back(m.content);
  EXPECT_EQ(kept, (std::vector<std::string>{"S", "S2", "u2", "a2", "u3"}));
  EXPECT_EQ(t.message_origin,
            (std::vector<std::string>{"instructions", "input[0]", "input[5]", "input[6]", "input[7]"}));
  EXPECT_EQ(truncated(r, starts[1]).chat.messages.size(), 3u);
  // One user turn: nothing can go.
  EXPECT_TRUE(truncation_starts(parse(R"({"input": "x", "instructions": "S"})").chat.messages).empty());
}

TEST(ResponsesRequest, FlatFunctionToolsAndToolChoice) {
  const ResponsesRequest r = parse(R"({"input": "x", "parallel_tool_calls": false,
      "tools": [{"type": "function", "name": "add", "description": "Adds.",
                 "parameters": {"type": "object", "properties": {"b": {"type": "integer"},
                                                                 "a": {"type": "integer"}}}},
                {"type": "function", "name": "neg", "strict": false}],
      "tool_choice": {"type": "function", "name": "add"}})");
  const ToolRequest& t = r.chat.tool_request;
  ASSERT_EQ(t.tools.size(), 2u);
  EXPECT_EQ(t.tools[0].name, "add");
  EXPECT_EQ(t.tools[0].description, "Adds.");
  EXPECT_EQ(t.tools[0].parameters["properties"].begin().key(), "b");  // the order as written
  EXPECT_EQ(t.choice, ToolChoice::Named);
  EXPECT_EQ(t.named, "add");
  EXPECT_FALSE(t.parallel);
  EXPECT_EQ(r.echo["tools"][0]["strict"], true);  // calls are held to the schema
  EXPECT_EQ(r.echo["tools"][1]["strict"], false);
  EXPECT_EQ(r.echo["tools"][1]["parameters"], nullptr);
  EXPECT_EQ(r.echo["tool_choice"]["name"], "add");
  EXPECT_EQ(parse(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
                      "tool_choice": "required"})").chat.tool_request.choice, ToolChoice::Required);
}

TEST(ResponsesRequest, TextFormatIsTheStructuredOutputEngine) {
  EXPECT_EQ(parse(R"({"input": "x"})").chat.options.grammar, nullptr);
  EXPECT_EQ(parse(R"({"input": "x", "text": {"format": {"type": "text"}}})").chat.options.grammar, nullptr);
  EXPECT_NE(parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})").chat.options.grammar,
            nullptr);
  const ResponsesRequest r = parse(R"({"input": "x", "text": {"format": {"type": "json_schema",
      "name": "p", "strict": true, "schema": {"type": "object", "properties": {"n": {"type": "integer"}},
      "required": ["n"], "additionalProperties": false}}}})");
  EXPECT_NE(r.chat.options.grammar, nullptr);
  EXPECT_EQ(r.echo["text"]["format"]["name"], "p");
}

TEST(ResponsesRequest, UnhonouredFieldsAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "x", "store": true})", "store"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "conversation": "conv_1"})", "conversation"},
      {R"({"input": "x", "prompt": {"id": "pmpt_1"}})", "prompt"},
      {R"({"input": "x", "include": ["file_search_call.results"]})", "include[0]"},
      {R"({"input": "x", "reasoning": {"summary": "auto"}})", "reasoning.summary"},
      {R"({"input": "x", "reasoning": {"effort": "low", "budget": 3}})", "reasoning.budget"},
      {R"({"input": "x", "reasoning": "low"})", "reasoning"},
      {R"({"input": "x", "reasoning": {"effort": "max"}})", "reasoning.effort"},
      {R"({"input": "x", "top_logprobs": 21})", "top_logprobs"},
      {R"({"input": "x", "max_tool_calls": 1})", "max_tool_calls"},
      {R"({"input": "x", "service_tier": "flex"})", "service_tier"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "file_search"}]})",
       "tools[1].type"},
      {R"({"input": "x", "tool_choice": {"type": "web_search_preview"}})", "tool_choice"},
      {R"({"input": "x", "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}})",
       "tool_choice"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})",
       "input[0].content[0].type"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})",
       "input[0].content[0].type"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type"},
      {R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "x"}]})",
       "input[0].encrypted_content"},
      {R"({"input": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]}]})",
       "input[0].summary"},
      {R"({"input": [{"type": "reasoning", "content": [{"type": "text", "text": "s"}]}]})",
       "input[0].content[0].type"},
      {R"({"input": "x", "text": {"verbosity": "low"}})", "text.verbosity"},
      {R"({"input": "x", "n": 2})", "n"},
      {R"({"input": "x", "max_tokens": 5})", "max_tokens"},
      {R"({"input": "x", "messages": []})", "messages"},
      {R"({"input": "x", "stream_options": {"include_usage": true}})", "stream_options.include_usage"},
  };
  for (const auto& [body, param] : cases) {
    const auto [status, named] = refusal(body);
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(named, param) << body << ": " << refusal_message(body);
  }
  // Their no-op values pass.
  for (const char* body : {R"({"input": "x", "store": false, "background": false, "reasoning": null,
                               "truncation": "disabled", "include": [], "service_tier": "auto",
                               "previous_response_id": null, "top_logprobs": 0,
                               "text": {"verbosity": "medium"},
                               "stream_options": {"include_obfuscation": false},
                               "metadata": {"k": "v"}, "user": "u", "safety_identifier": "s",
                               "prompt_cache_key": "p"})"})
    EXPECT_EQ(refusal(body).first, 200) << refusal_message(body);
}

// Keys below the top level are held to the same rule: refused by name, never dropped; the keys an
// earlier response's output items carry (id, status, annotations, logprobs) come back fine.
TEST(ResponsesRequest, UnknownNestedKeysAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {}, "bogus": 1}]})",
       "tools[0].bogus"},
      {R"({"input": [{"role": "user", "content": "hi", "bogus": 2}]})", "input[0].bogus"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi", "bogus": 3}]}]})",
       "input[0].content[0].bogus"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "x": 1}]})",
       "input[0].x"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {}, "bogus": 1}}})",
       "text.format.bogus"},
      {R"({"input": "x", "text": {"format": {"type": "json_object", "schema": {}}}})", "text.format.schema"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "f", "x": 1}})",
       "tool_choice.x"},
  };
  for (const auto& [body, param] : cases) {
    const auto [status, named] = refusal(body);
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(named, param) << body << ": " << refusal_message(body);
  }
  const char* echoed = R"({"input": [
      {"role": "user", "content": "hi"},
      {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}]},
      {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "call_1", "name": "f",
       "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]})";
  EXPECT_EQ(refusal(echoed).first, 200) << refusal_message(echoed);
}

TEST(ResponsesRequest, MalformedInputNamesTheItem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": 3})", "input"},
      {R"({"input": ["x"]})", "input[0]"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"role": "user"}]})", "input[0].content"},
      {R"({"input": [{"role": "user", "content": 7}]})", "input[0].content"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})", "input[0].content[0].text"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]})", "input[0].arguments"},
      {R"({"input": [{"role": "user", "content": "x"},
                     {"type": "function_call_output", "call_id": "nope", "output": "1"}]})",
       "input[1].call_id"},
      {R"({"input": "x", "instructions": 5})", "instructions"},
      {R"({"input": "x", "truncation": "middle"})", "truncation"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}})", "text.format.schema"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n",
                                             "schema": {"type": "string", "format": "uri"}}}})",
       "text.format.schema"},
  };
  for (const auto& [body, param] : cases) {
    const auto [status, named] = refusal(body);
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(named, param) << body << ": " << refusal_message(body);
  }
}

TEST(ResponsesRequest, ChatParserRefusalsCarryTheResponsesNames) {
  EXPECT_EQ(refusal(R"({"input": "x", "max_output_tokens": -1})").second, "max_output_tokens");
  const std::string m = refusal_message(R"({"input": "x", "max_output_tokens": "many"})");
  EXPECT_NE(m.find("'max_output_tokens'"), std::string::npos) << m;
  EXPECT_EQ(m.find("max_completion_tokens"), std::string::npos) << m;
  EXPECT_EQ(refusal(R"({"input": "x", "temperature": 3})").second, "temperature");
  EXPECT_EQ(refusal(R"({"input": "x", "tools": [{"type": "function", "name": "bad name"}]})").second,
            "tools[0].name");
  EXPECT_EQ(refusal(R"({"input": "x", "tools": [{"type": "function", "name": "f",
                                                  "parameters": 5}]})").second,
            "tools[0].parameters");
  EXPECT_EQ(refusal(R"({"input": "x", "tool_choice": "sometimes"})").second, "tool_choice");
  EXPECT_EQ(refusal(R"({"input": "x", "tool_choice": {"type": "function", "name": "g"},
                        "tools": [{"type": "function", "name": "f"}]})").second, "tool_choice");
  EXPECT_EQ(refusal(R"({"input": "x", "stream": "yes"})").second, "stream");
}

TEST(ResponsesRequest, JobRefusalsAreRenamed) {
  const std::vector<std::string> origin = {"instructions", "input[0]", "input[2]"};
  auto renamed = [&](const std::string& param, const std::string& message) {
    const ApiError e = responses_error(ApiError(400, "invalid_request_error", message, param, "c"), origin);
    return std::pair{e.body()["error"]["param"].get<std::string>(), std::string(e.what())};
  };
  EXPECT_EQ(renamed("messages", "the prompt is too long").first, "input");
  EXPECT_EQ(renamed("messages[2].content", "x").first, "input[2].content");
  EXPECT_EQ(renamed("messages[0].content", "x").first, "instructions");
  EXPECT_EQ(renamed("max_tokens", "the prompt has 9 tokens and max_tokens asks for 600 more"),
            (std::pair<std::string, std::string>{
                "max_output_tokens", "the prompt has 9 tokens and max_output_tokens asks for 600 more"}));
  EXPECT_EQ(renamed("tools", "a grammar or response_format together with tools").second,
            "a grammar or text.format together with tools");
  const ApiError plain = responses_error(ApiError(400, "invalid_request_error", "m", "seed"), origin);
  EXPECT_EQ(plain.body()["error"]["param"], "seed");
}

// The events of an SSE text: (type, data).
std::vector<std::pair<std::string, ojson>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, ojson>> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << sse.substr(at);
    if (end == std::string::npos) break;
    const std::string block = sse.substr(at, end - at);
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    out.emplace_back(block.substr(7, nl - 7), ojson::parse(block.substr(nl + 7)));
    at = end + 2;
  }
  return out;
}

std::vector<std::string> types_of(const std::vector<std::pair<std::string, ojson>>& events) {
  std::vector<std::string> types;
  for (const auto& [type, data] : events) {
    EXPECT_EQ(data["type"], type);
    types.push_back(type);
  }
  return types;
}

ResponseWriter writer() { return ResponseWriter("resp_1", 1700000000, "m", {{"store", false}}); }

TEST(ResponseWriter, TextStreamsInOrderAndEndsAsTheWholeResponse) {
  ResponseWriter w = writer();
  std::string sse = w.begin();
  sse += w.text("Hel");
  sse += w.text("");
  sse += w.text("lo");
  sse += w.finish("stop", Usage{7, 2, 3});
  const auto events = events_of(sse);
  EXPECT_EQ(types_of(events),
            (std::vector<std::string>{"response.created", "response.in_progress",
                                      "response.output_item.added", "response.content_part.added",
                                      "response.output_text.delta", "response.output_text.delta",
                                      "response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].second["sequence_number"], i);
  EXPECT_EQ(events[0].second["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].second["response"]["output"].size(), 0u);
  EXPECT_EQ(events[4].second["delta"], "Hel");
  EXPECT_EQ(events[6].second["text"], "Hello");
  const ojson final = events.back().second["response"];
  EXPECT_EQ(final, w.response());
  EXPECT_EQ(final["status"], "completed");
  EXPECT_EQ(final["incomplete_details"], nullptr);
  EXPECT_EQ(final["object"], "response");
  EXPECT_EQ(final["store"], false);
  ASSERT_EQ(final["output"].size(), 1u);
  const ojson& msg = final["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["content"][0], (ojson{{"type", "output_text"}, {"annotations", ojson::array()},
                                      {"logprobs", ojson::array()}, {"text", "Hello"}}));
  EXPECT_EQ(events[2].second["item"]["id"], msg["id"]);
  EXPECT_EQ(events[4].second["item_id"], msg["id"]);
  EXPECT_EQ(final["usage"], (ojson{{"input_tokens", 7},
                                   {"input_tokens_details", {{"cached_tokens", 3}}},
                                   {"output_tokens", 2},
                                   {"output_tokens_details", {{"reasoning_tokens", 0}}},
                                   {"total_tokens", 9}}));

  // The same output written at once (a whole response) is the same object.
  ResponseWriter whole = writer();
  whole.text("Hello");
  whole.finish("stop", Usage{7, 2, 3});
  ojson a = whole.response(), b = final;
  a["output"][0].erase("id");
  b["output"][0].erase("id");
  EXPECT_EQ(a, b);
}

TEST(ResponseWriter, LengthIsIncomplete) {
  ResponseWriter w = writer();
  w.begin();
  w.text("abc");
  const auto events = events_of(w.finish("length", Usage{1, 3, 0}));
  EXPECT_EQ(events.back().first, "response.incomplete");
  const ojson r = w.response();
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], (ojson{{"reason", "max_output_tokens"}}));
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
}

TEST(ResponseWriter, NoOutputIsOneEmptyMessage) {
  ResponseWriter w = writer();
  w.finish("stop", Usage{});
  ASSERT_EQ(w.response()["output"].size(), 1u);
  EXPECT_EQ(w.response()["output"][0]["content"][0]["text"], "");
}

TEST(ResponseWriter, ToolCallsAreFunctionCallItems) {
  ResponseWriter w = writer();
  std::string sse = w.begin();
  sse += w.text("Let me add.");
  sse += w.calls({{"call_x", "add", R"({"a":2,"b":3})"}, {"call_y", "neg", "{}"}});
  sse += w.finish("tool_calls", Usage{5, 9, 0});
  const auto events = events_of(sse);
  EXPECT_EQ(types_of(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.content_part.added", "response.output_text.delta",
                "response.output_text.done", "response.content_part.done",
                "response.output_item.done", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[8].second["output_index"], 1);
  EXPECT_EQ(events[8].second["item"]["arguments"], "");
  EXPECT_EQ(events[9].second["delta"], R"({"a":2,"b":3})");
  EXPECT_EQ(events[10].second["arguments"], R"({"a":2,"b":3})");
  EXPECT_EQ(events[12].second["output_index"], 2);
  const ojson r = w.response();
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 3u);
  const ojson& call = r["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["call_id"], "call_x");
  EXPECT_EQ(call["name"], "add");
  EXPECT_EQ(call["arguments"], R"({"a":2,"b":3})");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(events[9].second["item_id"], call["id"]);
}

TEST(ResponseWriter, ReasoningIsAReasoningItemBeforeTheMessage) {
  ResponseWriter w = writer();
  std::string sse = w.begin();
  sse += w.reasoning("Two and ");
  sse += w.reasoning("two.");
  sse += w.text("4");
  sse += w.finish("stop", Usage{5, 9, 0}, 3);
  const auto events = events_of(sse);
  EXPECT_EQ(types_of(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.content_part.added", "response.reasoning_text.delta",
                "response.reasoning_text.delta", "response.reasoning_text.done",
                "response.content_part.done", "response.output_item.done",
                "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[3].second["part"], (ojson{{"type", "reasoning_text"}, {"text", ""}}));
  EXPECT_EQ(events[6].second["text"], "Two and two.");
  const ojson r = w.response();
  ASSERT_EQ(r["output"].size(), 2u);
  const ojson& item = r["output"][0];
  EXPECT_EQ(item["type"], "reasoning");
  EXPECT_EQ(item["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(item["summary"], ojson::array());
  EXPECT_EQ(item["content"], (ojson::array({{{"type", "reasoning_text"}, {"text", "Two and two."}}})));
  EXPECT_EQ(events[4].second["item_id"], item["id"]);
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "4");
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 3);

  // Cut inside the reasoning: the reasoning item alone, incomplete.
  ResponseWriter cut = writer();
  cut.reasoning("Two and");
  cut.finish("length", Usage{5, 2, 0}, 2);
  ASSERT_EQ(cut.response()["output"].size(), 1u);
  EXPECT_EQ(cut.response()["output"][0]["status"], "incomplete");
  EXPECT_EQ(cut.response()["status"], "incomplete");
  // The reasoning then a call: the call follows the closed reasoning item.
  ResponseWriter call = writer();
  call.reasoning("Need f.");
  call.calls({{"call_1", "f", "{}"}});
  call.finish("tool_calls", Usage{5, 6, 0});
  const ojson out = call.response()["output"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[1]["type"], "function_call");
}

TEST(ResponseWriter, DeltasAreWholeCharacters) {
  ResponseWriter w = writer();
  w.begin();
  const std::string euro = "\xE2\x82\xAC";  // one character, three bytes
  std::string sse = w.text(std::string("a") + euro[0]);
  sse += w.text(euro.substr(1, 1));
  sse += w.text(euro.substr(2) + "b");
  sse += w.finish("stop", Usage{});
  std::string joined;
  for (const auto& [type, data] : events_of(sse))
    if (type == "response.output_text.delta") joined += data["delta"].get<std::string>();
  EXPECT_EQ(joined, "a" + euro + "b");
  EXPECT_EQ(w.response()["output"][0]["content"][0]["text"], "a" + euro + "b");
}

TEST(ResponseWriter, LogprobsGoWithTheirDeltas) {
  ResponseWriter w = writer();
  w.begin();
  auto lp = [](const std::string& token) {
    return ojson::array({{{"token", token}, {"logprob", -0.5}, {"top_logprobs", ojson::array()}}});
  };
  std::string sse = w.text("a", lp("a"));
  sse += w.text("\xE2", lp("1"));  // half a character: its token waits with it
  sse += w.text("\x82\xAC", lp("2"));
  sse += w.finish("stop", Usage{});
  std::vector<ojson> delta_logprobs;
  ojson done;
  for (const auto& [type, data] : events_of(sse)) {
    if (type == "response.output_text.delta") delta_logprobs.push_back(data["logprobs"]);
    if (type == "response.output_text.done") done = data["logprobs"];
  }
  ASSERT_EQ(delta_logprobs.size(), 2u);
  EXPECT_EQ(delta_logprobs[0], lp("a"));
  EXPECT_EQ(delta_logprobs[1].size(), 2u);
  EXPECT_EQ(done.size(), 3u);
  EXPECT_EQ(w.response()["output"][0]["content"][0]["logprobs"], done);
}

TEST(ResponseWriter, AFailureIsAnErrorEventThenFailed) {
  ResponseWriter w = writer();
  w.begin();
  w.text("partial");
  const auto events = events_of(
      w.fail(ApiError(500, "server_error", "the model's output is not usable", "", "model_output_invalid")));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].first, "error");
  EXPECT_EQ(events[events.size() - 2].second["code"], "model_output_invalid");
  EXPECT_EQ(events.back().first, "response.failed");
  const ojson r = events.back().second["response"];
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"]["code"], "model_output_invalid");
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
}

std::string request(const std::string& method, const std::string& path, const std::string& body = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
         (body.empty() ? "" : "Content-Type: application/json\r\n") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ResponsesRoutes, WiredIntoTheServer) {
  set_log_threshold(LogLevel::Error);
  HttpServer server(ServerOptions{}, {});
  std::string out = talk_on_socketpair(server, request("POST", "/v1/responses",
                                         R"({"input": "x", "previous_response_id": "resp_1"})"));
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_NE(out.find(R"("param":"previous_response_id")"), std::string::npos) << out;
  // A valid request reaches the model lookup: nothing is loaded before run().
  out = talk_on_socketpair(server, request("POST", "/v1/responses", R"({"input": "x"})"));
  EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  for (const auto& [method, path] : {std::pair{"GET", "/v1/responses/resp_abc"},
                                     std::pair{"DELETE", "/v1/responses/resp_abc"},
                                     std::pair{"GET", "/v1/responses/resp_abc/input_items"},
                                     std::pair{"POST", "/v1/responses/resp_abc/cancel"}}) {
    out = talk_on_socketpair(server, request(method, path));
    EXPECT_EQ(out.rfind("HTTP/1.1 404", 0), 0u) << method << " " << path << ": " << out;
    EXPECT_NE(out.find("resp_abc"), std::string::npos) << out;
    EXPECT_NE(out.find(R"("type":"invalid_request_error")"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace jitllm::server
