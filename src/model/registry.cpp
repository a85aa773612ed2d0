// The family table: one line per family, each defined in its own model/archs/<family>.cpp.
#include "core/error.h"
#include "model/family.h"

namespace jitllm {

extern const Family kLlamaFamily;  // archs/llama.cpp
extern const Family kQwen3Family;  // archs/qwen3.cpp

namespace {

const Family* const kFamilies[] = {
    &kLlamaFamily,
    &kQwen3Family,
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
