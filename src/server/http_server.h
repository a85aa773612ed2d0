// HttpServer: the OpenAI-compatible HTTP front end of jitllmd. HTTP threads authenticate, parse,
// validate, tokenize and enqueue; each model's Scheduler thread does the rest. Models load in the
// background after the port is bound, so /health answers "loading" meanwhile. Stopping drains:
// new generation requests get 503 while the ones in flight finish.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"
#include "server/served_model.h"

namespace httplib {
class Server;
}

namespace jitllm::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (written to port_file)
  std::string api_key;                 // "" = no authentication
  size_t max_body_bytes = size_t(4) << 20;
  int http_threads = 0;                // 0: 2 x the largest -parallel + 8
  std::string port_file;               // the bound port is written here once listening
  int drain_timeout_s = 120;           // SIGTERM waits this long for requests in flight
};

class HttpServer {
 public:
  // `models[0]` is the default model (requests without "model").
  HttpServer(ServerOptions options, std::vector<ModelOptions> models);
  ~HttpServer();

  // Binds, starts loading the models, serves until stop(); returns the process exit code.
  int run();
  // Refuses new work, waits for the requests in flight (up to drain_timeout_s), then stops.
  // Safe from any thread, once or more.
  void stop();

  Metrics& metrics() { return metrics_; }

 private:
  enum class State { Loading, Ok, Error };
  void load_models();
  void install_routes();
  ServedModel& model_for(const std::string& name);

  ServerOptions options_;
  std::vector<ModelOptions> model_options_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;

  std::mutex models_mutex_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::atomic<State> state_{State::Loading};
  std::string load_error_;
  std::thread loader_;
  std::atomic<bool> draining_{false};
  std::atomic<int> requests_in_flight_{0};
};

}  // namespace jitllm::server
