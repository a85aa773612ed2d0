// The cache's contents and their removal (see model_cache.h).
#include "runtime/model_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>

#include "core/cache_dir.h"
#include "core/error.h"
#include "io/jlm_reader.h"
#include "runtime/model_loader.h"

namespace jitllm {

namespace fs = std::filesystem;

namespace {

int64_t unix_seconds(fs::file_time_type t) {
  const auto system = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration_cast<std::chrono::seconds>(system.time_since_epoch()).count();
}

CachedModel describe(const fs::path& file, const std::string& key_hex) {
  CachedModel m;
  m.path = file.string();
  std::error_code ec;
  m.bytes = fs::file_size(file, ec);
  m.modified_s = unix_seconds(fs::last_write_time(file, ec));
  // Damage is only called damage when the file itself can be read: a permission or a process
  // out of file handles says nothing about it.
  if (::access(m.path.c_str(), R_OK) != 0) {
    m.state = CachedModel::State::Unknown;
    return m;
  }
  try {
    const JlmFile jlm = JlmFile::open(m.path);
    m.source = jlm.source().get_string_or("source.path", "");
    m.architecture = jlm.metadata().get_string_or("general.architecture", "");
    m.name = jlm.metadata().get_string_or("general.name", "");
  } catch (const std::exception&) {
    m.state = CachedModel::State::Unreadable;
    return m;
  }
  if (m.source.empty() || (!fs::exists(m.source, ec) && !ec)) {
    m.state = CachedModel::State::SourceGone;
    return m;
  }
  uint64_t key = 0;
  try {
    key = hf_folder_key(m.source);
  } catch (const std::exception&) {
    m.state = CachedModel::State::Unknown;  // there, but not readable now
    return m;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  m.state = key_hex == hex ? CachedModel::State::Current : CachedModel::State::Stale;
  return m;
}

}  // namespace

const char* cached_model_state_name(CachedModel::State state) {
  switch (state) {
    case CachedModel::State::Current: return "current";
    case CachedModel::State::Stale: return "stale (source changed)";
    case CachedModel::State::SourceGone: return "source gone";
    case CachedModel::State::Unreadable: return "unreadable";
    case CachedModel::State::Unknown: return "not checkable now";
  }
  return "?";
}

CacheContents list_cache() {
  CacheContents c;
  c.dir = jitllm_cache_dir();
  std::error_code ec;
  if (c.dir.empty() || !fs::is_directory(c.dir, ec)) return c;
  // The loader's names: <folder>-<16 hex>.jlm, and <that>.tmp.<suffix> while it writes.
  static const std::regex conversion(R"((.+)-([0-9a-f]{16})\.jlm)");
  static const std::regex temporary(R"(.+-[0-9a-f]{16}\.jlm\.tmp\..+)");
  for (const auto& e : fs::directory_iterator(c.dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (std::regex_match(name, m, conversion)) {
      c.models.push_back(describe(e.path(), m[2].str()));
    } else if (std::regex_match(name, temporary)) {
      c.temporaries.push_back(e.path().string());
      c.temporary_bytes += e.file_size(ec);
    }
  }
  std::sort(c.models.begin(), c.models.end(),
            [](const CachedModel& a, const CachedModel& b) { return a.path < b.path; });
  const fs::path kernels = fs::path(c.dir) / "cuda";
  if (fs::is_directory(kernels, ec))
    for (const auto& e : fs::recursive_directory_iterator(kernels, ec))
      if (e.is_regular_file(ec)) {
        ++c.kernel_files;
        c.kernel_bytes += e.file_size(ec);
      }
  return c;
}

CleanResult clean_cache(const CleanOptions& options) {
  const CacheContents c = list_cache();
  if (c.dir.empty()) throw_error("no cache directory: neither XDG_CACHE_HOME nor HOME is set");
  CleanResult r;
  auto remove = [&](const std::string& path, uint64_t bytes, bool directory) {
    if (!options.dry_run) {
      std::error_code ec;
      if (directory) fs::remove_all(path, ec);
      else fs::remove(path, ec);
      if (ec) throw_error("{}: cannot remove: {}", path, ec.message());
    }
    r.removed.push_back(path);
    r.bytes += bytes;
  };
  if (options.models) {
    for (const CachedModel& m : c.models)
      if (!options.stale_only ||
          (m.state != CachedModel::State::Current && m.state != CachedModel::State::Unknown))
        remove(m.path, m.bytes, false);
    // A conversion writing now keeps its temporary fresh: only those idle for a day go (the
    // loader's rule).
    const auto idle = fs::file_time_type::clock::now() - std::chrono::hours(24);
    for (const std::string& t : c.temporaries) {
      std::error_code ec;
      if (fs::last_write_time(t, ec) < idle && !ec) remove(t, fs::file_size(t, ec), false);
    }
  }
  if (options.kernels && !options.stale_only && c.kernel_files > 0)
    remove((fs::path(c.dir) / "cuda").string(), c.kernel_bytes, true);
  return r;
}

}  // namespace jitllm
