// HttpServer: the OpenAI-compatible HTTP front end of jitllmd. HTTP threads authenticate, parse,
// validate, tokenize and enqueue; each model's Scheduler thread does the rest. Models load in the
// background after the port is bound (exclusively: a taken port is an error), so /health answers
// "loading" meanwhile; a model that fails to load ends run() with exit code 1, except the ones
// found in a -models folder, which are skipped with a log line. Stopping drains: new generation
// requests get 503 while the ones in flight finish, until drain_timeout_s; then they are
// cancelled. Connections are handled by GuardedHttpServer (http_connection.h): deadlines, head
// checks, a cap per client address; request bodies are counted as they are decoded (chunked,
// gzip) and refused with 413 past max_body_bytes.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"
#include "server/served_model.h"

#include "server/http_connection.h"

namespace jitllm::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (written to port_file)
  std::string api_key;                 // "" = no authentication
  size_t max_body_bytes = size_t(4) << 20;
  int http_threads = 0;                // 0: 2 x the largest -parallel + 8
  std::string port_file;               // the bound port is written here once listening
  int drain_timeout_s = 120;           // SIGTERM waits this long for requests in flight
  ConnectionLimits connection;         // deadlines, head sizes, connections per client address
  // Origins a browser page may call from (CORS); "*" opens to all; empty: same origin only.
  std::vector<std::string> cors_origins;
};

class HttpServer {
 public:
  // `models[0]` is the default model (requests without "model").
  HttpServer(ServerOptions options, std::vector<ModelOptions> models);
  ~HttpServer();

  // Binds, starts loading the models, serves until stop(); returns the process exit code (1 when
  // a model failed to load). Throws jitllm::Error when the port cannot be bound.
  int run();
  // Refuses new work, waits for the requests in flight (up to drain_timeout_s), then stops.
  // Safe from any thread, once or more.
  void stop();

  Metrics& metrics() { return metrics_; }
  // The routes without a listening socket: GuardedHttpServer::serve_socket on a connected one
  // (tests, fuzz/fuzz_http_request.cpp). Before run(), no model is loaded: routes that need one
  // answer 503 after validating the request.
  GuardedHttpServer& http() { return *http_; }

 private:
  enum class State { Loading, Ok, Error };
  void load_models();
  // GET / and the web chat's files (webui_routes.cpp); a GET or HEAD of one of them is a web chat
  // request, open without the API key.
  void install_webui_routes();
  static bool is_webui_request(const httplib::Request& req);
  void install_routes();
  // /tokenize, /detokenize, /props, /slots, /health, /metrics, /v1/models (utility_routes.cpp).
  void install_utility_routes();
  // /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API (anthropic_routes.cpp).
  void install_anthropic_routes();
  // POST /v1/responses and the stored-response routes it implies (responses_routes.cpp).
  void install_responses_routes();
  // POST /v1/embeddings and /v1/rerank (embedding_routes.cpp).
  void install_embedding_routes();
  // CORS preflight and headers; true when the request was answered (a preflight).
  bool apply_cors(const httplib::Request& req, httplib::Response& res) const;
  // Reads the body of a POST (counting decoded bytes, so chunked and gzip bodies meet the same
  // limit); throws ApiError 413 / 408 / 400.
  std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader);
  // Runs a route's body, answering its exceptions in the error shape of `path`'s API (OpenAI's,
  // or Anthropic's on /v1/messages): ApiError as it is, ModelOutputError 500, other
  // jitllm::Error 400, anything else 500; counts it in flight.
  void answer(httplib::Response& res, const std::function<void()>& body,
              const std::string& path = "");
  // A POST route: the body read under the limits (read_body), then `body`, through answer().
  using PostHandler =
      std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  void post_route(const char* path, PostHandler body);
  ServedModel& model_for(const std::string& name);

  ServerOptions options_;
  std::vector<ModelOptions> model_options_;
  Metrics metrics_;
  std::unique_ptr<GuardedHttpServer> http_;

  std::mutex models_mutex_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::atomic<State> state_{State::Loading};
  std::string load_error_;
  // What loading is doing (under models_mutex_): the model, the stage, the parts done of all.
  struct LoadProgress {
    std::string model, stage = "opening";
    int64_t done = 0, total = 0;
  } load_progress_;
  std::thread loader_;
  std::atomic<bool> draining_{false};
  std::atomic<int> requests_in_flight_{0};
};

}  // namespace jitllm::server
