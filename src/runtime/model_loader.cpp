// load_model_file: -m resolution and opening.
#include "runtime/model_loader.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace jitllm {

namespace fs = std::filesystem;

std::string default_model_path() {
  if (const char* env = std::getenv("JITLLM_DEFAULT_MODEL"); env && *env) return env;
  return std::string(JITLLM_SOURCE_DIR) + "/models/demo";
}

std::shared_ptr<const ModelFile> load_model_file(const std::string& path_arg) {
  const bool is_default = path_arg.empty();
  std::string path = is_default ? default_model_path() : path_arg;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (is_default)
      throw_error("no model given (-m) and the bundled default model {} does not exist yet; "
                  "pass -m MODEL.gguf", path);
    throw_error("{}: no such file or directory", path);
  }
  if (fs::is_directory(path, ec)) {
    // A folder: a ready .jlm or .gguf inside it is used directly.
    for (const char* ext : {".jlm", ".gguf"})
      for (const auto& entry : fs::directory_iterator(path, ec))
        if (entry.is_regular_file() && entry.path().extension() == ext)
          return std::make_shared<const ModelFile>(open_model_file(entry.path().string()));
    throw_error("{}: a Hugging Face folder must be converted first (`jitllm convert {} OUT.jlm`)",
                path, path);
  }
  return std::make_shared<const ModelFile>(open_model_file(path));
}

}  // namespace jitllm
