// jitllmd's HTTP answers when the model's logits are NaN for one token (the sweep found it
// killed the process): a completion is 500 model_output_invalid, a stream ends with an error
// event, /v1/systemone is 500 (it was 400), and a clean prompt on the same server is 200.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "server/http_server.h"
#include "server/raw_http.h"
#include "server/scheduler_fixture.h"

namespace jitllm::server {
namespace {

using testing::RawClient;
using testing::status_of;

// POSTs `json` to `path` with Connection: close; the whole response text.
std::string post(int port, const std::string& path, const std::string& json) {
  RawClient c(port);
  EXPECT_TRUE(c.connected());
  c.send("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         "Connection: close\r\nContent-Length: " + std::to_string(json.size()) + "\r\n\r\n" + json);
  return c.read_all(30000);
}

TEST(HttpServerNaN, NaNLogitsAre500AndTheServerLivesOn) {
  Fixture clean(1);
  const int32_t poisoned = clean.tok->encode("The function returns", true).at(1);
  const std::string model = write_nan_embedding_model(poisoned);
  if (model.empty()) GTEST_SKIP() << "the fixture's token_embd type cannot be poisoned here";
  const std::string port_file = model + ".port";

  ServerOptions so;
  so.port = 0;
  so.port_file = port_file;
  ModelOptions mo;
  mo.path = model;
  mo.id = "nan";
  HttpServer server(so, {mo});
  std::thread serving([&] { server.run(); });
  int port = 0;
  for (int i = 0; i < 300 && !port; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ifstream(port_file) >> port;
  }
  ASSERT_GT(port, 0);
  std::string health;
  for (int i = 0; i < 300 && status_of(health) != 200; ++i) {
    RawClient c(port);
    c.send("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
    health = c.read_all(2000);
    if (status_of(health) != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(status_of(health), 200) << health;

  const std::string bad = post(port, "/v1/completions",
                               R"({"prompt": "The function returns", "max_tokens": 4})");
  EXPECT_EQ(status_of(bad), 500) << bad;
  EXPECT_NE(bad.find("model_output_invalid"), std::string::npos) << bad;

  const std::string stream = post(port, "/v1/completions",
                                  R"({"prompt": "The function returns", "max_tokens": 4, "stream": true})");
  EXPECT_EQ(status_of(stream), 200) << stream;
  EXPECT_NE(stream.find("data: {\"error\""), std::string::npos) << stream;
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos) << stream;

  const std::string decide = post(port, "/v1/systemone",
      R"({"state": "The function returns", "questions": {"q": {"type": "noul", "instructions": "ok?"}}})");
  EXPECT_EQ(status_of(decide), 500) << decide;

  const std::string good = post(port, "/v1/completions",
                                R"({"prompt": "A list is", "max_tokens": 4, "temperature": 0})");
  EXPECT_EQ(status_of(good), 200) << good;

  server.stop();
  serving.join();
  std::filesystem::remove(model);
  std::filesystem::remove(port_file);
}

}  // namespace
}  // namespace jitllm::server
