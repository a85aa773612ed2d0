// Decode matvec weight throughput (jit_matvec.h): GGUF-layout kernels vs the row-interleaved
// copies in huge pages (jit_repack.h), per format, on the 1B's 128256 x 2048 output head shape
// (DRAM-sized: 184-279 MB) and 8192 x 2048 (an FFN matrix, L3-sized for Q4_K). Reports weight
// GB/s; and the repack itself. Threads: the global pool (JITLLM_CORES=1 for one core).
// Run: bench_matvec [--benchmark_filter=Q8_0]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_matvec.h"
#include "backend/cpu/jit_repack.h"
#include "core/huge_buffer.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using Q = QuantType;

// 64 distinct quantized rows, repeated (quantizing 128k rows is slow), in a huge-page buffer for
// both layouts so only the layout differs.
HugeBuffer weights(Q type, int64_t rows, int64_t k) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  const size_t rb = row_bytes(type, k);
  HugeBuffer w(rb * size_t(rows));
  for (int64_t r = 0; r < 64 && r < rows; ++r) {
    for (float& v : x) v = nd(rng);
    quantize_row(type, x.data(), w.data() + size_t(r) * rb, k);
  }
  for (int64_t r = 64; r < rows; ++r)
    std::memcpy(w.data() + size_t(r) * rb, w.data() + size_t(r % 64) * rb, rb);
  return w;
}

void run(benchmark::State& state, Q type, int64_t rows, int64_t k, bool packed) {
  const HugeBuffer w = weights(type, rows, k);
  const auto rp = packed ? jit::repack_matrix(type, w.data(), rows, k) : nullptr;
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k)), out(static_cast<size_t>(rows));
  for (float& v : x) v = nd(rng);
  const jit::Isa isa = jit::selected_isa();
  const jit::MatvecTarget t{type, w.data(), rows, out.data(), rp.get()};
  for (auto _ : state) {
    x[0] += 1e-3f;  // a new activation each call (no packed-activation cache hit)
    jit::matvec_group(isa, {&t, 1}, k, x.data(), ThreadPool::global());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(double(row_bytes(type, k) * size_t(rows)) *
                                                  double(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

// The one-time copy into the interleaved layout, fresh huge pages included (what a model's first
// decode step pays per matrix): GB/s of weights.
void repack(benchmark::State& state, Q type, int64_t rows, int64_t k) {
  const HugeBuffer w = weights(type, rows, k);
  for (auto _ : state) {
    auto m = jit::repack_matrix(type, w.data(), rows, k, &ThreadPool::global());
    benchmark::DoNotOptimize(m->main);
  }
  state.counters["GB/s"] = benchmark::Counter(double(row_bytes(type, k) * size_t(rows)) *
                                                  double(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

void register_all() {
  for (Q t : {Q::Q8_0, Q::Q4_K, Q::Q6_K})
    for (int64_t rows : {int64_t(128256), int64_t(8192)})
      for (bool packed : {false, true}) {
        const std::string name = std::string(quant_name(t)) + "/" + std::to_string(rows) +
                                 "x2048/" + (packed ? "packed" : "gguf");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
          run(s, t, rows, 2048, packed);
        })->Unit(benchmark::kMillisecond)->UseRealTime();
      }
  for (Q t : {Q::Q8_0, Q::Q4_K, Q::Q6_K})
    benchmark::RegisterBenchmark((std::string("repack/") + quant_name(t) + "/128256x2048").c_str(),
                                 [=](benchmark::State& s) { repack(s, t, 128256, 2048); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

}  // namespace
}  // namespace jitllm

int main(int argc, char** argv) {
  jitllm::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
