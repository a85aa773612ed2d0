// OpenAI request parsing and validation (see request.h); every refusal names its parameter.
#include "server/request.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "core/json_depth.h"
#include "server/api_error.h"
#include "server/output_constraint.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

const char* json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_float: return "number";
    default: return "integer";
  }
}

ApiError type_error(const std::string& name, const char* expected, const json& got) {
  return invalid_request(name, fmt::format("'{}' must be {}, got {}", name, expected,
                                           json_type_name(got)));
}

// A present, non-null field (OpenAI clients send explicit nulls for "unset").
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number_in(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw type_error(name, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw invalid_request(name, fmt::format("'{}' must be between {} and {}, got {}", name, lo,
                                            hi, x));
  return x;
}

int64_t integer_in(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  // 3.0 is accepted as 3 (JSON has one number type); 3.5 is not an integer.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) throw type_error(name, "an integer", *v);
    if (d < double(lo) || d > double(hi))
      throw invalid_request(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
    return int64_t(d);
  }
  if (!v->is_number_integer()) throw type_error(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
    throw invalid_request(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw invalid_request(name, fmt::format("'{}' must be between {} and {}, got {}", name, lo,
                                            hi, x));
  return x;
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw type_error(name, "a boolean", *v);
  return v->get<bool>();
}

std::string string_field(const json& body, const char* name, const std::string& fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_string()) throw type_error(name, "a string", *v);
  return v->get<std::string>();
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  std::vector<std::string> stops;
  if (!v) return stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 4) throw invalid_request("stop", "'stop' takes at most 4 sequences");
    for (const auto& s : *v) {
      if (!s.is_string()) throw type_error("stop", "a string or an array of strings", s);
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw type_error("stop", "a string or an array of strings", *v);
  }
  for (const auto& s : stops)
    if (s.empty()) throw invalid_request("stop", "'stop' sequences must not be empty");
  return stops;
}

std::map<int32_t, float> parse_logit_bias(const json& body) {
  std::map<int32_t, float> bias;
  const json* v = field(body, "logit_bias");
  if (!v) return bias;
  if (!v->is_object()) throw type_error("logit_bias", "an object", *v);
  for (const auto& [key, value] : v->items()) {
    // Digits only: no sign, no spaces (" 5" is not a token id), no trailing text.
    int64_t id = -1;
    const char* end = key.data() + key.size();
    const auto [stop, ec] = std::from_chars(key.data(), end, id);
    if (key.empty() || key[0] == '-' || key[0] == '+' || ec != std::errc() || stop != end ||
        id < 0 || id > std::numeric_limits<int32_t>::max())
      throw invalid_request("logit_bias",
                            fmt::format("'logit_bias' keys must be token ids, got '{}'", key));
    if (!value.is_number()) throw type_error("logit_bias", "an object of numbers", value);
    const double b = value.get<double>();
    if (!std::isfinite(b) || b < -100 || b > 100)
      throw invalid_request("logit_bias", "'logit_bias' values must be between -100 and 100");
    bias[int32_t(id)] = float(b);
  }
  return bias;
}

// Fields clients send (OpenAI's API, llama-server's) whose behaviour is not implemented: a value
// that changes nothing passes, any other is refused by name, so no request gets a 200 that
// silently dropped what it asked for. `chat`: which route's list.
void refuse_unhonoured(const json& body, bool chat) {
  using Fine = bool (*)(const json&);
  static const Fine null_or_false = [](const json& v) { return v.is_null() || v == false; };
  static const Fine null_or_zero = [](const json& v) { return v.is_null() || v == 0 || v == false; };
  static const Fine null_or_empty = [](const json& v) {
    return v.is_null() || (v.is_string() && v.get<std::string>().empty());
  };
  static const Fine never = [](const json&) { return false; };
  static const Fine absent = [](const json& v) { return v.is_null(); };
  struct Field {
    const char* name;
    Fine fine;
    const char* instead;
  };
  static const Field common[] = {
      {"mirostat", null_or_zero, "use temperature, top_k, top_p or min_p"},
      {"mirostat_tau", never, "use temperature, top_k, top_p or min_p"},
      {"mirostat_eta", never, "use temperature, top_k, top_p or min_p"},
      {"samplers", never, "the sampler order is fixed"},
      {"dry_multiplier", null_or_zero, "use repeat_penalty or frequency_penalty"},
      {"dry_base", never, "use repeat_penalty or frequency_penalty"},
      {"dry_allowed_length", never, "use repeat_penalty or frequency_penalty"},
      {"dry_penalty_last_n", never, "use repeat_penalty or frequency_penalty"},
      {"dry_sequence_breakers", never, "use repeat_penalty or frequency_penalty"},
      {"xtc_probability", null_or_zero, "use top_p or min_p"},
      {"xtc_threshold", never, "use top_p or min_p"},
      {"top_n_sigma", never, "use top_k, top_p or min_p"},
      {"dynatemp_range", null_or_zero, "use temperature"},
      {"dynatemp_exponent", never, "use temperature"},
      {"tfs_z", never, "use top_p or min_p"},
      {"n_probs", null_or_zero, "use logprobs"},
      {"store", null_or_false, "nothing is stored"},
      {"prediction", absent, "no predicted outputs"},
      {"best_of", [](const json& v) { return v.is_null() || v == 1; }, "use n"},
      // llama-server's own
      {"t_max_predict_ms", null_or_zero, "use max_tokens"},
      {"n_keep", null_or_zero, "the context is never shifted; a prompt that does not fit is refused"},
      {"min_keep", null_or_zero, "use top_k, top_p or min_p"},
      {"id_slot", [](const json& v) { return v.is_null() || v == -1; }, "slots are assigned here"},
      {"grammar_lazy", null_or_false, "tools switch grammars on lazily by themselves"},
      {"cache_prompt", [](const json& v) { return v.is_null() || v == true; },
       "prompt prefixes are always reused"},
  };
  static const Field completions[] = {
      {"suffix", null_or_empty, "fill-in-the-middle is not supported"},
      {"top_logprobs", never, "on /v1/completions 'logprobs' is the number of alternatives"},
      {"max_completion_tokens", never, "on /v1/completions send max_tokens"},
      {"messages", never, "send messages to /v1/chat/completions"},
      {"tools", never, "send tools to /v1/chat/completions"},
      {"tool_choice", never, "send tool_choice to /v1/chat/completions"},
  };
  static const Field chats[] = {
      {"echo", null_or_false, "echo is a /v1/completions field"},
      {"suffix", never, "fill-in-the-middle is not supported"},
      {"modalities",
       [](const json& v) { return v.is_null() || v == json::array({"text"}); },
       "this server answers in text only"},
      {"audio", absent, "this server answers in text only"},
      {"web_search_options", absent, "no web search"},
  };
  auto check = [&](const Field& f) {
    const json* v = field(body, f.name);
    if (v && !f.fine(*v))
      throw invalid_request(f.name, fmt::format("'{}' is not supported by this server ({})",
                                                f.name, f.instead));
  };
  for (const Field& f : common) check(f);
  if (chat)
    for (const Field& f : chats) check(f);
  else
    for (const Field& f : completions) check(f);
}

GenerationOptions parse_options(const json& body, bool chat, const nlohmann::ordered_json* ordered) {
  GenerationOptions o;
  const int64_t max_int = std::numeric_limits<int32_t>::max();
  refuse_unhonoured(body, chat);
  // n_predict: llama-server's name for max_tokens (-1: no limit but the context).
  if (field(body, "n_predict") && field(body, "max_tokens"))
    throw invalid_request("n_predict", "give 'max_tokens' or 'n_predict', not both");
  o.max_tokens = int(integer_in(body, "max_tokens", -1, 0, max_int));
  if (field(body, "n_predict")) o.max_tokens = int(integer_in(body, "n_predict", -1, -1, max_int));
  if (chat && field(body, "max_completion_tokens") && (field(body, "max_tokens") || field(body, "n_predict")))
    throw invalid_request("max_completion_tokens",
                          "give 'max_completion_tokens' or 'max_tokens', not both");
  if (chat) o.max_tokens = int(integer_in(body, "max_completion_tokens", o.max_tokens, 0, max_int));
  o.temperature = number_in(body, "temperature", 1.0, 0.0, 2.0);
  o.top_p = number_in(body, "top_p", 1.0, 0.0, 1.0);
  o.top_k = int(integer_in(body, "top_k", 0, 0, max_int));
  o.min_p = number_in(body, "min_p", 0.0, 0.0, 1.0);
  o.typical_p = number_in(body, "typical_p", 1.0, 0.0, 1.0);
  o.presence_penalty = number_in(body, "presence_penalty", 0.0, -2.0, 2.0);
  o.frequency_penalty = number_in(body, "frequency_penalty", 0.0, -2.0, 2.0);
  o.repeat_penalty = number_in(body, "repeat_penalty", 1.0, 0.0, 10.0);
  // It divides positive logits: 0 has no meaning (1 disables it).
  if (o.repeat_penalty <= 0.0)
    throw invalid_request("repeat_penalty", "'repeat_penalty' must be greater than 0 (1 disables it)");
  // penalty_last_n: llama-server's name for repeat_last_n.
  if (field(body, "penalty_last_n") && field(body, "repeat_last_n"))
    throw invalid_request("penalty_last_n", "give 'repeat_last_n' or 'penalty_last_n', not both");
  o.repeat_last_n = int(integer_in(body, "repeat_last_n", 64, 0, max_int));
  if (field(body, "penalty_last_n"))
    o.repeat_last_n = int(integer_in(body, "penalty_last_n", 64, 0, max_int));
  if (field(body, "seed")) o.seed = uint64_t(integer_in(body, "seed", 0, INT64_MIN, INT64_MAX));
  o.logit_bias = parse_logit_bias(body);
  o.stop = parse_stop(body);
  o.ignore_eos = boolean(body, "ignore_eos", false);
  o.n = int(integer_in(body, "n", 1, 1, 16));
  o.stream = boolean(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw type_error("stream_options", "an object", *so);
    o.include_usage = boolean(*so, "include_usage", false);
  }
  if (chat) {
    o.logprobs = boolean(body, "logprobs", false);
    o.top_logprobs = int(integer_in(body, "top_logprobs", 0, 0, 20));
    if (o.top_logprobs > 0 && !o.logprobs)
      throw invalid_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  } else if (field(body, "logprobs")) {
    // Legacy completions: logprobs is the number of alternatives (0..5).
    o.top_logprobs = int(integer_in(body, "logprobs", 0, 0, 5));
    o.logprobs = true;
  }
  o.grammar = parse_output_constraint(body, ordered, &o.answer_gbnf);
  o.grammar_is_answer = o.grammar && !o.answer_gbnf.empty();
  return o;
}

void require_object(const json& body) {
  if (!body.is_object())
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body must be a JSON object, got {}",
                               json_type_name(body)));
}

