// The family table: one line per family, each defined in its own model/archs/<family>.cpp.
#include "core/error.h"
#include "model/family.h"

namespace jitllm {

extern const Family kLlamaFamily;   // archs/llama.cpp
extern const Family kQwen2Family;   // archs/qwen2.cpp
extern const Family kQwen3Family;   // archs/qwen3.cpp
extern const Family kGemmaFamily;   // archs/gemma.cpp
extern const Family kGemma2Family;  // archs/gemma2.cpp
extern const Family kGemma3Family;  // archs/gemma3.cpp
extern const Family kPhi3Family;    // archs/phi3.cpp
extern const Family kOlmo2Family;   // archs/olmo2.cpp
extern const Family kQwen2MoeFamily;  // archs/qwen2moe.cpp
extern const Family kQwen3MoeFamily;  // archs/qwen3moe.cpp
extern const Family kOlmoeFamily;     // archs/olmoe.cpp
extern const Family kGptOssFamily;    // archs/gpt_oss.cpp
extern const Family kBertFamily;      // archs/bert.cpp
extern const Family kLfm2Family;      // archs/lfm2.cpp
extern const Family kDeepseek2Family; // archs/deepseek2.cpp

namespace {

const Family* const kFamilies[] = {
    &kLlamaFamily, &kQwen2Family, &kQwen3Family, &kGemmaFamily,
    &kGemma2Family, &kGemma3Family, &kPhi3Family, &kOlmo2Family,
    &kQwen2MoeFamily, &kQwen3MoeFamily, &kOlmoeFamily, &kGptOssFamily,
    &kBertFamily, &kLfm2Family,
    &kDeepseek2Family,
};

}  // namespace

std::span<const Family* const> families() { return kFamilies; }

const Family* find_family(const std::string& arch) {
  for (const Family* f : kFamilies)
    for (const std::string& a : f->archs)
      if (a == arch) return f;
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const Family* f : kFamilies) {
    if (!out.empty()) out += "; ";
    out += std::string(f->name) + " (";
    for (size_t i = 0; i < f->archs.size(); ++i) out += (i ? ", " : "") + f->archs[i];
    out += ")";
  }
  return out;
}

}  // namespace jitllm
