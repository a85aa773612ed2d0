// The web chat's files (src/server/webui/), embedded in the binary at build time by
// cmake/embed_webui.cmake, and the lookup of one by its URL path. Owns no routes: those are
// HttpServer::install_webui_routes (webui_routes.cpp).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace jitllm::server {

struct WebuiAsset {
  const char* path;          // URL path, "/index.html"
  const char* content_type;  // "text/html; charset=utf-8"
  const unsigned char* data;
  size_t size;               // bytes of data
  const char* etag;          // quoted, from the file's SHA-256: "\"1f0c...\""
};

// Generated (build/<preset>/generated/webui_assets.cpp): every file of src/server/webui/.
std::span<const WebuiAsset> webui_assets();

// The asset a GET of `path` answers with ("/" is "/index.html"); nullptr when none.
inline const WebuiAsset* find_webui_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebuiAsset& a : webui_assets())
    if (path == a.path) return &a;
  return nullptr;
}

}  // namespace jitllm::server