std::string message_content(const json& message, size_t index) {
  const std::string param = fmt::format("messages[{}].content", index);
  const json* content = field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (content->is_array()) {
    // Content parts: only text parts can be served by a text model.
    std::string text;
    for (const auto& part : *content) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        throw invalid_request(param, "content parts must be objects with a 'type'");
      if (part["type"] != "text")
        throw invalid_request(param, fmt::format("content part type '{}' is not supported by "
                                                 "this text-only model",
                                                 part["type"].get<std::string>()));
      if (!part.contains("text") || !part["text"].is_string())
        throw invalid_request(param, "a text content part needs a string 'text'");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  throw type_error(param, "a string or an array of content parts", *content);
}

}  // namespace

json parse_json_object_body(const std::string& text) {
  json body = parse_json_body(text);
  if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
  return body;
}

std::string model_field(const json& body) {
  const auto it = body.find("model");
  if (it == body.end() || it->is_null()) return "";
  if (!it->is_string()) throw invalid_request("model", "'model' must be a string");
  return it->get<std::string>();
}

json parse_json_body(const std::string& text) {
  // Before anything recurses: nlohmann parses iteratively, but dump(), comparisons and the
  // template's conversions recurse once per level (a message nested 70,000 deep overflowed the
  // stack of an HTTP thread).
  if (const size_t at = json_depth_exceeded_at(text, kMaxJsonDepth); at != std::string::npos)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body nests arrays and objects more than {} levels "
                               "deep (byte {})", kMaxJsonDepth, at));
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann counts bytes from 1; the message gives the 0-based offset of the bad byte.
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body is not valid JSON (byte {}): {}",
                               e.byte > 0 ? e.byte - 1 : 0, e.what()));
  } catch (const json::exception& e) {
    // e.g. a number too large for a double ("1e400").
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the request body is not valid JSON: {}", e.what()));
  }
}

