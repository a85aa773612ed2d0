// OpenAI response shapes (see the header).
#include "server/openai_format.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// JSON strings must be valid UTF-8; a token may be part of a character, so invalid bytes are
// replaced (the exact bytes travel in "bytes").
std::string valid_utf8(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

json object_header(const ResponseInfo& info, bool chunk) {
  const char* object = info.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                 : "text_completion";
  return {{"id", info.id}, {"object", object}, {"created", info.created}, {"model", info.model},
          {"system_fingerprint", "jitllm"}};
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool stream, size_t first_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", valid_utf8(calls[i].arguments)}}}};
    if (stream) call["index"] = first_index + i;
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json logprobs_json(bool chat, const std::vector<TokenLogprobInfo>& tokens, size_t text_offset0) {
  if (chat) {
    json content = json::array();
    for (const auto& t : tokens) {
      json top = json::array();
      for (const auto& [text, lp] : t.top)
        top.push_back({{"token", valid_utf8(text)}, {"logprob", lp}, {"bytes", bytes_of(text)}});
      content.push_back({{"token", valid_utf8(t.text)},
                         {"logprob", t.logprob},
                         {"bytes", bytes_of(t.text)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  size_t offset = text_offset0;
  for (const auto& t : tokens) {
    out["tokens"].push_back(valid_utf8(t.text));
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const auto& [text, lp] : t.top) top[valid_utf8(text)] = lp;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(offset);
    offset += t.text.size();
  }
  return out;
}

json full_response(const ResponseInfo& info, const std::vector<ChoiceText>& choices,
                   const Usage& usage, const std::string& prefix) {
  json out = object_header(info, false);
  json arr = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceText& c = choices[i];
    json choice = {{"index", i}, {"finish_reason", c.finish_reason}};
    choice["logprobs"] =
        info.logprobs ? logprobs_json(info.chat, c.tokens, prefix.size()) : json(nullptr);
    if (info.chat) {
      json message = {{"role", "assistant"}, {"content", valid_utf8(c.text)}, {"refusal", nullptr}};
      if (!c.reasoning.empty()) message["reasoning_content"] = valid_utf8(c.reasoning);
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;
        message["tool_calls"] = tool_calls_json(c.tool_calls, false, 0);
      }
      choice["message"] = std::move(message);
    } else
      choice["text"] = valid_utf8(prefix + c.text);
    arr.push_back(choice);
  }
  out["choices"] = arr;
  out["usage"] = usage_json(usage);
  return out;
}

json stream_chunk(const ResponseInfo& info, const JobEvent& ev, bool first) {
  json out = object_header(info, true);
  json choice = {{"index", ev.index}};
  choice["finish_reason"] = ev.finish_reason ? json(*ev.finish_reason) : json(nullptr);
  choice["logprobs"] = info.logprobs && !ev.tokens.empty() ? logprobs_json(info.chat, ev.tokens)
                                                           : json(nullptr);
  if (info.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!ev.text.empty() || first) delta["content"] = valid_utf8(ev.text);
    choice["delta"] = delta;
  } else {
    choice["text"] = valid_utf8(ev.text);
  }
  out["choices"] = json::array({choice});
  return out;
}

json reasoning_chunk(const ResponseInfo& info, int choice, const std::string& reasoning, bool first) {
  json out = object_header(info, true);
  json delta = {{"reasoning_content", valid_utf8(reasoning)}};
  if (first) delta["role"] = "assistant";
  out["choices"] = json::array({{{"index", choice}, {"delta", delta}, {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
  return out;
}

json tool_calls_chunk(const ResponseInfo& info, int choice, const std::vector<ToolCall>& calls,
                      size_t first_index) {
  json out = object_header(info, true);
  out["choices"] = json::array({{{"index", choice},
                                 {"delta", {{"tool_calls", tool_calls_json(calls, true, first_index)}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
  return out;
}

json usage_chunk(const ResponseInfo& info, const Usage& usage) {
  json out = object_header(info, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

std::string sse(const json& data) {
  return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace jitllm::server
