// The HF architectures the converter knows: config.json names -> one HfArchitecture per family
// file (hf_llama.cpp, hf_qwen2.cpp, hf_qwen3.cpp, hf_gemma.cpp, hf_phi3.cpp, hf_olmo2.cpp,
// hf_olmoe.cpp, hf_gpt_oss.cpp, hf_deepseek2.cpp).
#include "convert/hf_arch.h"

namespace jitllm {

extern const HfArchitecture kHfLlama;   // hf_llama.cpp
extern const HfArchitecture kHfQwen2;   // hf_qwen2.cpp
extern const HfArchitecture kHfQwen3;   // hf_qwen3.cpp
extern const HfArchitecture kHfGemma;   // hf_gemma.cpp
extern const HfArchitecture kHfGemma2;  // hf_gemma.cpp
extern const HfArchitecture kHfGemma3;  // hf_gemma.cpp
extern const HfArchitecture kHfPhi3;    // hf_phi3.cpp
extern const HfArchitecture kHfOlmo2;   // hf_olmo2.cpp
extern const HfArchitecture kHfQwen2Moe;  // hf_qwen2.cpp
extern const HfArchitecture kHfQwen3Moe;  // hf_qwen3.cpp
extern const HfArchitecture kHfOlmoe;     // hf_olmoe.cpp
extern const HfArchitecture kHfGptOss;    // hf_gpt_oss.cpp
extern const HfArchitecture kHfBert;      // hf_bert.cpp
extern const HfArchitecture kHfLfm2;      // hf_lfm2.cpp
extern const HfArchitecture kHfDeepseek2; // hf_deepseek2.cpp

namespace {

struct Entry {
  const char* hf_name;
  const HfArchitecture* arch;
};

// "architectures"[0] names first; model_type names for configs without them. model_type "gemma3"
// is the multimodal checkpoint (its text model nested in text_config): not listed.
const Entry kEntries[] = {
    {"LlamaForCausalLM", &kHfLlama},   {"MistralForCausalLM", &kHfLlama},
    {"MixtralForCausalLM", &kHfLlama}, {"Qwen2ForCausalLM", &kHfQwen2},
    {"Qwen3ForCausalLM", &kHfQwen3},   {"GemmaForCausalLM", &kHfGemma},
    {"Gemma2ForCausalLM", &kHfGemma2}, {"Gemma3ForCausalLM", &kHfGemma3},
    {"Phi3ForCausalLM", &kHfPhi3},     {"Olmo2ForCausalLM", &kHfOlmo2},
    {"llama", &kHfLlama},              {"mistral", &kHfLlama},
    {"mixtral", &kHfLlama},            {"qwen2", &kHfQwen2},
    {"qwen3", &kHfQwen3},              {"gemma", &kHfGemma},
    {"gemma2", &kHfGemma2},            {"gemma3_text", &kHfGemma3},
    {"phi3", &kHfPhi3},                {"olmo2", &kHfOlmo2},
    {"Qwen2MoeForCausalLM", &kHfQwen2Moe}, {"Qwen3MoeForCausalLM", &kHfQwen3Moe},
    {"OlmoeForCausalLM", &kHfOlmoe},       {"qwen2_moe", &kHfQwen2Moe},
    {"qwen3_moe", &kHfQwen3Moe},           {"olmoe", &kHfOlmoe},
    {"GptOssForCausalLM", &kHfGptOss},     {"gpt_oss", &kHfGptOss},
    {"BertModel", &kHfBert},               {"BertForMaskedLM", &kHfBert},
    {"BertForSequenceClassification", &kHfBert}, {"bert", &kHfBert},
    {"Lfm2ForCausalLM", &kHfLfm2},         {"lfm2", &kHfLfm2},
    {"DeepseekV2ForCausalLM", &kHfDeepseek2}, {"DeepseekV3ForCausalLM", &kHfDeepseek2},
    {"deepseek_v2", &kHfDeepseek2},           {"deepseek_v3", &kHfDeepseek2},
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
    if (std::string(e.hf_name).ends_with("ForCausalLM") || std::string(e.hf_name).starts_with("Bert"))
      out.push_back(e.hf_name);
  return out;
}

}  // namespace jitllm
