// `jitllm synth OUT.gguf --shape NAME --type MIX [--seed S]`: a GGUF with random valid weights at
// a real model's shape, for benchmarks that both jitllm and llama.cpp read.
#include <fmt/format.h>

#include "cli/command.h"
#include "convert/synth.h"

namespace jitllm::cli {
namespace {

struct SynthOptions {
  std::string out, shape, type;
  uint64_t seed = 1;
};

const RegisterCommand kRegister{Command{
    "synth", "Write a GGUF with random valid weights at a known model shape",
    [](CLI::App& app) -> std::function<int()> {
      auto opt = std::make_shared<SynthOptions>();
      std::string shapes, mixes;
      for (const auto& s : synth_shapes()) shapes += (shapes.empty() ? "" : ", ") + s.name;
      for (const auto& m : synth_mixes()) mixes += (mixes.empty() ? "" : ", ") + m;
      app.add_option("out", opt->out, "output .gguf")->required();
      app.add_option("--shape", opt->shape, "model shape: " + shapes)->required();
      app.add_option("--type", opt->type, "format mix: " + mixes)->required();
      app.add_option("--seed", opt->seed, "random seed (default 1)");
      return [opt] {
        const uint64_t bytes = write_synth_model(opt->out, opt->shape, opt->type, opt->seed);
        fmt::print("{}: {} {} seed {}, {:.1f} MiB of tensor data\n", opt->out, opt->shape,
                   opt->type, opt->seed, double(bytes) / (1024.0 * 1024.0));
        return 0;
      };
    }}};

}  // namespace
}  // namespace jitllm::cli
