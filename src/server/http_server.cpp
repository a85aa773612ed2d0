// HttpServer: routes, authentication, error bodies, streaming, loading state and draining.
#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>

#include "app/request_error.h"
#include "app/systemone.h"
#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/openai_format.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_id(const char* prefix) {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mutex);
  return fmt::format("{}{:016x}", prefix, rng());
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.body()); }

const char* status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "the request body is larger than the server accepts";
    case 414: return "the request URI is too long";
    case 431: return "the request headers are too large";
    case 503: return "the server is not ready";
    default: return "request failed";
  }
}

// Resolves the options a generation request asks for into a Job the scheduler can run.
std::shared_ptr<Job> make_job(const ServedModel& model, std::vector<int32_t> prompt,
                              const GenerationOptions& o, bool chat, bool add_implicit_stops) {
  const char* prompt_param = chat ? "messages" : "prompt";
  if (prompt.empty()) throw invalid_request(prompt_param, "the prompt is empty");
  for (int32_t id : prompt)
    if (id < 0 || id >= model.n_vocab())
      throw invalid_request(prompt_param, fmt::format("token id {} is outside the vocabulary of {}",
                                                      id, model.n_vocab()));
  const int64_t n_ctx = model.n_ctx();
  if (int64_t(prompt.size()) >= n_ctx)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("this model's maximum context length is {} tokens; the prompt "
                               "has {} tokens (at least one more is needed to answer)",
                               n_ctx, prompt.size()),
                   prompt_param, "context_length_exceeded");
  auto job = std::make_shared<Job>();
  if (o.max_tokens >= 0) {
    if (int64_t(prompt.size()) + o.max_tokens > n_ctx)
      throw ApiError(400, "invalid_request_error",
                     fmt::format("this model's maximum context length is {} tokens; the prompt "
                                 "has {} tokens and max_tokens asks for {} more",
                                 n_ctx, prompt.size(), o.max_tokens),
                     "max_tokens", "context_length_exceeded");
    job->max_tokens = o.max_tokens;
  } else {
    job->max_tokens = int(n_ctx - int64_t(prompt.size()));
  }
  SamplingParams& sp = job->sampling;
  sp.temperature = float(o.temperature);
  sp.top_k = o.top_k;
  sp.top_p = float(o.top_p);
  sp.min_p = float(o.min_p);
  sp.typical_p = float(o.typical_p);
  sp.presence_penalty = float(o.presence_penalty);
  sp.frequency_penalty = float(o.frequency_penalty);
  sp.repeat_penalty = float(o.repeat_penalty);
  sp.penalty_last_n = o.repeat_last_n;
  sp.logit_bias = o.logit_bias;
  if (o.ignore_eos)
    for (int32_t id : model.tokenizer().vocab().eog)
      sp.logit_bias[id] = -std::numeric_limits<float>::infinity();
  // The seed is 32 bits in the sampler; 0xFFFFFFFF means "random" there, so it is folded.
  if (o.seed) {
    sp.seed = uint32_t(*o.seed ^ (*o.seed >> 32));
    if (sp.seed == SamplingParams::kRandomSeed) sp.seed = 0;
  }
  try {
    validate_sampling_params(sp, model.n_vocab());
  } catch (const Error& e) {
    throw invalid_request(o.logit_bias.empty() ? "" : "logit_bias", e.what());
  }
  job->prompt = std::move(prompt);
  job->n = o.n;
  job->stop = o.stop;
  if (add_implicit_stops)
    for (const auto& s : model.implicit_stops()) job->stop.push_back(s);
  job->logprobs = o.logprobs;
  job->top_logprobs = o.top_logprobs;
  return job;
}

// Waits for a job to finish (no streaming), collecting its choices.
json collect(Job& job, const ResponseInfo& info, int n, const std::string& prefix) {
  std::vector<ChoiceText> choices(static_cast<size_t>(n));
  bool done = false;
  while (!done) {
    for (JobEvent& ev : job.take(std::chrono::milliseconds(1000), done)) {
      ChoiceText& c = choices.at(size_t(ev.index));
      c.text += ev.text;
      for (auto& t : ev.tokens) c.tokens.push_back(std::move(t));
      if (ev.finish_reason) c.finish_reason = *ev.finish_reason;
    }
  }
  if (job.error) throw *job.error;
  return full_response(info, choices, job.usage, prefix);
}

// What a streaming response's provider needs between calls.
struct StreamState {
  std::shared_ptr<Job> job;
  ResponseInfo info;
  std::vector<bool> started;
  bool include_usage = false;
  std::vector<JobEvent> held;  // finishing chunks wait for the usage of the last one
  bool ended = false;
};

