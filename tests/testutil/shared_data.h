// Locating the reference data in ../shared/oracle (override with JITLLM_SHARED).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitllm::testing {

// The shared/ folder: $JITLLM_SHARED, else <source dir>/../shared.
std::string shared_dir();
// shared_dir() + "/oracle/" + relative. Fails the calling test (and throws) when it is missing.
std::string oracle_path(const std::string& relative);
// Whole file as bytes / as little-endian float32.
std::vector<uint8_t> read_bytes(const std::string& path);
std::vector<float> read_f32(const std::string& path);
std::string read_text(const std::string& path);

}  // namespace jitllm::testing
