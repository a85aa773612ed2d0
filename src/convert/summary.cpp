// ModelSummary for `jitllm info` (see summary.h).
#include "convert/summary.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "io/jlm_reader.h"

namespace jitllm {
namespace {

uint64_t tensor_bytes(const SourceTensor& t) {
  int64_t rows = 1;
  for (size_t d = 1; d < t.shape.size(); ++d) rows *= t.shape[d];
  return row_bytes(t.type, t.shape[0]) * uint64_t(rows);
}

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30)) return fmt::format("{:.2f} GiB", double(bytes) / double(1 << 30));
  if (bytes >= (uint64_t(1) << 20)) return fmt::format("{:.2f} MiB", double(bytes) / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", double(bytes) / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string value_text(const Value& v) {
  switch (v.type()) {
    case ValueType::String: return v.as_string();
    case ValueType::F32: return fmt::format("{}", float(v.as_f64()));
    default: return v.to_json(8).dump();
  }
}

}  // namespace

namespace {

// Sums over the tensors what one token reads of each: one row of an embedding table (unless it
// is also the output head), expert_used_count / expert_count of an expert stack, all of the rest.
// `whole(t)` and `row(t)` measure a tensor and one of its rows (in bytes or in elements).
template <class Whole, class Row>
uint64_t per_token(const ConvertSource& source, Whole whole, Row row) {
  const Metadata& m = source.metadata;
  const std::string arch = m.get_string_or("general.architecture", "");
  const int64_t n_expert = m.get_i64_or(arch + ".expert_count", 0);
  const int64_t n_used = m.get_i64_or(arch + ".expert_used_count", n_expert);
  bool has_output = false;
  for (const SourceTensor& t : source.tensors) has_output |= t.name == "output.weight";
  uint64_t total = 0;
  for (const SourceTensor& t : source.tensors) {
    const uint64_t all = whole(t);
    const bool embedding_table = t.name == "token_embd.weight" || t.name == "position_embd.weight" ||
                                 t.name == "token_types.weight";
    if (embedding_table && !(t.name == "token_embd.weight" && !has_output)) {
      total += row(t);  // one row per token
    } else if (t.name.find("_exps.") != std::string::npos && n_expert > 0 && t.shape.size() >= 2) {
      total += all / uint64_t(n_expert) * uint64_t(n_used);
    } else {
      total += all;
    }
  }
  return total;
}

uint64_t elements_of(const SourceTensor& t) {
  uint64_t n = 1;
  for (const int64_t d : t.shape) n *= uint64_t(d);
  return n;
}

}  // namespace

uint64_t decode_bytes_per_token(const ConvertSource& source) {
  return per_token(
      source, [](const SourceTensor& t) { return tensor_bytes(t); },
      [](const SourceTensor& t) { return uint64_t(row_bytes(t.type, t.shape[0])); });
}

uint64_t active_parameters(const ConvertSource& source) {
  return per_token(source, elements_of, [](const SourceTensor& t) { return uint64_t(t.shape[0]); });
}

ModelSummary summarize_model(const ConvertSource& source) {
  ModelSummary s;
  s.path = source.path;
  s.format = source.format;
  s.file_bytes = source.source_bytes;
  const Metadata& m = source.metadata;
  s.architecture = m.get_string_or("general.architecture", "");
  s.name = m.get_string_or("general.name", "");
  for (const auto& [key, value] : m.entries())
    if (!s.architecture.empty() && key.starts_with(s.architecture + ".")) s.hyperparameters.set(key, value);
  s.tensor_count = source.tensors.size();
  std::map<std::string, FormatBytes> formats;
  for (const SourceTensor& t : source.tensors) {
    FormatBytes& f = formats[quant_name(t.type)];
    f.format = quant_name(t.type);
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    f.tensors += 1;
    f.elements += uint64_t(elements);
    f.bytes += tensor_bytes(t);
    s.parameters += uint64_t(elements);
    s.tensor_bytes += tensor_bytes(t);
  }
  for (auto& [_, f] : formats) s.by_format.push_back(f);
  std::sort(s.by_format.begin(), s.by_format.end(),
            [](const FormatBytes& a, const FormatBytes& b) { return a.bytes > b.bytes; });
  s.decode_bytes_per_token = decode_bytes_per_token(source);
  s.active_parameters = active_parameters(source);
  s.n_expert = m.get_i64_or(s.architecture + ".expert_count", 0);
  s.n_expert_used = m.get_i64_or(s.architecture + ".expert_used_count", s.n_expert);
  s.tokenizer_model = m.get_string_or("tokenizer.ggml.model", "");
  if (const Value* tokens = m.find("tokenizer.ggml.tokens"); tokens && tokens->type() == ValueType::Array)
    s.vocab_size = tokens->as_array().items.size();
  s.chat_template = m.has("tokenizer.chat_template");
  if (source.format == "jlm") {
    const JlmFile f = JlmFile::open(source.path);
    s.file_bytes = f.file_bytes();
    s.container_version = f.version();
    s.group_count = f.groups().size();
    std::map<std::string, size_t> kinds;
    for (const JlmGroup& g : f.groups()) kinds[jlm_group_kind_name(g.kind)] += 1;
    s.groups_by_kind.assign(kinds.begin(), kinds.end());
    s.provenance = f.source();
  }
  return s;
}

