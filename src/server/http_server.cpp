// HttpServer: routes, authentication, error bodies, streaming, loading state and draining.
#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <malloc.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <random>

#include "app/request_error.h"
#include "app/systemone.h"
#include "core/error.h"
#include "core/log.h"
#include "core/log_event.h"
#include "core/version.h"
#include "server/access_log.h"
#include "server/anthropic_format.h"
#include "server/api_error.h"
#include "server/chat_job.h"
#include "server/http_reply.h"
#include "server/job_response.h"
#include "server/openai_format.h"
#include "server/output_constraint.h"
#include "server/request.h"

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

const char* status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 408: return "the request did not arrive in time";
    case 413: return "the request body is larger than the server accepts";
    case 414: return "the request URI is too long";
    case 431: return "the request headers are too large";
    case 503: return "the server is not ready";
    default: return "request failed";
  }
}

// An error in the shape of the API the path belongs to.
void send_error_for(const std::string& path, httplib::Response& res, const ApiError& e) {
  if (is_anthropic_path(path)) {
    res.status = e.status();
    res.set_content(
        anthropic_error_body(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        "application/json");
    return;
  }
  send_error(res, e);
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, std::vector<ModelOptions> models)
    : options_(std::move(options)), model_options_(std::move(models)),
      http_(std::make_unique<GuardedHttpServer>(options_.connection)) {
  if (model_options_.empty()) model_options_.emplace_back();
  int max_parallel = 1;
  for (const auto& m : model_options_) max_parallel = std::max(max_parallel, m.scheduler.parallel);
  const int threads = options_.http_threads > 0 ? options_.http_threads : 2 * max_parallel + 8;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  // Two threads always left for requests that arrive whole (see ConnectionLimits::reading_total).
  if (options_.connection.reading_total == 0) http_->cap_reading_total(std::max(1, threads - 2));
  // What the Keep-Alive header announces; GuardedHttpServer serves that many per connection.
  http_->set_keep_alive_max_count(size_t(options_.connection.requests_per_connection));
  http_->set_payload_max_length(options_.max_body_bytes);  // Content-Length bodies: 413 at once
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
      std::unique_ptr<ServedModel> m;
      ModelOptions with_progress = mo;
      {
        std::lock_guard lock(models_mutex_);
        load_progress_ = LoadProgress{mo.path.empty() ? "(bundled default)" : mo.path, "opening", 0, 0};
      }
      with_progress.progress = [this](const char* stage, int64_t done, int64_t total) {
        std::lock_guard lock(models_mutex_);
        load_progress_.stage = stage;
        load_progress_.done = done;
        load_progress_.total = total;
      };
      try {
        m = std::make_unique<ServedModel>(with_progress, metrics_);
      } catch (const std::exception& e) {
        if (!mo.skip_if_unloadable) throw;
        log(LogLevel::Error, "{}: skipped, it does not load: {}", mo.path, e.what());
        continue;
      }
      const Placement& pl = m->engine().placement();
      log_event(LogLevel::Info, "model ready",
                {{"model", m->id()},
                 {"path", mo.path.empty() ? "(bundled default)" : mo.path},
                 {"load_s", std::round(std::chrono::duration<double>(
                                           std::chrono::steady_clock::now() - t0).count() * 100) / 100},
                 {"context", m->n_ctx()},
                 {"parallel", m->scheduler().options().parallel},
                 {"layers_on_cards", pl.n_layers_on_cards()},
                 {"layers", m->engine().config().n_layer},
                 {"kernels", m->engine().cpu_kernels_name()}});
      std::lock_guard lock(models_mutex_);
      for (const auto& other : models_)
        if (other->id() == m->id()) throw_error("two models are named '{}' (use -id)", m->id());
      models_.push_back(std::move(m));
    }
    {
      std::lock_guard lock(models_mutex_);
      if (models_.empty()) throw_error("no model could be loaded");
    }
    state_ = State::Ok;
    return;
  } catch (const std::exception& e) {
    std::lock_guard lock(models_mutex_);
    load_error_ = e.what();
  } catch (...) {
    std::lock_guard lock(models_mutex_);
    load_error_ = "unknown error";
  }
  // Serving nothing helps no one: the process ends with the reason (run() returns 1).
  log(LogLevel::Error, "loading failed: {}", load_error_);
  state_ = State::Error;
  draining_ = true;
  http_->begin_stop();
  http_->stop();
}

ServedModel& HttpServer::model_for(const std::string& name) {
  if (state_ == State::Loading)
    throw ApiError(503, "server_error", "the model is still loading; retry shortly", "",
                   "model_loading");
  if (state_ == State::Error)
    throw ApiError(503, "server_error", "the model failed to load; the server is stopping", "",
                   "model_load_failed");
  std::lock_guard lock(models_mutex_);
  if (name.empty()) return *models_.front();
  for (auto& m : models_)
    if (m->id() == name) return *m;
  throw ApiError(404, "invalid_request_error",
                 fmt::format("the model '{}' does not exist", name), "model", "model_not_found");
}