CompletionRequest parse_completion_request(const json& body, const nlohmann::ordered_json* ordered) {
  require_object(body);
  CompletionRequest r;
  r.model = string_field(body, "model", "");
  const json* prompt = field(body, "prompt");
  if (!prompt) throw invalid_request("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
  } else if (prompt->is_array()) {
    if (prompt->size() == 1 && (*prompt)[0].is_string()) {
      r.prompt_text = (*prompt)[0].get<std::string>();
    } else if (!prompt->empty() && (*prompt)[0].is_number_integer()) {
      std::vector<int32_t> ids;
      for (const auto& id : *prompt) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() > std::numeric_limits<int32_t>::max())
          throw invalid_request("prompt", "a token-id prompt must hold non-negative integers");
        ids.push_back(id.get<int32_t>());
      }
      r.prompt_ids = std::move(ids);
    } else {
      throw invalid_request("prompt", "'prompt' must be a string, one string in an array, or an "
                                      "array of token ids (batches of prompts: send one request "
                                      "per prompt)");
    }
  } else {
    throw type_error("prompt", "a string or an array", *prompt);
  }
  r.echo = boolean(body, "echo", false);
  r.options = parse_options(body, false, ordered);
  if (r.echo && r.options.logprobs)
    throw invalid_request("echo", "'echo' with 'logprobs' (the prompt tokens' log probabilities) "
                                  "is not supported; send them apart");
  return r;
}

