// `jitllm info MODEL [--verify] [--json]`: what a .gguf, a .jlm or a Hugging Face folder holds
// (architecture, hyperparameters, bytes by format, decode bytes per token, tokenizer, chat
// template, container groups). --verify checks every .jlm checksum (exit 1 on a mismatch).
// `jitllm info --tuning [--json]`: every JITLLM_* setting of every registry (core/tuning.h) with
// its default, current value, allowed values and doc; exit 1 naming each bad value.
#include <fmt/format.h>

#include "cli/command.h"
#include "convert/source.h"
#include "convert/summary.h"
#include "core/error.h"
#include "core/tuning.h"
#include "io/hf_folder.h"
#include "io/jlm_reader.h"
#include "model/config.h"
#include "model/describe.h"
#include "tokenizer/hf_tokenizer.h"

namespace jitllm::cli {
namespace {

struct InfoArgs {
  std::string model;
  bool verify = false;
  bool json = false;
  bool tuning = false;
};

int run_tuning(bool as_json) {
  nlohmann::json all = nlohmann::json::array();
  std::string text, errors;
  for (const tuning::Registry* r : tuning::registries()) {
    text += fmt::format("{}:\n", r->name());
    for (const tuning::Knob* k : r->knobs()) {
      std::string now, error;
      try {
        now = k->text();
        if (k->is_set()) now += " (set)";
      } catch (const Error& e) {
        error = e.what();
        now = "bad value";
        errors += (errors.empty() ? "" : "; ") + error;
      }
      text += fmt::format("  {:<28} default {:<6} now {:<12} {} ({})\n", k->name(), k->fallback(), now, k->doc(),
                          k->allowed());
      all.push_back({{"registry", r->name()}, {"name", k->name()}, {"default", k->fallback()},
                     {"allowed", k->allowed()}, {"doc", k->doc()}});
      if (error.empty()) {
        all.back()["current"] = k->text();
        all.back()["set"] = k->is_set();
      } else {
        all.back()["error"] = error;
      }
    }
  }
  if (as_json)
    fmt::print("{}\n", all.dump(2));
  else
    fmt::print("{}", text);
  if (!errors.empty()) throw Error(errors);
  return 0;
}

int run_info(const InfoArgs& args) {
  if (args.tuning) return run_tuning(args.json);
  if (args.model.empty()) throw_error("info: a model (.gguf, .jlm or Hugging Face folder) or --tuning");
  SourceOptions options;
  options.hf_tokenizer = [](const HfFolder& folder, Metadata& metadata) {
    const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
    for (const auto& [key, value] : tokenizer.entries()) metadata.set(key, value);
  };
  const ConvertSource source = open_convert_source(args.model, options);
  const ModelSummary summary = summarize_model(source);
  nlohmann::json json = summary_to_json(summary);
  int rc = 0;
  std::string verify_text;
  if (args.verify) {
    if (source.format != "jlm") {
      verify_text = fmt::format("verify: {} files carry no checksums; nothing to verify\n", source.format);
      json["verify"] = {{"checked", false}};
    } else {
      const JlmFile file = JlmFile::open(args.model);
      size_t slices = 0;
      for (const JlmTensor& t : file.tensors()) slices += t.slice_count;
      const auto failures = file.verify();
      json["verify"] = {{"checked", true}, {"slices", slices}, {"failures", nlohmann::json::array()}};
      for (const auto& f : failures) {
        json["verify"]["failures"].push_back({{"tensor", f.tensor}, {"slice", f.slice}});
        verify_text += fmt::format("verify: FAILED {}{}: checksum {:016x}, stored {:016x}\n", f.tensor,
                                   f.slice || file.find(f.tensor)->slice_count > 1
                                       ? fmt::format(" (expert {})", f.slice)
                                       : "",
                                   f.actual, f.expected);
      }
      if (failures.empty())
        verify_text = fmt::format("verify: ok ({} tensors, {} checksums)\n", file.tensors().size(), slices);
      else
        verify_text += fmt::format("verify: {} of {} checksums do not match: the file is damaged, "
                                   "reconvert it\n",
                                   failures.size(), slices);
      rc = failures.empty() ? 0 : 1;
    }
  }
  // The family that will run it and what it does differently (nothing when no family serves
  // the architecture: the summary above still describes the file).
  std::string family_text;
  try {
    const FamilyDescription d = describe_family(config_from_metadata(source.metadata));
    json["family"] = {{"name", d.family},
                      {"quirks", d.quirks},
                      {"kv_values_per_token", d.kv_values_per_token},
                      {"kv_bytes_per_token_f16", 2 * d.kv_values_per_token}};
    family_text = "family: " + d.family;
    for (size_t i = 0; i < d.quirks.size(); ++i) family_text += (i ? ", " : ": ") + d.quirks[i];
    family_text += fmt::format("\nKV per token: {} values, {} bytes at F16 ({} at F32)\n",
                               d.kv_values_per_token, 2 * d.kv_values_per_token,
                               4 * d.kv_values_per_token);
  } catch (const Error& e) {
    json["family"] = {{"error", e.what()}};
    family_text = std::string("family: none (") + e.what() + ")\n";
  }
  if (args.json)
    fmt::print("{}\n", json.dump(2));
  else
    fmt::print("{}{}{}", summary_to_text(summary), family_text, verify_text);
  return rc;
}

const RegisterCommand kRegister{Command{
    "info", "Describe a model (.gguf, .jlm or Hugging Face folder), or the tuning settings",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<InfoArgs>();
      app.add_option("model", args->model, "model: .gguf, .jlm or Hugging Face folder");
      app.add_flag("--verify", args->verify, "check every tensor checksum of a .jlm");
      app.add_flag("--json", args->json, "print JSON");
      app.add_flag("--tuning", args->tuning,
                   "list every JITLLM_* setting: default, current value, allowed values, doc");
      return [args] { return run_info(*args); };
    }}};

}  // namespace
}  // namespace jitllm::cli