std::string HttpServer::read_body(const httplib::Request& req,
                                  const httplib::ContentReader& reader) {
  std::string body;
  bool too_large = false;
  const bool ok = reader([&](const char* data, size_t n) {
    if (body.size() + n > options_.max_body_bytes) {
      too_large = true;
      return false;  // stop reading: the rest is never buffered or inflated
    }
    body.append(data, n);
    return true;
  });
  Connection* c = Connection::current();
  if (c) c->request_complete();
  // A Content-Length past the limit is refused by httplib before any byte is read.
  const bool declared_too_large =
      req.has_header("Content-Length") &&
      req.get_header_value<uint64_t>("Content-Length") > options_.max_body_bytes;
  if (too_large || (!ok && declared_too_large)) {
    if (c) c->close_after_response();
    throw ApiError(413, "invalid_request_error",
                   fmt::format("the request body is larger than {} bytes (after decoding)",
                               options_.max_body_bytes),
                   "", "request_too_large");
  }
  if (!ok) {
    if (c) c->close_after_response();
    if (c && c->read_timed_out())
      throw ApiError(408, "invalid_request_error",
                     fmt::format("the request body did not arrive within {} ms",
                                 options_.connection.body_timeout_ms));
    throw ApiError(400, "invalid_request_error", "the request body could not be read");
  }
  return body;
}

void HttpServer::answer(httplib::Response& res, const std::function<void()>& body,
                        const std::string& path) {
  ++requests_in_flight_;
  try {
    body();
  } catch (const ApiError& e) {
    send_error_for(path, res, e);
  } catch (const app::RequestError& e) {
    send_error_for(path, res, api_error(e));
  } catch (const ModelOutputError& e) {
    // The request was fine; the model's numbers were not.
    send_error_for(path, res,
                   ApiError(500, "server_error",
                            fmt::format("the model's output is not usable: {}", e.what()), "",
                            "model_output_invalid"));
  } catch (const CapacityError& e) {
    // The request was fine; the server is full for now (the KV cache).
    send_error_for(path, res, server_busy(e));
  } catch (const Error& e) {
    // Errors from the tokenizer/template/engine about this request's content.
    send_error_for(path, res, ApiError(400, "invalid_request_error", e.what()));
  } catch (const std::exception& e) {
    send_error_for(path, res, ApiError(500, "server_error", e.what()));
  } catch (...) {
    send_error_for(path, res, ApiError(500, "server_error", "internal error"));
  }
  --requests_in_flight_;
}

void HttpServer::post_route(const char* path, PostHandler body) {
  http_->Post(path, [this, body](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
    size_t body_bytes = 0;
    answer(res, [&] {
      const std::string text = read_body(req, reader);
      body_bytes = text.size();
      body(req, text, res);
    }, req.path);
    // A large request leaves large free blocks in the malloc arenas: give them back.
    if (body_bytes > (size_t(256) << 10)) malloc_trim(0);
  });
}

namespace {

// The body once more with its keys in the client's order, when that order matters (a JSON
// Schema's properties are generated in it).
std::optional<nlohmann::ordered_json> ordered_twin(const nlohmann::json& body,
                                                   const std::string& text) {
  if (!needs_ordered_body(body)) return std::nullopt;
  return nlohmann::ordered_json::parse(text);
}

}  // namespace

