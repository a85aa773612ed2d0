// `jitllm convert INPUT OUTPUT [--type keep|q8_0|f16|...]`: a .gguf, a .jlm or a Hugging Face
// folder -> a .jlm container. Shows a progress line on a terminal (stderr); Ctrl-C cancels
// cleanly (the temporary OUTPUT.tmp.XXXXXX is removed, an existing OUTPUT is left as it was).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>

#include "cli/command.h"
#include "convert/convert.h"
#include "convert/requantize.h"
#include "core/error.h"
#include "io/hf_folder.h"
#include "tokenizer/hf_tokenizer.h"

namespace jitllm::cli {
namespace {

std::atomic<bool> g_cancel{false};

extern "C" void on_interrupt(int) { g_cancel = true; }

struct ConvertArgs {
  std::string input;
  std::string output;
  std::string type = "keep";
  bool quiet = false;
};

// The tokenizer layer's HF import, handed to the converter (which does not link the tokenizer).
void import_hf_tokenizer(const HfFolder& folder, Metadata& metadata) {
  const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
  for (const auto& [key, value] : tokenizer.entries()) metadata.set(key, value);
}

int run_convert(const ConvertArgs& args) {
  ConvertOptions options;
  options.type = parse_target_type(args.type);
  options.source.hf_tokenizer = import_hf_tokenizer;
  options.cancel = &g_cancel;
  const bool tty = ::isatty(STDERR_FILENO) && !args.quiet;
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (tty) {
    options.progress = [&](const ConvertProgress& p) {
      const double s = seconds();
      fmt::print(stderr, "\r\033[K[{}/{}] {:.0f}% {} ({:.0f} MiB/s)", p.index, p.count,
                 p.bytes_total ? 100.0 * double(p.bytes_done) / double(p.bytes_total) : 100.0,
                 p.tensor, s > 0 ? double(p.bytes_done) / double(1 << 20) / s : 0.0);
      std::fflush(stderr);
    };
  }
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  struct sigaction old_int {}, old_term {};
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);
  ConvertResult r;
  try {
    r = convert_to_jlm(args.input, args.output, options);
  } catch (...) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    if (tty) fmt::print(stderr, "\n");
    throw;
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (tty) fmt::print(stderr, "\r\033[K");
  const double s = seconds();
  if (!args.quiet)
    fmt::print("{}: {} tensors ({} requantized to {}), {} page groups, {:.2f} MiB from {:.2f} MiB "
               "in {:.2f} s\n",
               r.output, r.tensors, r.requantized, args.type, r.groups,
               double(r.output_bytes) / double(1 << 20), double(r.source_bytes) / double(1 << 20), s);
  return 0;
}

const RegisterCommand kRegister{Command{
    "convert", "Convert a .gguf, .jlm or Hugging Face folder into a .jlm container",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<ConvertArgs>();
      app.add_option("input", args->input, "model: .gguf, .jlm or Hugging Face folder")->required();
      app.add_option("output", args->output, "the .jlm to write")->required();
      app.add_option("--type,-t", args->type,
                     "tensor format: keep (default), f32, f16, bf16, q8_0, q4_0, q4_K, ... "
                     "(norms stay f32)");
      app.add_flag("--quiet,-q", args->quiet, "no progress or summary");
      return [args] { return run_convert(*args); };
    }}};

}  // namespace
}  // namespace jitllm::cli