nlohmann::json summary_to_json(const ModelSummary& s) {
  nlohmann::json j;
  j["path"] = s.path;
  j["format"] = s.format;
  j["file_bytes"] = s.file_bytes;
  j["architecture"] = s.architecture;
  j["name"] = s.name;
  j["hyperparameters"] = nlohmann::json::object();
  for (const auto& [key, value] : s.hyperparameters.entries()) j["hyperparameters"][key] = value.to_json(16);
  j["tensor_count"] = s.tensor_count;
  j["parameters"] = s.parameters;
  j["tensor_bytes"] = s.tensor_bytes;
  j["decode_bytes_per_token"] = s.decode_bytes_per_token;
  j["active_parameters"] = s.active_parameters;
  if (s.n_expert > 0) j["experts"] = {{"count", s.n_expert}, {"used", s.n_expert_used}};
  j["by_format"] = nlohmann::json::array();
  for (const FormatBytes& f : s.by_format)
    j["by_format"].push_back(
        {{"format", f.format}, {"tensors", f.tensors}, {"elements", f.elements}, {"bytes", f.bytes}});
  j["tokenizer"] = {{"model", s.tokenizer_model}, {"vocab_size", s.vocab_size}};
  j["chat_template"] = s.chat_template;
  if (s.format == "jlm") {
    nlohmann::json groups = nlohmann::json::object();
    for (const auto& [kind, n] : s.groups_by_kind) groups[kind] = n;
    j["container"] = {{"version", s.container_version}, {"groups", s.group_count},
                      {"groups_by_kind", groups}, {"source", s.provenance.to_json(8)}};
  }
  return j;
}

std::string summary_to_text(const ModelSummary& s) {
  std::string out;
  auto line = [&](const std::string& label, const std::string& value) {
    out += fmt::format("{:<24}{}\n", label + ":", value);
  };
  line("file", fmt::format("{} ({}, {})", s.path, s.format, human_bytes(s.file_bytes)));
  line("architecture", s.architecture.empty() ? "(none)" : s.architecture);
  if (!s.name.empty()) line("name", s.name);
  if (!s.hyperparameters.entries().empty()) {
    out += "hyperparameters:\n";
    for (const auto& [key, value] : s.hyperparameters.entries())
      out += fmt::format("  {:<44} {}\n", key, value_text(value));
  }
  line("tensors", fmt::format("{} ({:.2f} M parameters)", s.tensor_count, double(s.parameters) / 1e6));
  out += fmt::format("  {:<8} {:>8} {:>14} {:>14} {:>7}\n", "format", "tensors", "elements", "bytes",
                     "share");
  for (const FormatBytes& f : s.by_format)
    out += fmt::format("  {:<8} {:>8} {:>14} {:>14} {:>6.1f}%\n", f.format, f.tensors, f.elements,
                       f.bytes, s.tensor_bytes ? 100.0 * double(f.bytes) / double(s.tensor_bytes) : 0.0);
  out += fmt::format("  {:<8} {:>8} {:>14} {:>14}\n", "total", s.tensor_count, s.parameters,
                     s.tensor_bytes);
  line("tensor bytes", human_bytes(s.tensor_bytes));
  line("decode bytes/token", fmt::format("{} ({} bytes)", human_bytes(s.decode_bytes_per_token),
                                         s.decode_bytes_per_token));
  line("active parameters", fmt::format("{:.2f} M a token{}", double(s.active_parameters) / 1e6,
                                        s.n_expert > 0 ? fmt::format(" ({} of {} experts)",
                                                                     s.n_expert_used, s.n_expert)
                                                       : std::string()));
  line("tokenizer", s.tokenizer_model.empty() ? "(none)"
                                              : fmt::format("{}, {} tokens", s.tokenizer_model, s.vocab_size));
  line("chat template", s.chat_template ? "yes" : "no");
  if (s.format == "jlm") {
    std::string kinds;
    for (const auto& [kind, n] : s.groups_by_kind) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, kind);
    line("container", fmt::format("jlm version {}, {} page groups ({})", s.container_version,
                                  s.group_count, kinds));
    line("converted from", fmt::format("{} ({}, type {})", s.provenance.get_string_or("source.path", "?"),
                                       s.provenance.get_string_or("source.format", "?"),
                                       s.provenance.get_string_or("convert.type", "?")));
  }
  return out;
}

}  // namespace jitllm