void HttpServer::install_routes() {
  GuardedHttpServer& s = *http_;

  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    log_access(req, res);
  });

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    begin_access();
    // Only the routes that exist become label values: paths are the client's text.
    metrics_.add_counter(labelled("requests_total", "endpoint", route_label(req.path)));
    if (req.method != "POST")
      if (Connection* c = Connection::current()) c->request_complete();
    // A request answered here never has its body read: what follows on the connection may be
    // that body, which would be parsed as the next request (one smuggled past a 401). So the
    // connection ends with this response.
    auto handled = [&res] {
      res.set_header("Connection", "close");
      if (Connection* c = Connection::current()) c->close_after_response();
      return httplib::Server::HandlerResponse::Handled;
    };
    // Before authentication: a browser's preflight carries no credentials.
    if (apply_cors(req, res)) return handled();
    // The web chat's page loads without the key (it asks the user for it); nothing below
    // concerns a GET of a static file.
    if (is_webui_request(req)) return httplib::Server::HandlerResponse::Unhandled;
    const bool open = req.path == "/health" || req.path == "/metrics";
    // The key as OpenAI's clients send it, or as Anthropic's do (x-api-key).
    if (!options_.api_key.empty() && !open &&
        req.get_header_value("Authorization") != "Bearer " + options_.api_key &&
        req.get_header_value("x-api-key") != options_.api_key) {
      send_error_for(req.path, res,
                     ApiError(401, "invalid_request_error",
                              "missing or incorrect API key (send 'Authorization: Bearer KEY' "
                              "or 'x-api-key: KEY')",
                              "", "invalid_api_key"));
      return handled();
    }
    // The routes read JSON bodies; httplib would hand a multipart body to a reader set up for
    // one plain body (a 500, bad_function_call).
    if (req.is_multipart_form_data()) {
      send_error_for(req.path, res, ApiError(415, "invalid_request_error",
                               "multipart/form-data bodies are not accepted; send JSON "
                               "(Content-Type: application/json)",
                               "", "unsupported_media_type"));
      return handled();
    }
    if (draining_ && req.method == "POST") {
      send_error_for(req.path, res, ApiError(503, "server_error", "the server is shutting down",
                                             "", "shutting_down"));
      return handled();
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.status >= 400) metrics_.add_counter("requests_failed_total");
    if (!res.body.empty()) return;
    const char* type = res.status >= 500 ? "server_error" : "invalid_request_error";
    send_error_for(req.path, res, ApiError(res.status, type, status_text(res.status)));
  });

  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error_for(req.path, res, ApiError(500, "server_error", what));
  });

  auto post = [this](const char* path, auto body) {
    post_route(path, [body](const httplib::Request& req, const std::string& text,
                            httplib::Response& res) { body(req, text, res); });
  };

  install_utility_routes();
  install_anthropic_routes();

  post("/v1/completions", [this](const httplib::Request&, const std::string& text,
                                 httplib::Response& res) {
    const nlohmann::json body = parse_json_body(text);
    const auto ordered = ordered_twin(body, text);
    const CompletionRequest r = parse_completion_request(body, ordered ? &*ordered : nullptr);
    ServedModel& m = model_for(r.model);
    // A raw prompt: its special-token texts are tokens, as in llama-server.
    std::vector<int32_t> prompt = r.prompt_ids ? *r.prompt_ids : m.tokenize_raw_prompt(*r.prompt_text);
    auto job = make_job(m, std::move(prompt), r.options, false, false);
    ResponseInfo info{random_id("cmpl-"), unix_now(), m.id(), false, r.options.logprobs, {}};
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
  });

  post("/v1/chat/completions", [this](const httplib::Request&, const std::string& text,
                                      httplib::Response& res) {
    const nlohmann::json body = parse_json_body(text);
    const auto ordered = ordered_twin(body, text);
    const ChatRequest r = parse_chat_request(body, ordered ? &*ordered : nullptr);
    ServedModel& m = model_for(r.model);
    ResponseInfo info{random_id("chatcmpl-"), unix_now(), m.id(), true, r.options.logprobs, {}};
    auto job = make_chat_job(m, r, info);
    m.scheduler().submit(job);
    if (r.options.stream)
      return start_stream(res, job, info, r.options.include_usage, requests_in_flight_);
    send_json(res, 200, collect(*job, info, job->n, ""));
  });

  install_responses_routes();
  install_embedding_routes();

  post("/v1/systemone", [this](const httplib::Request&, const std::string& text,
                               httplib::Response& res) {
    const app::SystemOneRequest r = app::parse_systemone_request(parse_json_body(text));
    ServedModel& m = model_for(r.model);
    const app::SystemOneResult result = m.run_systemone(r);
    metrics_.add_counter("prompt_tokens_total", double(result.tokens_run));
    if (result.tokens_cached > 0) {
      metrics_.add_counter("prefix_cache_hits_total");
      metrics_.add_counter("prompt_tokens_cached_total", double(result.tokens_cached));
    }
    send_json(res, 200, app::systemone_response(r, result, m.id()));
  });

  install_webui_routes();
}

int HttpServer::run() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) throw_error("cannot bind {}: no free port", options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    throw_error("cannot bind {}:{} ({})", options_.host, port,
                errno == EADDRINUSE ? "the port is in use" : "not a local address");
  }
  log_event(LogLevel::Info, "listening",
            {{"url", fmt::format("http://{}:{}", options_.host, port)},
             {"version", version_text()},
             {"models", model_options_.size()},
             {"api_key", !options_.api_key.empty()},
             {"cors", fmt::format("{}", fmt::join(options_.cors_origins, ","))}});
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
  if (state_ == State::Error) {
    fmt::print(stderr, "jitllmd: {}\n", load_error_);
    return 1;
  }
  return 0;
}

void HttpServer::stop() {
  if (draining_.exchange(true)) return;
  log(LogLevel::Info, "draining: waiting for the requests in flight");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.drain_timeout_s);
  size_t busy = 0;
  while (true) {
    busy = size_t(std::max(0, requests_in_flight_.load()));
    {
      std::lock_guard lock(models_mutex_);
      for (auto& m : models_) busy += m->scheduler().in_flight();
    }
    if (busy == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (busy > 0) {
    // The deadline is the deadline: what is still running ends now (its clients get 503).
    log(LogLevel::Warn, "drain timeout: cancelling {} requests in flight", busy);
    std::lock_guard lock(models_mutex_);
    for (auto& m : models_) m->scheduler().stop(false);
  }
  // Connections still sending a request (or idle) end within a poll slice.
  http_->begin_stop();
  http_->stop();
}

}  // namespace jitllm::server
