// See read_wall.h.
#include "runtime/read_wall.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#ifdef JITLLM_HAVE_CUDA
#include "backend/cuda/bandwidth.h"
#endif
#include "core/huge_buffer.h"
#include "core/thread_pool.h"

namespace jitllm {
namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Streaming read bandwidth of all pool threads over a buffer much larger than the caches (best of
// 3): the memory wall that decode, which reads every weight once per token, runs against. Read
// the way the decode kernels read their repacked weights (2 MiB pages, one stream per thread,
// software prefetch 8 KiB ahead): with 4 KiB pages and no prefetch this read 44-48 GB/s on the
// dev box while decode itself moved 56-70 GB/s.
double host_read_wall_gbs() {
  const size_t bytes = size_t(1) << 30;
  HugeBuffer buf(bytes);
  std::memset(buf.data(), 1, bytes);  // written, so no page is the shared zero page
  ThreadPool& pool = ThreadPool::global();
  double best = 0;
  std::vector<uint64_t> sink(size_t(pool.size()) * 8);
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    pool.run([&](int ti, int nt) {
      const size_t chunk = bytes / size_t(nt) / 256 * 256;
      const auto* p = reinterpret_cast<const __m256i*>(buf.data() + chunk * size_t(ti));
      __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
      for (size_t i = 0; i < chunk / 32; i += 8) {
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 8192, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 8192 + 64, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 8192 + 128, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + i) + 8192 + 192, _MM_HINT_T0);
        a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_load_si256(p + i), _mm256_load_si256(p + i + 1)));
        a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_load_si256(p + i + 2), _mm256_load_si256(p + i + 3)));
        a2 = _mm256_add_epi64(a2, _mm256_add_epi64(_mm256_load_si256(p + i + 4), _mm256_load_si256(p + i + 5)));
        a3 = _mm256_add_epi64(a3, _mm256_add_epi64(_mm256_load_si256(p + i + 6), _mm256_load_si256(p + i + 7)));
      }
      const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
      sink[size_t(ti) * 8] = uint64_t(_mm256_extract_epi64(s, 0));
    });
    const double dt = secs(t0, Clock::now());
    best = std::max(best, double(bytes / size_t(pool.size()) / 256 * 256 * size_t(pool.size())) / dt / 1e9);
  }
  return best;
}

}  // namespace

double weight_bytes_per_token(const ModelFile& f, int sessions) {
  const bool tied = f.find("output.weight") == nullptr;
  const std::string arch = f.metadata.get_string_or("general.architecture", "");
  const double n_expert = double(f.metadata.get_i64_or(arch + ".expert_count", 0));
  const double n_used = double(f.metadata.get_i64_or(arch + ".expert_used_count", 0));
  const double expert_share =
      n_expert > 0 && n_used > 0 ? 1.0 - std::pow(1.0 - n_used / n_expert, std::max(1, sessions)) : 1.0;
  double b = 0;
  for (const TensorInfo& t : f.tensors) {
    if (t.name == "token_embd.weight" && !tied)
      b += double(t.bytes) / double(std::max<int64_t>(1, t.rows()));
    else if (t.name.find("_exps.") != std::string::npos)
      b += double(t.bytes) * expert_share;
    else
      b += double(t.bytes);
  }
  return b;
}

ReadWall measure_read_wall(const std::string& devices) {
  ReadWall w;
#ifdef JITLLM_HAVE_CUDA
  if (devices != "cpu") {
    w.gbs = cuda::read_wall_gbs(devices.size() > 5 ? std::stoi(devices.substr(5)) : 0);
    w.how = devices + " (read-only reduction)";
  }
#else
  (void)devices;
#endif
  if (w.gbs == 0) {
    w.gbs = host_read_wall_gbs();
    w.how = fmt::format("{} threads", ThreadPool::global().size());
  }
  return w;
}

}  // namespace jitllm
