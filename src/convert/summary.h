// What `jitllm info` shows about a model file or folder: architecture, hyperparameters, tensor
// bytes by format, the bytes one decoded token reads, tokenizer, chat template, and for a .jlm
// its container version, page groups and provenance. Computed from the same ConvertSource the
// converter reads, so a GGUF, a .jlm and an HF folder are described alike.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/source.h"

namespace jitllm {

struct FormatBytes {
  std::string format;  // "q8_0", "f32", ...
  size_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct ModelSummary {
  std::string path;
  std::string format;  // "gguf" | "jlm" | "hf"
  uint64_t file_bytes = 0;
  std::string architecture;
  std::string name;
  Metadata hyperparameters;  // "<arch>.*" keys
  size_t tensor_count = 0;
  uint64_t parameters = 0;
  std::vector<FormatBytes> by_format;  // most bytes first
  uint64_t tensor_bytes = 0;
  // Weights read to decode one token: every tensor, except that the embedding table contributes
  // one row (unless it is also the output head, tied), and expert tensors contribute
  // expert_used_count / expert_count of their bytes.
  uint64_t decode_bytes_per_token = 0;
  // Parameters one token runs, counted as decode_bytes_per_token counts bytes (equal to
  // `parameters` for a dense model with an output head).
  uint64_t active_parameters = 0;
  int64_t n_expert = 0, n_expert_used = 0;  // <arch>.expert_count / expert_used_count; 0: dense
  std::string tokenizer_model;  // tokenizer.ggml.model, "" if none
  size_t vocab_size = 0;
  bool chat_template = false;

  // .jlm only
  uint32_t container_version = 0;
  size_t group_count = 0;
  std::vector<std::pair<std::string, size_t>> groups_by_kind;
  Metadata provenance;
};

ModelSummary summarize_model(const ConvertSource& source);
// The weights read per token for these tensors and metadata (see ModelSummary).
uint64_t decode_bytes_per_token(const ConvertSource& source);
// The parameters one token runs (see ModelSummary::active_parameters).
uint64_t active_parameters(const ConvertSource& source);
nlohmann::json summary_to_json(const ModelSummary& summary);
std::string summary_to_text(const ModelSummary& summary);

}  // namespace jitllm
