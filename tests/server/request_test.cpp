// Request parsing: every option read, nulls mean unset, every bad value refused naming its
// parameter, malformed JSON named by byte offset.
#include "server/request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace jitllm::server {
namespace {

using json = nlohmann::json;

// Expects parsing `body` to fail with status 400 naming `param` and containing `text`.
template <typename Parse>
void expect_rejected(Parse parse, const std::string& body, const std::string& param,
                     const std::string& text) {
  try {
    // The HTTP path: parse_json_body then the request parser.
    parse(parse_json_body(body));
    FAIL() << "accepted: " << body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    const json b = e.body();
    EXPECT_EQ(b["error"]["type"], "invalid_request_error");
    if (!param.empty()) {
      EXPECT_EQ(b["error"]["param"], param) << body;
    }
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos)
        << "message '" << e.what() << "' lacks '" << text << "'";
  }
}

TEST(CompletionRequest, ParsesEveryOption) {
  const auto r = parse_completion_request(json::parse(R"({
    "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
    "top_k": 40, "min_p": 0.05, "seed": 42, "stop": ["\n", "END"], "presence_penalty": 0.1,
    "frequency_penalty": -0.2, "repeat_penalty": 1.1, "logit_bias": {"13": -100, "7": 2.5},
    "logprobs": 3, "n": 2, "stream": true, "stream_options": {"include_usage": true},
    "ignore_eos": true})"));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(*r.prompt_text, "Hello");
  EXPECT_EQ(r.options.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.options.temperature, 0.5);
  EXPECT_EQ(r.options.top_k, 40);
  EXPECT_EQ(*r.options.seed, 42u);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_FLOAT_EQ(r.options.logit_bias.at(13), -100.f);
  EXPECT_FLOAT_EQ(r.options.logit_bias.at(7), 2.5f);
  EXPECT_TRUE(r.options.logprobs);
  EXPECT_EQ(r.options.top_logprobs, 3);
  EXPECT_EQ(r.options.n, 2);
  EXPECT_TRUE(r.options.stream && r.options.include_usage && r.options.ignore_eos);
  EXPECT_TRUE(parse_completion_request(json::parse(R"({"prompt": "Hello", "echo": true})")).echo);
}

TEST(CompletionRequest, DefaultsAndNullsMeanUnset) {
  const auto r = parse_completion_request(
      json::parse(R"({"prompt": "x", "temperature": null, "max_tokens": null})"));
  EXPECT_EQ(r.options.max_tokens, -1);
  EXPECT_DOUBLE_EQ(r.options.temperature, 1.0);
  EXPECT_FALSE(r.options.seed.has_value());
  EXPECT_FALSE(r.options.stream);
}

TEST(CompletionRequest, TokenIdPrompt) {
  const auto r = parse_completion_request(json::parse(R"({"prompt": [1, 450, 439]})"));
  ASSERT_TRUE(r.prompt_ids.has_value());
  EXPECT_EQ(*r.prompt_ids, (std::vector<int32_t>{1, 450, 439}));
}

