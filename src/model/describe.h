// What makes a model's family and its file differ from plain llama, in words: for `jitllm info`
// and the logs ("gemma3: sliding window 1024 on 28 of 34 layers (RoPE base 10000 there), ...").
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace jitllm {

// The family's name and each quirk its Config and layer tensors carry, one phrase each (empty
// for a plain llama file).
struct FamilyDescription {
  std::string family;
  std::vector<std::string> quirks;
  // KV cache values one position keeps over all layers (what Family::layer_memory says: K and V
  // of every layer for the llama shape, MLA's latent and rope part for deepseek2).
  int64_t kv_values_per_token = 0;
};
FamilyDescription describe_family(const Config& c);

}  // namespace jitllm