void start_stream(httplib::Response& res, std::shared_ptr<Job> job, ResponseInfo info,
                  bool include_usage, std::atomic<int>& in_flight) {
  auto st = std::make_shared<StreamState>();
  st->job = std::move(job);
  st->info = std::move(info);
  st->started.assign(size_t(st->job->n), false);
  st->include_usage = include_usage;
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  ++in_flight;
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) {
        if (st->ended) return false;
        bool done = false;
        auto events = st->job->take(std::chrono::milliseconds(200), done);
        std::string out;
        for (JobEvent& ev : events) {
          const bool first = !st->started.at(size_t(ev.index));
          st->started[size_t(ev.index)] = true;
          if (ev.finish_reason) {
            st->held.push_back(std::move(ev));
            continue;
          }
          if (ev.text.empty() && ev.tokens.empty() && !first) continue;
          out += sse(stream_chunk(st->info, ev, first));
        }
        if (done) {
          if (st->job->error) {
            out += sse(st->job->error->body());
          } else {
            for (size_t i = 0; i < st->held.size(); ++i) {
              json chunk = stream_chunk(st->info, st->held[i], false);
              if (i + 1 == st->held.size() && !st->include_usage)
                chunk["usage"] = usage_json(st->job->usage);
              out += sse(chunk);
            }
            if (st->include_usage) out += sse(usage_chunk(st->info, st->job->usage));
          }
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          st->job->cancelled = true;  // the client went away: free its session
          return false;
        }
        if (!done && out.empty() && sink.is_writable && !sink.is_writable()) {
          st->job->cancelled = true;
          return false;
        }
        if (done) {
          st->ended = true;
          sink.done();
        }
        return true;
      },
      [st, &in_flight](bool success) {
        if (!success || !st->ended) st->job->cancelled = true;
        --in_flight;
      });
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, std::vector<ModelOptions> models)
    : options_(std::move(options)), model_options_(std::move(models)),
      http_(std::make_unique<httplib::Server>()) {
  if (model_options_.empty()) model_options_.emplace_back();
  int max_parallel = 1;
  for (const auto& m : model_options_) max_parallel = std::max(max_parallel, m.scheduler.parallel);
  const int threads = options_.http_threads > 0 ? options_.http_threads : 2 * max_parallel + 8;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(5);
  install_routes();
}

HttpServer::~HttpServer() {
  stop();
  if (loader_.joinable()) loader_.join();
}