TEST(CompletionRequest, RejectsBadValues) {
  auto p = [](const json& b) { return parse_completion_request(b); };
  expect_rejected(p, R"({})", "prompt", "required");
  expect_rejected(p, R"({"prompt": 5})", "prompt", "must be a string");
  expect_rejected(p, R"({"prompt": ["a", "b"]})", "prompt", "one request per prompt");
  expect_rejected(p, R"({"prompt": [1, -2]})", "prompt", "non-negative");
  expect_rejected(p, R"({"prompt": "x", "max_tokens": -1})", "max_tokens", "between");
  expect_rejected(p, R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "an integer");
  expect_rejected(p, R"({"prompt": "x", "max_tokens": "10"})", "max_tokens", "got string");
  expect_rejected(p, R"({"prompt": "x", "temperature": -0.1})", "temperature", "between");
  expect_rejected(p, R"({"prompt": "x", "temperature": 1e400})", "", "");
  expect_rejected(p, R"({"prompt": "x", "top_p": 1.5})", "top_p", "between");
  expect_rejected(p, R"({"prompt": "x", "stop": ["a","b","c","d","e"]})", "stop", "at most 4");
  expect_rejected(p, R"({"prompt": "x", "stop": [""]})", "stop", "empty");
  expect_rejected(p, R"({"prompt": "x", "stop": 3})", "stop", "a string or an array");
  expect_rejected(p, R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias", "token ids");
  expect_rejected(p, R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias", "-100");
  // Only digits are a token id: stoll would have read " 5" and "+5" as 5.
  expect_rejected(p, R"({"prompt": "x", "logit_bias": {" 5": 1}})", "logit_bias", "token ids");
  expect_rejected(p, R"({"prompt": "x", "logit_bias": {"+5": 1}})", "logit_bias", "token ids");
  expect_rejected(p, R"({"prompt": "x", "logit_bias": {"5 ": 1}})", "logit_bias", "token ids");
  expect_rejected(p, R"({"prompt": "x", "logit_bias": {"": 1}})", "logit_bias", "token ids");
  expect_rejected(p, R"({"prompt": "x", "repeat_penalty": 0})", "repeat_penalty", "greater than 0");
  expect_rejected(p, R"({"prompt": "x", "n": 0})", "n", "between");
  expect_rejected(p, R"({"prompt": "x", "stream": "yes"})", "stream", "a boolean");
  expect_rejected(p, R"([1, 2])", "", "JSON object");
}

// What the server does not do is refused by name, never answered 200 without it; values that
// ask for nothing pass. n_predict (llama-server's max_tokens) is honoured.
TEST(CompletionRequest, UnhonouredFieldsAreRefusedByName) {
  auto p = [](const json& b) { return parse_completion_request(b); };
  for (const char* f : {R"("suffix": "end")", R"("best_of": 3)", R"("top_logprobs": 2)",
                        R"("n_probs": 3)", R"("mirostat": 2)", R"("samplers": ["top_k"])",
                        R"("dry_multiplier": 0.8)", R"("max_completion_tokens": 5)",
                        R"("messages": [])", R"("store": true)", R"("xtc_probability": 0.5)"}) {
    const std::string body = std::string(R"({"prompt": "x", )") + f + "}";
    const std::string name = json::parse("{" + std::string(f) + "}").begin().key();
    expect_rejected(p, body, name, "not supported by this server");
  }
  for (const char* f : {R"("suffix": "")", R"("best_of": 1)", R"("mirostat": 0)", R"("store": false)",
                        R"("n_probs": 0)", R"("suffix": null)"})
    EXPECT_NO_THROW(p(parse_json_body(std::string(R"({"prompt": "x", )") + f + "}"))) << f;
  EXPECT_EQ(p(parse_json_body(R"({"prompt": "x", "n_predict": 3})")).options.max_tokens, 3);
  EXPECT_EQ(p(parse_json_body(R"({"prompt": "x", "n_predict": -1})")).options.max_tokens, -1);
  expect_rejected(p, R"({"prompt": "x", "n_predict": 3, "max_tokens": 3})", "n_predict", "not both");
  expect_rejected(p, R"({"prompt": "x", "echo": true, "logprobs": 2})", "echo", "not supported");
  for (const char* f : {R"("t_max_predict_ms": 500)", R"("n_keep": 8)", R"("min_keep": 2)",
                        R"("id_slot": 1)", R"("grammar_lazy": true)", R"("cache_prompt": false)"}) {
    const std::string name = json::parse("{" + std::string(f) + "}").begin().key();
    expect_rejected(p, std::string(R"({"prompt": "x", )") + f + "}", name, "not supported by this server");
  }
  EXPECT_NO_THROW(p(parse_json_body(R"({"prompt": "x", "cache_prompt": true, "id_slot": -1, "n_keep": 0})")));
  EXPECT_EQ(p(parse_json_body(R"({"prompt": "x", "penalty_last_n": 7})")).options.repeat_last_n, 7);
  expect_rejected(p, R"({"prompt": "x", "penalty_last_n": 7, "repeat_last_n": 7})", "penalty_last_n", "not both");
}

TEST(ChatRequest, UnhonouredFieldsAreRefusedByName) {
  auto p = [](const json& b) { return parse_chat_request(b); };
  const std::string head = R"({"messages": [{"role": "user", "content": "hi"}], )";
  for (const char* f : {R"("echo": true)", R"("modalities": ["text", "audio"])",
                        R"("audio": {"voice": "alloy"})",
                        R"("prediction": {"type": "content", "content": "x"})"}) {
    const std::string name = json::parse("{" + std::string(f) + "}").begin().key();
    expect_rejected(p, head + f + "}", name, "not supported by this server");
  }
  EXPECT_NO_THROW(p(parse_json_body(head + R"("modalities": ["text"], "echo": false})")));
  expect_rejected(p, head + R"("max_tokens": 5, "max_completion_tokens": 9})", "max_completion_tokens",
                  "not both");
  EXPECT_EQ(p(parse_json_body(head + R"("max_completion_tokens": 9})")).options.max_tokens, 9);
  expect_rejected(p, R"({"messages": [{"role": "user", "content": "hi", "name": 5}]})",
                  "messages[0].name", "a string");
}

TEST(ChatRequest, ParsesMessagesAndContentParts) {
  const auto r = parse_chat_request(json::parse(R"({
    "model": "m", "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 2,
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                              {"type": "text", "text": "there"}]}]})"));
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[1].raw["content"], "Hi there");
  EXPECT_EQ(r.options.max_tokens, 9);
  EXPECT_EQ(r.options.top_logprobs, 2);
}

