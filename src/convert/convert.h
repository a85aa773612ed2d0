// GGUF / .jlm / Hugging Face folder -> .jlm. Streams tensor by tensor from the source mapping into
// a JlmWriter (peak memory: about one tensor, twice when it is requantized), writes a temporary
// file of its own beside OUT and renames it to OUT at the end; an error, a cancel or a thrown hook
// leaves nothing at OUT, and two converts to one OUT each leave a whole file (the last one wins).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "convert/quant_mix.h"
#include "convert/source.h"
#include "io/jlm_format.h"
#include "quant/types.h"

namespace jitllm {

struct ConvertProgress {
  size_t index = 0;  // tensors done so far (1-based after a tensor)
  size_t count = 0;
  std::string tensor;
  uint64_t bytes_done = 0;  // output bytes written
  uint64_t bytes_total = 0;
};

struct ConvertOptions {
  ConvertTarget target;  // default: keep the source's formats
  SourceOptions source;
  std::function<void(const ConvertProgress&)> progress;  // called after each tensor
  const std::atomic<bool>* cancel = nullptr;             // checked before each tensor
  // Test hook: called after tensor `index` was written (throwing from it aborts the convert).
  std::function<void(size_t index)> after_tensor;
};

struct ConvertResult {
  std::string output;
  size_t tensors = 0;
  size_t groups = 0;
  uint64_t source_bytes = 0;
  uint64_t output_bytes = 0;
  size_t requantized = 0;  // tensors whose format changed
  struct Tensor {
    std::string name;
    QuantType from = QuantType::F32, to = QuantType::F32;
    std::string reason;  // why `to` is not the target's base format ("" when it is)
    uint64_t bytes = 0;  // in the output
  };
  std::vector<Tensor> plan;  // every tensor, in the source's order
};

ConvertResult convert_to_jlm(const std::string& input, const std::string& output,
                             const ConvertOptions& options = {});
// Same, from an already opened source.
ConvertResult convert_source_to_jlm(const ConvertSource& source, const std::string& output,
                                    const ConvertOptions& options = {});

}  // namespace jitllm
