// HttpServer's web chat routes: GET / and every file of src/server/webui/ (webui_assets.h), open
// without the API key (the page holds no data; it asks the user for the key), cached by ETag,
// and sent with a Content-Security-Policy that lets the page load and call nothing but this
// server, so text the model writes can never pull in a script even if it reached the DOM.
#include <httplib.h>

#include <string>

#include "server/http_server.h"
#include "server/webui_assets.h"

namespace jitllm::server {

namespace {

// Scripts, styles and fetches from this origin only; no inline script, no plugins, no frames.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// An httplib route pattern (a regex) matching exactly `path`.
std::string exact_pattern(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '.' || c == '+' || c == '(' || c == ')' || c == '[' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

void send_asset(const httplib::Request& req, httplib::Response& res, const WebuiAsset& a) {
  res.set_header("ETag", a.etag);
  // Revalidated on every load: a new jitllmd binary brings a new page at once.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Content-Security-Policy", kContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
  if (req.get_header_value("If-None-Match") == a.etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type);
}

}  // namespace

bool HttpServer::is_webui_request(const httplib::Request& req) {
  return (req.method == "GET" || req.method == "HEAD") && find_webui_asset(req.path) != nullptr;
}

void HttpServer::install_webui_routes() {
  GuardedHttpServer& s = *http_;
  s.Get("/", [](const httplib::Request& req, httplib::Response& res) {
    send_asset(req, res, *find_webui_asset("/"));
  });
  for (const WebuiAsset& a : webui_assets()) {
    const WebuiAsset* asset = &a;
    s.Get(exact_pattern(a.path), [asset](const httplib::Request& req, httplib::Response& res) {
      send_asset(req, res, *asset);
    });
  }
}

}  // namespace jitllm::server
