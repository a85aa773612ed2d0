// A Hugging Face folder written by a test: config.json plus one model.safetensors of random
// tensors (normal, sigma 0.05) in F32, F16 or BF16, removed again when the writer goes.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fp16.h"

namespace jitllm::testing {

struct HfTensor {
  std::string name;
  std::string dtype;           // "F32" | "F16" | "BF16"
  std::vector<int64_t> shape;  // safetensors (row-major) order
  std::vector<uint8_t> bytes;
};

class HfFolderWriter {
 public:
  explicit HfFolderWriter(const std::string& test) {
    dir_ = std::filesystem::temp_directory_path() /
           ("jlm_hf_" + std::to_string(::getpid()) + "_" + test);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~HfFolderWriter() { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  std::string file(const std::string& n) const { return (dir_ / n).string(); }

  void add(const std::string& name, std::vector<int64_t> shape, const std::string& dtype = "F32") {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    HfTensor t{name, dtype, std::move(shape), {}};
    std::normal_distribution<float> normal(0.f, 0.05f);
    for (size_t i = 0; i < n; ++i) {
      const float v = normal(rng_);
      if (dtype == "BF16" || dtype == "F16") {
        const uint16_t h = dtype == "BF16" ? f32_to_bf16(v) : f32_to_fp16(v);
        t.bytes.insert(t.bytes.end(), reinterpret_cast<const uint8_t*>(&h),
                       reinterpret_cast<const uint8_t*>(&h) + 2);
      } else {
        t.bytes.insert(t.bytes.end(), reinterpret_cast<const uint8_t*>(&v),
                       reinterpret_cast<const uint8_t*>(&v) + 4);
      }
    }
    tensors_.push_back(std::move(t));
  }
  // A tensor of given bytes (any dtype the test means, e.g. "U8" MXFP4 blocks).
  void add_bytes(const std::string& name, std::vector<int64_t> shape, const std::string& dtype,
                 std::vector<uint8_t> bytes) {
    tensors_.push_back(HfTensor{name, dtype, std::move(shape), std::move(bytes)});
  }
  const std::vector<HfTensor>& tensors() const { return tensors_; }
  const HfTensor& tensor(const std::string& name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return t;
    throw std::runtime_error("no " + name);
  }

  void write(const nlohmann::json& config) {
    std::ofstream(file("config.json")) << config.dump(2);
    nlohmann::json header = nlohmann::json::object();
    size_t offset = 0;
    for (const auto& t : tensors_) {
      header[t.name] = {{"dtype", t.dtype},
                        {"shape", t.shape},
                        {"data_offsets", {offset, offset + t.bytes.size()}}};
      offset += t.bytes.size();
    }
    const std::string text = header.dump();
    std::ofstream out(file("model.safetensors"), std::ios::binary);
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text;
    for (const auto& t : tensors_)
      out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
  }

 private:
  std::filesystem::path dir_;
  std::vector<HfTensor> tensors_;
  std::mt19937 rng_{3};
};

}  // namespace jitllm::testing