TEST(ChatRequest, RejectsBadMessages) {
  auto p = [](const json& b) { return parse_chat_request(b); };
  expect_rejected(p, R"({})", "messages", "required");
  expect_rejected(p, R"({"messages": []})", "messages", "empty");
  expect_rejected(p, R"({"messages": "hi"})", "messages", "an array");
  expect_rejected(p, R"({"messages": [{"content": "x"}]})", "messages[0].role", "role");
  expect_rejected(p, R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role",
                  "unknown role");
  expect_rejected(p, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                  "messages[0].content", "not supported");
  expect_rejected(p, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})",
                  "top_logprobs", "needs 'logprobs'");
  expect_rejected(p, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 21})",
                  "top_logprobs", "between");
}

// Specials in message content stay text unless the client opts in for its raw prompt.
TEST(ChatRequest, ParseSpecialInContentIsAnOptInBoolean) {
  const std::string messages = R"("messages": [{"role": "user", "content": "<|im_end|>"}])";
  EXPECT_FALSE(parse_chat_request(json::parse("{" + messages + "}")).parse_special_in_content);
  EXPECT_TRUE(parse_chat_request(json::parse("{" + messages + R"(, "parse_special_in_content": true})"))
                  .parse_special_in_content);
  EXPECT_FALSE(parse_chat_request(json::parse("{" + messages + R"(, "parse_special_in_content": null})"))
                   .parse_special_in_content);
  auto p = [](const json& b) { return parse_chat_request(b); };
  expect_rejected(p, "{" + messages + R"(, "parse_special_in_content": "yes"})",
                  "parse_special_in_content", "a boolean");
  expect_rejected(p, "{" + messages + R"(, "parse_special_in_content": 1})",
                  "parse_special_in_content", "a boolean");
}

TEST(JsonBody, MalformedJsonNamesTheByte) {
  try {
    parse_json_body("{\"prompt\": \"x\",,}");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("not valid JSON (byte 15)"), std::string::npos)
        << e.what();
  }
}

TEST(JsonBody, NestingPastTheLimitIsRefusedBeforeAnythingRecurses) {
  // 70,000 levels in an extra field of a chat message: the shape that overflowed a thread's
  // stack in dump(). Refused by the scan, whatever the route.
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  const std::string body = R"({"messages": [{"role": "user", "content": "hi", "x": )" + deep + "}]}";
  try {
    parse_json_body(body);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("more than 128 levels"), std::string::npos) << e.what();
  }
  // Exactly at the limit is fine; brackets inside strings do not count.
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parse_json_body(at_limit));
  EXPECT_EQ(json_depth_exceeded_at(at_limit, kMaxJsonDepth), std::string::npos);
  EXPECT_EQ(json_depth_exceeded_at("[[[", 2), 2u);
  const std::string in_string = "{\"a\": \"" + std::string(1000, '[') + "\\\"[\"}";
  EXPECT_NO_THROW(parse_json_body(in_string)) << in_string;
}

TEST(ChatRequest, CarriesTheToolRequest) {
  auto body = [](const char* choice) {
    return nlohmann::json::parse(std::string(R"({"messages":[{"role":"user","content":"x"}],
        "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":)") +
                                 choice + "}");
  };
  EXPECT_EQ(parse_chat_request(body(R"("auto")")).tool_request.choice, ToolChoice::Auto);
  EXPECT_EQ(parse_chat_request(body(R"("none")")).tool_request.choice, ToolChoice::None);
  EXPECT_EQ(parse_chat_request(body(R"("required")")).tool_request.choice, ToolChoice::Required);
  const ChatRequest named = parse_chat_request(body(R"({"type":"function","function":{"name":"f"}})"));
  EXPECT_EQ(named.tool_request.choice, ToolChoice::Named);
  EXPECT_EQ(named.tool_request.named, "f");
  EXPECT_EQ(named.tools.size(), 1u);  // the definitions as sent, for the template
  for (const char* legacy : {"functions", "function_call"}) {
    nlohmann::json b = body(R"("auto")");
    b[legacy] = nlohmann::json::array();
    try {
      parse_chat_request(b);
      ADD_FAILURE() << "accepted " << legacy;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.body()["error"]["param"], legacy);
    }
  }
  for (const char* refused : {R"({"type":"function","function":{"name":"g"}})", "1", R"("sometimes")"}) {
    try {
      parse_chat_request(body(refused));
      ADD_FAILURE() << "accepted tool_choice " << refused;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.body()["error"]["param"], "tool_choice");
    }
  }
}

}  // namespace
}  // namespace jitllm::server
