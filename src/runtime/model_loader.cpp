// load_model_file: -m resolution, the conversion cache for Hugging Face folders, and opening.
//
// Cache: an HF folder is converted once to $XDG_CACHE_HOME/jitllm/<folder>-<key>.jlm (default
// ~/.cache/jitllm/), key = a 64-bit FNV-1a hash over every file's name, size and mtime plus the
// first 64 KiB of each file, so an edited or replaced model converts again. A .gguf or .jlm is
// mapped directly (GGUF's block layouts are the engine's, so a conversion would only copy). A
// .jlm, cached or given, has its data checksums verified as it opens (its MoE experts' by the
// Engine, which knows whether they stay resident); a cached one that fails is
// converted again.
#include "runtime/model_loader.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "convert/convert.h"
#include "core/cache_dir.h"
#include "core/error.h"
#include "core/log.h"
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
  const std::string dir = jitllm_cache_dir();
  if (dir.empty()) throw_error("cannot place the model cache: neither XDG_CACHE_HOME nor HOME is set");
  return dir;
}

}  // namespace

namespace {

// The cache key of a single model file: its absolute path, size, mtime and first 64 KiB.
uint64_t file_key(const std::string& path) {
  Fnv64 h;
  h.add(std::string("jitllm-file-cache-v1"));
  h.add(path);
  h.add_u64(uint64_t(fs::file_size(path)));
  h.add_u64(uint64_t(fs::last_write_time(path).time_since_epoch().count()));
  std::vector<char> head(64 * 1024);
  std::ifstream in(path, std::ios::binary);
  in.read(head.data(), std::streamsize(head.size()));
  h.add(head.data(), size_t(in.gcount()));
  return h.h;
}

}  // namespace

uint64_t hf_folder_key(const std::string& folder) {
  const fs::path dir(folder);
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

namespace {

void import_hf_tokenizer(const HfFolder& folder, Metadata& metadata) {
  const Metadata tokenizer = hf_tokenizer_metadata(folder.dir());
  for (const auto& [key, value] : tokenizer.entries()) metadata.set(key, value);
}

// Temporary files of conversions to `out` that were killed (SIGKILL, power loss: no destructor
// ran) are removed once a day old; a live conversion keeps touching its own.
void remove_stale_temporaries(const std::string& out) {
  const fs::path target(out);
  const std::string prefix = target.filename().string() + ".tmp.";
  const auto day_ago = fs::file_time_type::clock::now() - std::chrono::hours(24);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(target.parent_path(), ec)) {
    if (!e.path().filename().string().starts_with(prefix)) continue;
    if (e.last_write_time(ec) < day_ago && !ec) fs::remove(e.path(), ec);
  }
}

// The cached .jlm of an HF folder or a GGUF, opened with its data checksums verified (the
// experts' too unless they will be paged, each then checked as it is read). Converted first when
// the cache has none, and again when the cached file does not open or fails its checksums (a
// disk error, a file cut short): a damaged conversion is replaced, never reused.
ModelFile cached_conversion(const fs::path& dir, bool verify_experts = true) {
  const fs::path folder = fs::absolute(dir).lexically_normal();
  const bool is_file = fs::is_regular_file(folder);
  std::string stem = is_file ? folder.stem().string() : folder.filename().string();
  if (stem.empty()) stem = folder.parent_path().filename().string();
  const uint64_t key = is_file ? file_key(folder.string()) : hf_folder_key(folder.string());
  const std::string out = fmt::format("{}/{}-{:016x}.jlm", cache_dir(), stem, key);
  const ModelFileOptions verified{.verify_checksums = true, .verify_experts = verify_experts};
  std::error_code ec;
  if (fs::exists(out, ec)) {
    try {
      return open_model_file(out, verified);
    } catch (const std::exception& e) {
      log(LogLevel::Warn, "the cached conversion of {} is unusable, converting again: {}",
          folder.string(), e.what());
    }
  }
  fs::create_directories(cache_dir(), ec);
  if (ec) throw_error("{}: cannot create the model cache: {}", cache_dir(), ec.message());
  remove_stale_temporaries(out);
  ConvertOptions options;
  if (!is_file) options.source.hf_tokenizer = import_hf_tokenizer;
  const bool tty = ::isatty(STDERR_FILENO);
  options.progress = [&](const ConvertProgress& p) {
    if (tty || p.index == p.count)
      fmt::print(stderr, "{}converting {} -> {}: {}/{} tensors{}", tty ? "\r\033[K" : "",
                 folder.string(), out, p.index, p.count, p.index == p.count ? "\n" : "");
  };
  // Several processes or threads may convert the same folder at once (ctest -j, two servers
  // starting): the writer gives each a temporary file of its own and renames it over `out`
  // (replacing a damaged one atomically), so none sees another's half-written file; a failed
  // conversion leaves nothing behind.
  convert_to_jlm(folder.string(), out, options);
  try {
    return open_model_file(out, verified);
  } catch (...) {
    fs::remove(out, ec);  // never leave a conversion in the cache that does not load
    throw;
  }
}

}  // namespace

std::string default_model_path() {
  if (const char* env = std::getenv("JITLLM_DEFAULT_MODEL"); env && *env) return env;
  return std::string(JITLLM_SOURCE_DIR) + "/models/demo";
}

std::shared_ptr<const ModelFile> paged_container(const std::string& path) {
  return std::make_shared<const ModelFile>(cached_conversion(path, false));
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
    return std::make_shared<const ModelFile>(cached_conversion(path, false));
  }
  // The engine reads every weight: a .jlm's checksums are checked on that first read (the
  // experts' by the Engine, resident or as they are paged in).
  return std::make_shared<const ModelFile>(
      open_model_file(path, {.verify_checksums = true, .verify_experts = false}));
}

}  // namespace jitllm
