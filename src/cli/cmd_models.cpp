// `jitllm models`: the models in jitllm's cache (conversions of Hugging Face folders) with their
// sizes, sources and whether the source still matches, and the CUDA kernel cache's size.
// `jitllm cache clean`: removes them (see runtime/model_cache.h for what each option selects).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "runtime/model_cache.h"

namespace jitllm::cli {
namespace {

double mib(uint64_t bytes) { return double(bytes) / double(1 << 20); }

const char* state_code(CachedModel::State state) {
  switch (state) {
    case CachedModel::State::Current: return "current";
    case CachedModel::State::Stale: return "stale";
    case CachedModel::State::SourceGone: return "source_gone";
    case CachedModel::State::Unreadable: return "unreadable";
    case CachedModel::State::Unknown: return "unknown";
  }
  return "?";
}

int run_models(bool json) {
  const CacheContents c = list_cache();
  if (json) {
    nlohmann::ordered_json models = nlohmann::ordered_json::array();
    for (const CachedModel& m : c.models)
      models.push_back({{"path", m.path}, {"bytes", m.bytes}, {"source", m.source},
                        {"architecture", m.architecture}, {"name", m.name},
                        {"modified", m.modified_s}, {"state", state_code(m.state)}});
    nlohmann::ordered_json out = {{"cache_dir", c.dir},
                                  {"models", models},
                                  {"kernels", {{"files", c.kernel_files}, {"bytes", c.kernel_bytes}}},
                                  {"temporaries", c.temporaries.size()}};
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  if (c.dir.empty()) throw_error("no cache directory: neither XDG_CACHE_HOME nor HOME is set");
  fmt::print("cache: {}\n", c.dir);
  if (c.models.empty()) fmt::print("no converted models (a Hugging Face folder is converted here on first use)\n");
  for (const CachedModel& m : c.models)
    fmt::print("{:>10.1f} MiB  {:<10} {:<22} {}\n             from {}\n", mib(m.bytes),
               m.architecture.empty() ? "?" : m.architecture, cached_model_state_name(m.state),
               m.path, m.source.empty() ? "?" : m.source);
  fmt::print("kernels: {} files, {:.1f} MiB (CUDA cubins)\n", c.kernel_files, mib(c.kernel_bytes));
  if (!c.temporaries.empty())
    fmt::print("temporaries: {} ({:.1f} MiB; conversions writing, or killed)\n", c.temporaries.size(),
               mib(c.temporary_bytes));
  return 0;
}

int run_clean(CleanOptions options, bool only_models, bool only_kernels) {
  if (only_models && only_kernels) throw_error("--models and --kernels: give one, or neither for both");
  if (only_models) options.kernels = false;
  if (only_kernels) options.models = false;
  if (only_kernels && options.stale_only) throw_error("--stale applies to models, not --kernels");
  const CleanResult r = clean_cache(options);
  for (const std::string& p : r.removed) fmt::print("{}{}\n", options.dry_run ? "would remove " : "removed ", p);
  fmt::print("{} {:.1f} MiB\n", options.dry_run ? "would free" : "freed", mib(r.bytes));
  return 0;
}

const RegisterCommand kModels{Command{
    "models", "List the converted models and kernels in jitllm's cache",
    [](CLI::App& app) -> std::function<int()> {
      auto json = std::make_shared<bool>(false);
      app.add_flag("--json", *json, "one JSON object");
      return [json] { return run_models(*json); };
    }}};

const RegisterCommand kCache{Command{
    "cache", "Manage jitllm's cache: `cache clean` removes converted models and kernels",
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        CleanOptions options;
        bool only_models = false, only_kernels = false;
      };
      auto a = std::make_shared<Args>();
      CLI::App* clean = app.add_subcommand("clean", "remove cached conversions and kernels");
      app.require_subcommand(1);
      clean->add_flag("--stale", a->options.stale_only,
                      "only conversions whose source changed or is gone, damaged ones, and temporaries idle for a day");
      clean->add_flag("--models", a->only_models, "only converted models");
      clean->add_flag("--kernels", a->only_kernels, "only the CUDA kernel cache");
      clean->add_flag("--dry-run,-n", a->options.dry_run, "say what would go; remove nothing");
      return [a] { return run_clean(a->options, a->only_models, a->only_kernels); };
    }}};

}  // namespace
}  // namespace jitllm::cli
