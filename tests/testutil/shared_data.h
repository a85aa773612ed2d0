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

// The committed tiny transformers model of a family (tests/model/data/<family>-tiny: config,
// weights, reference.json, logits.<i>.f32) ...
std::string family_fixture_dir(const std::string& family);
// ... as a Hugging Face folder in the temp dir: its config and weights with pydoc-llama's
// SentencePiece tokenizer from the oracle (same 2048-token vocabulary; the logits do not depend
// on it).
std::string family_hf_folder(const std::string& family);

}  // namespace jitllm::testing
