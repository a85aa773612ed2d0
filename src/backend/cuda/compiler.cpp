// NVRTC compile + on-disk cubin cache (see compiler.h).
#include "backend/cuda/compiler.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/cache_dir.h"
#include "core/error.h"
#include "core/log.h"
#include "core/temp_file.h"

namespace jitllm::cuda {

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool read_file(const std::string& path, std::vector<char>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  in.seekg(0, std::ios::end);
  const std::streamoff n = in.tellg();
  if (n <= 0) return false;
  out->resize(size_t(n));
  in.seekg(0);
  return bool(in.read(out->data(), n));
}

}  // namespace

std::string Compiler::default_cache_dir() {
  const std::string base = jitllm_cache_dir();
  return base.empty() ? base : base + "/cuda";
}

Compiler::Compiler(const Device& device, std::string cache_dir)
    : device_(device), dir_(cache_dir.empty() ? default_cache_dir() : cache_dir) {
  if (dir_ == "-") dir_.clear();
  options_ = nvrtc_options(device_.arch());
}

std::string Compiler::key(const std::string& source) const {
  const Nvrtc& n = nvrtc();
  std::string ident = fmt::format("{}|driver {}|nvrtc {}.{}|gen {}", device_.uuid(),
                                  driver().version, n.major, n.minor, kGeneratorVersion);
  for (const std::string& o : options_) ident += "|" + o;
  const std::string all = ident + "\n" + source;
  return fmt::format("{:016x}{:016x}", fnv1a(all, 0xcbf29ce484222325ull),
                     fnv1a(all, 0x84222325cbf29ce4ull));
}

std::vector<char> nvrtc_compile(const std::string& source, const std::string& what,
                                const std::vector<std::string>& options) {
  const Nvrtc& n = nvrtc();
  nvrtcProgram prog = nullptr;
  check_nvrtc(n.nvrtcCreateProgram(&prog, source.c_str(), "jitllm_kernel.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  const nvrtcResult r = n.nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t log_size = 0;
  n.nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) n.nvrtcGetProgramLog(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    n.nvrtcDestroyProgram(&prog);
    throw_error("NVRTC could not compile {} ({}): {}\n{}", what, options.front(),
                n.nvrtcGetErrorString(r), log);
  }
  size_t size = 0;
  check_nvrtc(n.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  std::vector<char> cubin(size);
  check_nvrtc(n.nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  n.nvrtcDestroyProgram(&prog);
  return cubin;
}

std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "--std=c++17", "--device-as-default-execution-space"};
}

std::vector<char> Compiler::compile(const std::string& source, const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> cubin = nvrtc_compile(source, what, options_);
  stats_.compiled++;
  stats_.compile_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return cubin;
}

namespace {

// Every module a Compiler of this process compiled or read from disk (see compiler.h).
std::atomic<int64_t> g_modules_loaded{0};

void write_cache_file(const std::string& dir, const std::string& path, const std::vector<char>& cubin) {
  // Written to a name of this call's own (not the pid's: two Compilers of one process may write
  // one kernel at once), then renamed: a concurrent writer sees a whole file or none. Best effort.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string tmp;
  try {
    ::close(create_temp_beside(path, tmp));
  } catch (const Error&) {
    return;  // no cache file this time; the module still loads from memory
  }
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out || !out.write(cubin.data(), std::streamsize(cubin.size()))) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

const Module& Compiler::module(const std::string& source, const std::string& what) {
  const std::string k = key(source);
  if (auto it = loaded_.find(k); it != loaded_.end()) {
    stats_.memory_hits++;
    return *it->second;
  }
  const std::string path = dir_.empty() ? std::string() : dir_ + "/" + k + ".cubin";
  std::vector<char> cubin;
  std::unique_ptr<Module> m;
  if (!path.empty() && read_file(path, &cubin)) {
    try {
      m = std::make_unique<Module>(cubin);
      stats_.disk_hits++;
    } catch (const Error&) {
      m.reset();  // a damaged cache file: compiled afresh below and overwritten
    }
  }
  if (!m) {
    cubin = compile(source, what);
    m = std::make_unique<Module>(cubin);
    if (!path.empty()) write_cache_file(dir_, path, cubin);
  }
  const Module& ref = *m;
  loaded_.emplace(k, std::move(m));
  g_modules_loaded.fetch_add(1, std::memory_order_relaxed);
  return ref;
}

int64_t modules_loaded_in_process() { return g_modules_loaded.load(std::memory_order_relaxed); }

}  // namespace jitllm::cuda
