// Test helper: the oracle's vocab-only GGUFs opened once per test binary.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "io/gguf.h"
#include "testutil/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::testing {

// "llama-spm" -> tokenizer of oracle/tokenizer/ggml-vocab-llama-spm.gguf
inline const Tokenizer& oracle_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    const GgufFile file = GgufFile::open(oracle_path("tokenizer/ggml-vocab-" + name + ".gguf"));
    slot = std::make_unique<Tokenizer>(file.metadata());
  }
  return *slot;
}

inline Metadata oracle_vocab_metadata(const std::string& name) {
  return GgufFile::open(oracle_path("tokenizer/ggml-vocab-" + name + ".gguf")).metadata();
}

// The common test input's strings (test-tokenizer-0 format) and their expected ids.
inline std::vector<std::string> oracle_inputs() {
  const std::string inp = read_text(oracle_path("tokenizer/ggml-vocab-llama-spm.gguf.inp"));
  static const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> tests;
  for (size_t pos = 0, next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size())
    tests.push_back(inp.substr(pos, next - pos));
  return tests;
}

}  // namespace jitllm::testing
