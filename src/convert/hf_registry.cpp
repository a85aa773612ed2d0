// The HF architectures the converter knows: config.json names -> one HfArchitecture per family
// file (hf_llama.cpp, hf_qwen3.cpp).
#include "convert/hf_arch.h"

namespace jitllm {

extern const HfArchitecture kHfLlama;  // hf_llama.cpp
extern const HfArchitecture kHfQwen3;  // hf_qwen3.cpp

namespace {

struct Entry {
  const char* hf_name;
  const HfArchitecture* arch;
};

const Entry kEntries[] = {
    {"LlamaForCausalLM", &kHfLlama},   {"MistralForCausalLM", &kHfLlama},
    {"MixtralForCausalLM", &kHfLlama}, {"llama", &kHfLlama},
    {"mistral", &kHfLlama},            {"mixtral", &kHfLlama},
    {"Qwen3ForCausalLM", &kHfQwen3},   {"qwen3", &kHfQwen3},
};

}  // namespace

const HfArchitecture* find_hf_architecture(const std::string& name) {
  for (const Entry& e : kEntries)
    if (name == e.hf_name) return e.arch;
  return nullptr;
}

std::vector<std::string> supported_hf_architectures() {
  std::vector<std::string> out;
  for (const Entry& e : kEntries)
    if (std::string(e.hf_name).ends_with("ForCausalLM")) out.push_back(e.hf_name);
  return out;
}

}  // namespace jitllm
