// `jitllm convert INPUT OUTPUT.jlm [--type keep|Q4_K_M|q8_0|f16|...] [--pure]`: a .gguf, a .jlm
// or a Hugging Face folder -> a .jlm container. Shows a progress line on a terminal (stderr), then
// a summary per output format that says why tensors are not in the requested one; Ctrl-C cancels
// cleanly (the temporary OUTPUT.tmp.XXXXXX is removed, an existing OUTPUT is left as it was).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>

#include "cli/command.h"
#include "convert/convert.h"
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
  bool pure = false, quiet = false;
};

// One line per output format: tensors, MiB, and the reasons tensors are in it when it is not the
// requested format ("output head in the Q4_K_M mix: 1; norm: 33").
void print_plan(const ConvertResult& r) {
  struct Row {
    size_t tensors = 0;
    uint64_t bytes = 0;
    std::map<std::string, size_t> reasons;
  };
  std::map<std::string, Row> rows;
  for (const ConvertResult::Tensor& t : r.plan) {
    Row& row = rows[quant_name(t.to)];
    ++row.tensors;
    row.bytes += t.bytes;
    if (!t.reason.empty()) ++row.reasons[t.reason];
  }
  for (const auto& [format, row] : rows) {
    std::string why;
    for (const auto& [reason, n] : row.reasons)
      why += fmt::format("{}{} ({})", why.empty() ? "" : "; ", reason, n);
    fmt::print("  {:<6} {:>5} tensors {:>10.2f} MiB{}{}\n", format, row.tensors,
               double(row.bytes) / double(1 << 20), why.empty() ? "" : "  ", why);
  }
}

// The tokenizer layer's HF import, handed to the converter (which does not link the tokenizer).
void import_hf_tokenizer(const HfFolder& folder, Metadata& metadata) {
  const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
  for (const auto& [key, value] : tokenizer.entries()) metadata.set(key, value);
}

int run_convert(const ConvertArgs& args) {
  if (std::filesystem::path(args.output).extension() != ".jlm")
    throw_error("{}: convert writes a .jlm container; name the output *.jlm (a .gguf or a Hugging "
                "Face folder is run as it is, without converting)",
                args.output);
  ConvertOptions options;
  options.target = parse_convert_target(args.type, args.pure);
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
  if (!args.quiet) {
    fmt::print("{}: {} tensors ({} converted, target {}), {} page groups, {:.2f} MiB from {:.2f} "
               "MiB in {:.2f} s\n",
               r.output, r.tensors, r.requantized, args.type, r.groups,
               double(r.output_bytes) / double(1 << 20), double(r.source_bytes) / double(1 << 20), s);
    print_plan(r);
  }
  return 0;
}

const RegisterCommand kRegister{Command{
    "convert", "Convert a .gguf, .jlm or Hugging Face folder into a .jlm container",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<ConvertArgs>();
      app.add_option("input", args->input, "model: .gguf, .jlm or Hugging Face folder")->required();
      app.add_option("output", args->output, "the .jlm to write (OUT.jlm)")->required();
      app.add_option("--type,-t", args->type,
                     "keep (default); a llama-quantize preset with its per-tensor mix: Q4_K_M, "
                     "Q5_K_M, Q6_K, Q8_0, Q4_0, Q3_K_M, Q2_K, IQ4_NL, ...; or a plain format: "
                     "f32, f16, bf16, q4_K, ... (norms stay f32)");
      app.add_flag("--pure", args->pure,
                   "every weight matrix in the --type format, no preset mix (llama-quantize --pure)");
      app.add_flag("--quiet,-q", args->quiet, "no progress or summary");
      return [args] { return run_convert(*args); };
    }}};

}  // namespace
}  // namespace jitllm::cli
