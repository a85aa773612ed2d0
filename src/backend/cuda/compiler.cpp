// NVRTC compile + on-disk cubin cache (see compiler.h).
#include "backend/cuda/compiler.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

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

std::string Compiler::cache_path(const std::string& k) const {
  return dir_.empty() ? std::string() : dir_ + "/" + k + ".cubin";
}

std::unique_ptr<Module> Compiler::from_disk(const std::string& k) {
  const std::string path = cache_path(k);
  std::vector<char> cubin;
  if (path.empty() || !read_file(path, &cubin)) return nullptr;
  try {
    auto m = std::make_unique<Module>(cubin);
    stats_.disk_hits++;
    return m;
  } catch (const Error&) {
    return nullptr;  // a damaged cache file: compiled afresh and overwritten
  }
}

const Module& Compiler::keep(const std::string& k, std::unique_ptr<Module> m) {
  const Module& ref = *m;
  loaded_.emplace(k, std::move(m));
  g_modules_loaded.fetch_add(1, std::memory_order_relaxed);
  return ref;
}

const Module& Compiler::module(const std::string& source, const std::string& what) {
  const std::string k = key(source);
  if (auto it = loaded_.find(k); it != loaded_.end()) {
    stats_.memory_hits++;
    return *it->second;
  }
  std::unique_ptr<Module> m = from_disk(k);
  if (!m) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<char> cubin = compile(source, what);
    stats_.wait_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    m = std::make_unique<Module>(cubin);
    if (!dir_.empty()) write_cache_file(dir_, cache_path(k), cubin);
  }
  return keep(k, std::move(m));
}

const Module& Compiler::load_together(const KernelSource& wanted,
                                      const std::vector<KernelSource>& siblings) {
  const std::string wanted_key = key(wanted.text);
  if (auto it = loaded_.find(wanted_key); it != loaded_.end()) {
    stats_.memory_hits++;
    return *it->second;
  }
  // What is neither in memory nor on disk, the wanted source first.
  struct Job {
    const KernelSource* src;
    std::string key;
    std::vector<char> cubin;
    std::exception_ptr error;
    double ms = 0;
  };
  std::vector<Job> jobs;
  auto consider = [&](const KernelSource& s, const std::string& k) {
    if (loaded_.count(k)) return;
    for (const Job& j : jobs)
      if (j.key == k) return;
    if (std::unique_ptr<Module> m = from_disk(k)) {
      keep(k, std::move(m));
      return;
    }
    jobs.push_back(Job{&s, k, {}, nullptr, 0});
  };
  consider(wanted, wanted_key);
  for (const KernelSource& s : siblings) consider(s, key(s.text));
  if (!jobs.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
        Job& j = jobs[i];
        const auto c0 = std::chrono::steady_clock::now();
        try {
          j.cubin = nvrtc_compile(j.src->text, j.src->what, options_);
        } catch (...) {
          j.error = std::current_exception();
        }
        j.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
      }
    };
    const size_t n_threads =
        std::min<size_t>(jobs.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    try {
      for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
    } catch (const std::system_error&) {
      // no more threads to be had: the ones started and this one share the jobs
    }
    work();
    for (std::thread& t : threads) t.join();
    stats_.wait_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (Job& j : jobs) {
      stats_.compile_ms += j.ms;
      if (j.error) {
        if (j.key == wanted_key) std::rethrow_exception(j.error);
        stats_.unused_failed++;
        continue;
      }
      stats_.compiled++;
      std::unique_ptr<Module> m;
      try {
        m = std::make_unique<Module>(j.cubin);
      } catch (const Error&) {
        if (j.key == wanted_key) throw;
        stats_.unused_failed++;
        continue;
      }
      if (!dir_.empty()) write_cache_file(dir_, cache_path(j.key), j.cubin);
      keep(j.key, std::move(m));
    }
  }
  return *loaded_.at(wanted_key);
}

int64_t modules_loaded_in_process() { return g_modules_loaded.load(std::memory_order_relaxed); }

}  // namespace jitllm::cuda
