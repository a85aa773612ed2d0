#include "testutil/shared_data.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>
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

std::string family_fixture_dir(const std::string& family) {
  // The checkout the tests run in: $JITLLM_SOURCE_DIR where the binaries travelled (the GPU
  // machine's copy of the tree), else the one they were built from.
  const char* env = std::getenv("JITLLM_SOURCE_DIR");
  const std::string root = env && *env ? env : JITLLM_SOURCE_DIR;
  return root + "/tests/model/data/" + family + "-tiny";
}

std::string family_hf_folder(const std::string& family) {
  namespace fs = std::filesystem;
  // One folder per process: ctest runs the test cases of one fixture in parallel processes,
  // which must not rewrite the files another one is loading.
  const fs::path dir =
      fs::temp_directory_path() / ("jitllm-" + family + "-tiny-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(family_fixture_dir(family) + "/" + f, dir / f, fs::copy_options::overwrite_existing);
  for (const char* f : {"tokenizer.model", "tokenizer_config.json"})
    fs::copy_file(oracle_path(std::string("pydoc-llama/hf/") + f), dir / f,
                  fs::copy_options::overwrite_existing);
  return dir.string();
}

}  // namespace jitllm::testing
