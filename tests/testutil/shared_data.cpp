#include "testutil/shared_data.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace jitllm::testing {

std::string shared_dir() {
  if (const char* env = std::getenv("JITLLM_SHARED"); env && *env) return env;
  return std::string(JITLLM_SOURCE_DIR) + "/../shared";
}

std::string oracle_path(const std::string& relative) {
  const std::string path = shared_dir() + "/oracle/" + relative;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "oracle file missing: " << path << " (set JITLLM_SHARED)";
    throw std::runtime_error("oracle file missing: " + path);
  }
  return path;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> read_f32(const std::string& path) {
  const auto bytes = read_bytes(path);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::string read_text(const std::string& path) {
  const auto bytes = read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace jitllm::testing