void HttpServer::load_models() {
  try {
    for (const ModelOptions& mo : model_options_) {
      const auto t0 = std::chrono::steady_clock::now();
      auto m = std::make_unique<ServedModel>(mo, metrics_);
      log(LogLevel::Info, "model {} ready ({:.2f} s, context {})", m->id(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          m->n_ctx());
      std::lock_guard lock(models_mutex_);
      for (const auto& other : models_)
        if (other->id() == m->id()) throw_error("two models are named '{}' (use -id)", m->id());
      models_.push_back(std::move(m));
    }
    state_ = State::Ok;
  } catch (const std::exception& e) {
    std::lock_guard lock(models_mutex_);
    load_error_ = e.what();
    state_ = State::Error;
    log(LogLevel::Error, "loading failed: {}", e.what());
  }
}

ServedModel& HttpServer::model_for(const std::string& name) {
  if (state_ == State::Loading)
    throw ApiError(503, "server_error", "the model is still loading; retry shortly", "",
                   "model_loading");
  if (state_ == State::Error)
    throw ApiError(503, "server_error", "the model failed to load: " + load_error_, "",
                   "model_load_failed");
  std::lock_guard lock(models_mutex_);
  if (name.empty()) return *models_.front();
  for (auto& m : models_)
    if (m->id() == name) return *m;
  throw ApiError(404, "invalid_request_error",
                 fmt::format("the model '{}' does not exist", name), "model", "model_not_found");
}

void HttpServer::install_routes() {
  httplib::Server& s = *http_;

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics_.add_counter(fmt::format("requests_total{{endpoint=\"{}\"}}",
                                     req.path.rfind("/v1/", 0) == 0 || req.path == "/health" ||
                                             req.path == "/metrics"
                                         ? req.path
                                         : "other"));
    const bool open = req.path == "/health" || req.path == "/metrics";
    if (!options_.api_key.empty() && !open &&
        req.get_header_value("Authorization") != "Bearer " + options_.api_key) {
      send_error(res, ApiError(401, "invalid_request_error",
                               "missing or incorrect API key (send 'Authorization: Bearer KEY')",
                               "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (draining_ && req.method == "POST") {
      send_error(res, ApiError(503, "server_error", "the server is shutting down", "",
                               "shutting_down"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  s.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (res.status >= 400) metrics_.add_counter("requests_failed_total");
    if (!res.body.empty()) return;
    const char* type = res.status >= 500 ? "server_error" : "invalid_request_error";
    send_json(res, res.status,
              ApiError(res.status, type, status_text(res.status)).body());
  });

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", what));
  });

  // Runs a handler body, turning its exceptions into OpenAI error bodies.
  auto guarded = [this](auto body) {
    return [this, body](const httplib::Request& req, httplib::Response& res) {
      ++requests_in_flight_;
      try {
        body(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const app::RequestError& e) {
        send_error(res, api_error(e));
      } catch (const Error& e) {
        // Errors from the tokenizer/template/engine about this request's content.
        send_error(res, ApiError(400, "invalid_request_error", e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, "server_error", e.what()));
      }
      --requests_in_flight_;
    };
  };

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    switch (state_.load()) {
      case State::Loading: return send_json(res, 503, {{"status", "loading"}});
      case State::Ok:
        return send_json(res, 200, {{"status", draining_ ? "draining" : "ok"}});
      case State::Error: {
        std::lock_guard lock(models_mutex_);
        return send_json(res, 500, {{"status", "error"}, {"message", load_error_}});
      }
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

  s.Post("/v1/completions", guarded([this](const httplib::Request& req, httplib::Response& res) {
    const CompletionRequest r = parse_completion_request(parse_json_body(req.body));
    ServedModel& m = model_for(r.model);
    // A raw prompt: its special-token texts are tokens, as in llama-server.
    std::vector<int32_t> prompt = r.prompt_ids ? *r.prompt_ids : m.tokenize_raw_prompt(*r.prompt_text);
    auto job = make_job(m, std::move(prompt), r.options, false, false);
    ResponseInfo info{random_id("cmpl-"), unix_now(), m.id(), false, r.options.logprobs};
    std::string prefix;
    if (r.echo) prefix = r.prompt_text ? *r.prompt_text : m.detokenize(job->prompt);
    if (r.options.stream && !prefix.empty()) {
      JobEvent echo;  // before submit, so it is the stream's first chunk
      echo.text = prefix;
      job->push(std::move(echo));
    }
    m.scheduler().submit(job);
    if (r.options.stream)
      return start_stream(res, job, info, r.options.include_usage, requests_in_flight_);
    send_json(res, 200, collect(*job, info, job->n, prefix));
  }));

  s.Post("/v1/chat/completions", guarded([this](const httplib::Request& req, httplib::Response& res) {
    const ChatRequest r = parse_chat_request(parse_json_body(req.body));
    ServedModel& m = model_for(r.model);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const ChatMessage& msg : r.messages)
      messages.push_back(nlohmann::ordered_json::parse(msg.raw.dump()));
    auto job = make_job(m, m.tokenize_chat(messages, r.tools, r.parse_special_in_content),
                        r.options, true, true);
    ResponseInfo info{random_id("chatcmpl-"), unix_now(), m.id(), true, r.options.logprobs};
    m.scheduler().submit(job);
    if (r.options.stream)
      return start_stream(res, job, info, r.options.include_usage, requests_in_flight_);
    send_json(res, 200, collect(*job, info, job->n, ""));
  }));

  s.Post("/v1/systemone", guarded([this](const httplib::Request& req, httplib::Response& res) {
    const app::SystemOneRequest r = app::parse_systemone_request(parse_json_body(req.body));
    ServedModel& m = model_for(r.model);
    const app::SystemOneResult result = m.run_systemone(r);
    metrics_.add_counter("prompt_tokens_total", double(result.tokens_run));
    if (result.tokens_cached > 0) {
      metrics_.add_counter("prefix_cache_hits_total");
      metrics_.add_counter("prompt_tokens_cached_total", double(result.tokens_cached));
    }
    send_json(res, 200, app::systemone_response(r, result, m.id()));
  }));
}

int HttpServer::run() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) throw_error("cannot bind {}: no free port", options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    throw_error("cannot bind {}:{} (in use, or not a local address)", options_.host, port);
  }
  log(LogLevel::Info, "listening on http://{}:{}", options_.host, port);
  if (!options_.port_file.empty()) {
    const std::string tmp = options_.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), options_.port_file.c_str());
  }
  loader_ = std::thread([this] { load_models(); });
  // A stop() that came before the socket existed could not stop it; do not start listening then.
  if (!draining_) http_->listen_after_bind();
  if (loader_.joinable()) loader_.join();
  std::lock_guard lock(models_mutex_);
  for (auto& m : models_) m->scheduler().stop(true);
  return 0;
}

void HttpServer::stop() {
  if (draining_.exchange(true)) return;
  log(LogLevel::Info, "draining: waiting for the requests in flight");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.drain_timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    size_t busy = size_t(std::max(0, requests_in_flight_.load()));
    {
      std::lock_guard lock(models_mutex_);
      for (auto& m : models_) busy += m->scheduler().in_flight();
    }
    if (busy == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  http_->stop();
}

}  // namespace jitllm::server
