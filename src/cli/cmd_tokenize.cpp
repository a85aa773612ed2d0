// `jitllm tokenize`: text -> token ids with a model's tokenizer, printed space-separated on one
// line (or one "id -> 'piece'" line per token with --pieces). MODEL is a .gguf, a .jlm, or a
// Hugging Face folder (tokenizer.json or tokenizer.model).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/model_file.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  std::string file;
  bool no_bos = false;
  bool parse_special = false;
  bool pieces = false;
};

Metadata load_tokenizer_metadata(const std::string& path) {
  if (std::filesystem::is_directory(path)) return hf_tokenizer_metadata(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot open", path);
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::string(magic, 4) == "GGUF") return GgufFile::open(path).metadata();
  return open_model_file(path).metadata;
}

// Control characters and non-printable bytes shown as escapes, so one piece stays on one line.
std::string escape_piece(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out;
}

int run_tokenize(const TokenizeOptions& opt) {
  std::string text = opt.prompt;
  if (!opt.file.empty()) {
    std::ifstream in(opt.file, std::ios::binary);
    if (!in) throw_error("{}: cannot open", opt.file);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const Tokenizer tokenizer(load_tokenizer_metadata(opt.model));
  const std::vector<TokenId> ids = tokenizer.encode(text, !opt.no_bos, opt.parse_special);
  if (opt.pieces) {
    for (TokenId id : ids) fmt::print("{:6d} -> '{}'\n", id, escape_piece(tokenizer.piece(id)));
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  fmt::print("{}\n", line);
  return 0;
}

const RegisterCommand kRegister{Command{
    "tokenize", "Print the token ids of a text",
    [](CLI::App& app) -> std::function<int()> {
      auto opt = std::make_shared<TokenizeOptions>();
      app.add_option("-m,--model", opt->model, "model: .gguf, .jlm or Hugging Face folder")
          ->required();
      auto* prompt = app.add_option("-p,--prompt", opt->prompt, "text to tokenize");
      auto* file = app.add_option("-f,--file", opt->file, "file whose bytes to tokenize");
      prompt->excludes(file);
      app.add_flag("--no-bos", opt->no_bos, "do not add BOS/EOS/SEP tokens");
      app.add_flag("--parse-special", opt->parse_special,
                   "turn control-token text (e.g. <s>) into its id");
      app.add_flag("--pieces", opt->pieces, "print one 'id -> piece' line per token");
      return [opt, prompt, file] {
        if (prompt->count() == 0 && file->count() == 0)
          throw_error("tokenize: give the text with -p TEXT or -f FILE");
        return run_tokenize(*opt);
      };
    }}};

}  // namespace
}  // namespace jitllm::cli
