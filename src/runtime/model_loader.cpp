// load_model_file: -m resolution, the conversion cache for Hugging Face folders, and opening.
//
// Cache: an HF folder is converted once to $XDG_CACHE_HOME/jitllm/<folder>-<key>.jlm (default
// ~/.cache/jitllm/), key = a 64-bit FNV-1a hash over every file's name, size and mtime plus the
// first 64 KiB of each file, so an edited or replaced model converts again. A .gguf or .jlm is
// mapped directly (GGUF's block layouts are the engine's, so a conversion would only copy).
#include "runtime/model_loader.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "convert/convert.h"
#include "core/error.h"
#include "io/hf_folder.h"
#include "tokenizer/hf_tokenizer.h"

namespace jitllm {

namespace fs = std::filesystem;

namespace {

struct Fnv64 {
  uint64_t h = 1469598103934665603ull;
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  void add(const std::string& s) { add(s.data(), s.size() + 1); }
  void add_u64(uint64_t v) { add(&v, sizeof v); }
};

std::string cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/jitllm";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/jitllm";
  throw_error("cannot place the model cache: neither XDG_CACHE_HOME nor HOME is set");
}

uint64_t folder_key(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  Fnv64 h;
  h.add(std::string("jitllm-hf-cache-v1"));
  std::vector<char> head(64 * 1024);
  for (const fs::path& f : files) {
    h.add(f.filename().string());
    h.add_u64(uint64_t(fs::file_size(f)));
    h.add_u64(uint64_t(fs::last_write_time(f).time_since_epoch().count()));
    std::ifstream in(f, std::ios::binary);
    in.read(head.data(), std::streamsize(head.size()));
    h.add(head.data(), size_t(in.gcount()));
  }
  return h.h;
}

void import_hf_tokenizer(const HfFolder& folder, Metadata& metadata) {
  const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
  for (const auto& [key, value] : tokenizer.entries()) metadata.set(key, value);
}

// The cached .jlm of an HF folder, converting it first when the cache has none.
std::string cached_conversion(const fs::path& dir) {
  const fs::path folder = fs::absolute(dir).lexically_normal();
  std::string stem = folder.filename().string();
  if (stem.empty()) stem = folder.parent_path().filename().string();
  const std::string out =
      fmt::format("{}/{}-{:016x}.jlm", cache_dir(), stem, folder_key(folder));
  if (fs::exists(out)) return out;
  std::error_code ec;
  fs::create_directories(cache_dir(), ec);
  if (ec) throw_error("{}: cannot create the model cache: {}", cache_dir(), ec.message());
  ConvertOptions options;
  options.source.hf_tokenizer = import_hf_tokenizer;
  const bool tty = ::isatty(STDERR_FILENO);
  options.progress = [&](const ConvertProgress& p) {
    if (tty || p.index == p.count)
      fmt::print(stderr, "{}converting {} -> {}: {}/{} tensors{}", tty ? "\r\033[K" : "",
                 folder.string(), out, p.index, p.count, p.index == p.count ? "\n" : "");
  };
  // Several processes may convert the same folder at once (ctest -j, two servers starting): each
  // writes its own file and renames it into place, so none sees another's half-written file and
  // the last rename leaves identical bytes.
  const std::string mine = fmt::format("{}.{}", out, ::getpid());
  convert_to_jlm(folder.string(), mine, options);
  fs::rename(mine, out, ec);
  if (ec) {
    fs::remove(mine);
    throw_error("{}: cannot move the converted model into the cache: {}", out, ec.message());
  }
  return out;
}

}  // namespace

std::string default_model_path() {
  if (const char* env = std::getenv("JITLLM_DEFAULT_MODEL"); env && *env) return env;
  return std::string(JITLLM_SOURCE_DIR) + "/models/demo";
}

std::shared_ptr<const ModelFile> load_model_file(const std::string& path_arg) {
  const bool is_default = path_arg.empty();
  const std::string path = is_default ? default_model_path() : path_arg;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  // A path that cannot be looked at (a folder without search permission) is not a missing one.
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw_error("{}: cannot read: {}", path, ec.message());
  if (!fs::exists(status)) {
    if (is_default)
      throw_error("no model given (-m) and the bundled default model {} does not exist; "
                  "pass -m MODEL (.gguf, .jlm or a Hugging Face folder)", path);
    throw_error("{}: no such file or directory", path);
  }
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json"))
      throw_error("{}: a folder must be a Hugging Face model (config.json is missing)", path);
    return std::make_shared<const ModelFile>(open_model_file(cached_conversion(path)));
  }
  return std::make_shared<const ModelFile>(open_model_file(path));
}

}  // namespace jitllm