ChatRequest parse_chat_request(const json& body, const nlohmann::ordered_json* ordered) {
  require_object(body);
  ChatRequest r;
  r.model = string_field(body, "model", "");
  const json* messages = field(body, "messages");
  if (!messages) throw invalid_request("messages", "'messages' is required");
  if (!messages->is_array()) throw type_error("messages", "an array", *messages);
  if (messages->empty()) throw invalid_request("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    if (!m.is_object()) throw type_error(fmt::format("messages[{}]", i), "an object", m);
    ChatMessage message;
    const json* role = field(m, "role");
    if (!role || !role->is_string())
      throw invalid_request(fmt::format("messages[{}].role", i), "each message needs a 'role'");
    message.role = role->get<std::string>();
    if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
        message.role != "tool" && message.role != "developer")
      throw invalid_request(fmt::format("messages[{}].role", i),
                            fmt::format("unknown role '{}'", message.role));
    if (const json* name = field(m, "name"); name && !name->is_string())
      throw type_error(fmt::format("messages[{}].name", i), "a string", *name);
    // An assistant turn's thinking (as this server answers it), for templates that read it.
    if (const json* rc = field(m, "reasoning_content"); rc && !rc->is_string() && !rc->is_null())
      throw type_error(fmt::format("messages[{}].reasoning_content", i), "a string", *rc);
    message.content = message_content(m, i);
    message.raw = m;
    message.raw["content"] = message.content;
    r.messages.push_back(std::move(message));
  }
  // The deprecated function-calling fields: refused rather than ignored (send tools).
  for (const char* legacy : {"functions", "function_call"})
    if (field(body, legacy))
      throw invalid_request(legacy, fmt::format("'{}' is not supported; send 'tools' and "
                                                "'tool_choice'", legacy));
  r.tool_request = parse_tool_request(body, ordered);
  if (const json* tools = field(body, "tools"))
    r.tools = ordered ? (*ordered)["tools"] : nlohmann::ordered_json::parse(tools->dump());
  r.parse_special_in_content = boolean(body, "parse_special_in_content", false);
  r.options = parse_options(body, true, ordered);
  if (const json* f = field(body, "reasoning_format"); f && !f->is_null()) {
    if (!f->is_string()) throw type_error("reasoning_format", "a string", *f);
    r.reasoning_format = parse_reasoning_format(f->get<std::string>(), "reasoning_format");
  }
  if (const json* e = field(body, "reasoning_effort"); e && !e->is_null()) {
    if (!e->is_string()) throw type_error("reasoning_effort", "a string", *e);
    const std::string effort = e->get<std::string>();
    if (effort != "none" && effort != "minimal" && effort != "low" && effort != "medium" &&
        effort != "high")
      throw invalid_request("reasoning_effort", fmt::format("'reasoning_effort' must be none, "
                                                            "minimal, low, medium or high (got "
                                                            "'{}')", effort));
    r.reasoning_effort = effort;
  }
  if (const json* k = field(body, "chat_template_kwargs"); k && !k->is_null()) {
    if (!k->is_object()) throw type_error("chat_template_kwargs", "an object", *k);
    // The variables the server sets itself are not the client's to replace.
    for (const char* own : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token",
                            "raise_exception", "strftime_now"})
      if (k->contains(own))
        throw invalid_request("chat_template_kwargs",
                              fmt::format("'chat_template_kwargs.{}' is set by the server", own));
    r.template_kwargs = ordered ? (*ordered)["chat_template_kwargs"]
                                : nlohmann::ordered_json::parse(k->dump());
  }
  return r;
}

}  // namespace jitllm::server
