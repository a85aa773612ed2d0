// create_model: the architecture registry.
#include "model/model.h"

#include "core/error.h"
#include "model/llama.h"

namespace jitllm {

std::unique_ptr<Model> create_model(std::shared_ptr<const ModelFile> file) {
  try {
    Config config = config_from_metadata(file->metadata);
    if (is_llama_family(config.arch)) return std::make_unique<LlamaModel>(file, std::move(config));
    throw_error("architecture '{}' is not supported", config.arch);
  } catch (const Error& e) {
    rethrow_with_context(e, file->path);
  }
}

}  // namespace jitllm
