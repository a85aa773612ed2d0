// A Hugging Face model folder: config.json (required), the optional tokenizer and generation
// files, and the weights (model.safetensors or a sharded set with model.safetensors.index.json).
// It only reads and validates the files; mapping HF names and hyperparameters onto GGUF's is the
// converter's job (convert/).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/safetensors.h"

namespace jitllm {

class HfFolder {
 public:
  // Throws naming the folder when config.json or the weights are missing, or naming the file and
  // byte offset when a JSON file does not parse.
  static HfFolder open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }  // an object
  // "architectures"[0] of config.json ("LlamaForCausalLM"), else "model_type", else "".
  std::string architecture() const;

  // Present only when the file exists (each parsed and checked to be a JSON object).
  const std::optional<nlohmann::json>& tokenizer() const { return tokenizer_; }  // tokenizer.json
  const std::optional<nlohmann::json>& tokenizer_config() const { return tokenizer_config_; }
  const std::optional<nlohmann::json>& generation_config() const { return generation_config_; }
  // Path of a SentencePiece tokenizer.model when the folder has one.
  const std::optional<std::string>& sentencepiece_model() const { return sentencepiece_model_; }

  const SafetensorsModel& weights() const { return weights_; }

 private:
  std::string dir_;
  nlohmann::json config_;
  std::optional<nlohmann::json> tokenizer_;
  std::optional<nlohmann::json> tokenizer_config_;
  std::optional<nlohmann::json> generation_config_;
  std::optional<std::string> sentencepiece_model_;
  SafetensorsModel weights_;
};

}  // namespace jitllm
