// HttpServer's routes besides generation: /health, /metrics, /v1/models, llama-server's
// /tokenize, /detokenize, /props and /slots (same request and answer shapes), and CORS.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/version.h"
#include "server/access_log.h"
#include "server/api_error.h"
#include "server/http_reply.h"
#include "server/http_server.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

bool bool_field(const json& body, const char* name, bool fallback) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw invalid_request(name, fmt::format("'{}' must be a boolean", name));
  return it->get<bool>();
}


// The sampling defaults a request without options gets (GenerationOptions' own defaults).
json default_generation_settings() {
  const GenerationOptions o;
  return {{"max_tokens", nullptr},  // until the context is full or the model stops
          {"temperature", o.temperature},   {"top_p", o.top_p},
          {"top_k", o.top_k},               {"min_p", o.min_p},
          {"typical_p", o.typical_p},       {"presence_penalty", o.presence_penalty},
          {"frequency_penalty", o.frequency_penalty},
          {"repeat_penalty", o.repeat_penalty}, {"repeat_last_n", o.repeat_last_n},
          {"n", o.n}};
}

}  // namespace

bool HttpServer::apply_cors(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  const auto& allowed = options_.cors_origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  const bool ok = !origin.empty() &&
                  (any || std::find(allowed.begin(), allowed.end(), origin) != allowed.end());
  if (ok) {
    res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
    if (!any) res.set_header("Vary", "Origin");
  }
  if (req.method != "OPTIONS") return false;
  // A preflight: what may be sent is said only to an allowed origin; others get no CORS
  // headers, so their browser refuses the request.
  res.status = 204;
  res.set_header("Allow", "GET, POST, OPTIONS");
  if (ok) {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    // Anthropic's browser clients send their key and version in headers of their own.
    res.set_header("Access-Control-Allow-Headers",
                   "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, "
                   "Anthropic-Dangerous-Direct-Browser-Access");
    res.set_header("Access-Control-Max-Age", "600");
  }
  return true;
}

void HttpServer::install_utility_routes() {
  GuardedHttpServer& s = *http_;
  // Errors of these routes in OpenAI's shape, like the generation routes'.
  auto guarded = [this](auto body) {
    return [this, body](const httplib::Request& req, httplib::Response& res) {
      answer(res, [&] { body(req, res); });
    };
  };

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    // Draining is not ready: load balancers take the server out before it goes.
    if (draining_) return send_json(res, 503, {{"status", "draining"}});
    switch (state_.load()) {
      case State::Loading: {
        // Where the load is: the model file, the stage ("opening", then the engine's "warm-up",
        // which compiles the kernels and places the weights) and its parts done of all.
        std::lock_guard lock(models_mutex_);
        const LoadProgress& p = load_progress_;
        json body = {{"status", "loading"}, {"model", p.model}, {"stage", p.stage}};
        if (p.total > 0) body["progress"] = double(p.done) / double(p.total);
        return send_json(res, 503, body);
      }
      case State::Ok: return send_json(res, 200, {{"status", "ok"}});
      case State::Error: return send_json(res, 500, {{"status", "error"}});
    }
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });

  s.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    if (state_ == State::Ok) {
      std::lock_guard lock(models_mutex_);
      for (const auto& m : models_)
        data.push_back({{"id", m->id()}, {"object", "model"}, {"created", 0},
                        {"owned_by", "jitllm"}, {"context_length", m->n_ctx()}});
    }
    send_json(res, 200, {{"object", "list"}, {"data", data}});
  }));

  // {"content": "text", "add_special": false, "parse_special": true, "with_pieces": false} ->
  // {"tokens": [...]}; with pieces each token is {"id", "piece"}. Other fields are refused.
  // The defaults are llama-server's (control-token texts become their ids unless told not to).
  post_route("/tokenize", [this](const httplib::Request&, const std::string& text,
                                 httplib::Response& res) {
    const json body = parse_json_object_body(text);
    for (const auto& [key, value] : body.items())
      if (key != "model" && key != "content" && key != "add_special" && key != "parse_special" &&
          key != "with_pieces")
        throw invalid_request(key, fmt::format("/tokenize does not take '{}'", key));
    ServedModel& m = model_for(model_field(body));
    auto content = body.find("content");
    if (content == body.end() || !content->is_string())
      throw invalid_request("content", "'content' must be a string");
    const std::vector<int32_t> ids =
        m.tokenize_text(content->get<std::string>(), bool_field(body, "add_special", false),
                        bool_field(body, "parse_special", true));
    json tokens = json::array();
    const bool pieces = bool_field(body, "with_pieces", false);
    for (int32_t id : ids) {
      if (pieces) tokens.push_back({{"id", id}, {"piece", m.tokenizer().piece(id)}});
      else tokens.push_back(id);
    }
    send_json(res, 200, {{"tokens", tokens}});
  });

  // {"tokens": [ids]} -> {"content": "text"}.
  post_route("/detokenize", [this](const httplib::Request&, const std::string& text,
                                   httplib::Response& res) {
    const json body = parse_json_object_body(text);
    ServedModel& m = model_for(model_field(body));
    auto tokens = body.find("tokens");
    if (tokens == body.end() || !tokens->is_array())
      throw invalid_request("tokens", "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const json& t : *tokens) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= m.n_vocab())
        throw invalid_request("tokens", fmt::format("token ids must be integers in [0, {})", m.n_vocab()));
      ids.push_back(t.get<int32_t>());
    }
    send_json(res, 200, {{"content", m.detokenize(ids)}});
  });

  // The model as a client configures itself by: context, slots, template, defaults.
  s.Get("/props", guarded([this](const httplib::Request& req, httplib::Response& res) {
    ServedModel& m = model_for(req.get_param_value("model"));
    const Tokenizer& tok = m.tokenizer();
    auto token_text = [&](int32_t id) { return id >= 0 ? tok.piece(id) : std::string(); };
    send_json(res, 200,
              {{"model", m.id()},
               {"n_ctx", m.n_ctx()},
               {"n_vocab", m.n_vocab()},
               {"total_slots", m.scheduler().options().parallel},
               {"chat_template", m.chat_template_source()},
               {"own_chat_template", m.has_own_template()},
               {"bos_token", token_text(tok.vocab().bos)},
               {"eos_token", token_text(tok.vocab().eos)},
               {"default_generation_settings", default_generation_settings()},
               {"build_info", version_text()}});
  }));

  // The running sequences of a model, between two steps.
  s.Get("/slots", guarded([this](const httplib::Request& req, httplib::Response& res) {
    ServedModel& m = model_for(req.get_param_value("model"));
    size_t queued = 0;
    json slots = json::array();
    for (const SlotView& v : m.scheduler().slots(queued))
      slots.push_back({{"choice", v.choice},
                       {"state", v.prefilling ? "prefill" : "decode"},
                       {"position", v.position},
                       {"n_ctx", v.n_ctx},
                       {"prompt_tokens", v.prompt_tokens},
                       {"generated_tokens", v.generated},
                       {"age_s", std::round(v.age_s * 1000) / 1000}});
    send_json(res, 200, {{"model", m.id()},
                         {"total_slots", m.scheduler().options().parallel},
                         {"queued", queued},
                         {"slots", slots}});
  }));
}

}  // namespace jitllm::server
