// HfFolder: finds and parses the files of a Hugging Face model folder (see hf_folder.h).
#include "io/hf_folder.h"

#include <filesystem>

#include "core/error.h"
#include "io/json_text.h"

namespace jitllm {

namespace {

std::optional<nlohmann::json> read_optional_object(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  nlohmann::json j = read_json_file(path.string());
  if (!j.is_object()) throw_error("{}: expected a JSON object, got {}", path.string(), j.type_name());
  return j;
}

}  // namespace

HfFolder HfFolder::open(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw_error("{}: not a folder", dir);
  const fs::path d(dir);
  HfFolder f;
  f.dir_ = dir;
  auto config = read_optional_object(d / "config.json");
  if (!config) throw_error("{}: no config.json; not a Hugging Face model folder", dir);
  f.config_ = std::move(*config);
  f.tokenizer_ = read_optional_object(d / "tokenizer.json");
  f.tokenizer_config_ = read_optional_object(d / "tokenizer_config.json");
  f.generation_config_ = read_optional_object(d / "generation_config.json");
  if (fs::exists(d / "tokenizer.model")) f.sentencepiece_model_ = (d / "tokenizer.model").string();
  f.weights_ = SafetensorsModel::open(dir);
  return f;
}

std::string HfFolder::architecture() const {
  if (auto it = config_.find("architectures");
      it != config_.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    return (*it)[0].get<std::string>();
  if (auto it = config_.find("model_type"); it != config_.end() && it->is_string())
    return it->get<std::string>();
  return "";
}

}  // namespace jitllm
