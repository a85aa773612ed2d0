// Naming and placement rules of the .jlm container (see jlm_format.h).
#include "io/jlm_format.h"

#include <charconv>
#include <string_view>

namespace jitllm {

const char* jlm_group_kind_name(JlmGroupKind kind) {
  switch (kind) {
    case JlmGroupKind::Global: return "global";
    case JlmGroupKind::Embedding: return "embedding";
    case JlmGroupKind::Block: return "block";
    case JlmGroupKind::Expert: return "expert";
    case JlmGroupKind::Head: return "head";
  }
  return "unknown";
}

JlmPlacement jlm_place_tensor(const std::string& name, size_t n_dims) {
  const std::string_view n(name);
  JlmPlacement p;
  if (n.starts_with("blk.")) {
    const std::string_view rest = n.substr(4);
    int32_t block = -1;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), block);
    if (ec == std::errc() && end != rest.data() && end < rest.data() + rest.size() &&
        *end == '.' && block >= 0) {
      p.kind = JlmGroupKind::Block;
      p.block = block;
      // Experts are stacked on the last dimension ([n_embd, n_ff, n_expert] for matrices,
      // [n_ff, n_expert] for biases); one slice per expert page.
      p.split_experts = n.find("_exps.") != std::string_view::npos && n_dims >= 2;
      return p;
    }
    return p;  // "blk.x" without a number: a global tensor
  }
  if (n.starts_with("token_embd") || n.starts_with("position_embd") ||
      n.starts_with("token_types")) {
    p.kind = JlmGroupKind::Embedding;
  } else if (n.starts_with("output.") || n.starts_with("output_norm.")) {
    p.kind = JlmGroupKind::Head;
  }
  return p;
}

}  // namespace jitllm
