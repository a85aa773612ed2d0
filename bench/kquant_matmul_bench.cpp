// Matmul throughput of the K-quants in backend/cpu/jit_kquant_matmul.h (Q2_K, Q3_K, Q5_K), with
// Q4_K (jit_matmul_emit.cpp) beside them for scale: generated kernels vs the reference path.
// Decode: one token, 8192 x 2048 weights (fits L3) and 65536 x 2048 (does not): weight GB/s.
// Prefill: 512 tokens x 2048 x 2048: GFLOP/s. Global pool (JITLLM_CORES / all CPUs).
// Run: bench_kquant_matmul --benchmark_filter=Decode
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "bench_weights.h"
#include "quant/quant.h"
#include "runtime/cpu_kernels.h"

namespace jitllm {
namespace {

using Q = QuantType;

using bench::weights;

void run(benchmark::State& state, Q type, const CpuKernels& kernels, int64_t rows, int64_t k,
         int64_t n) {
  const size_t w_bytes = bench::time_matmul(state, kernels, type, rows, k, n);
  if (n == 1)
    state.counters["GB/s"] = benchmark::Counter(double(w_bytes) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
  else
    state.counters["GFLOP/s"] = benchmark::Counter(
        2e-9 * double(rows) * double(k) * double(n) * double(state.iterations()),
        benchmark::Counter::kIsRate);
}

void register_all() {
  for (Q t : {Q::Q2_K, Q::Q3_K, Q::Q5_K, Q::Q4_K})
    for (const char* which : {"jit", "reference"}) {
      const CpuKernels* k = &resolve_cpu_kernels(which);
      const std::string name = std::string(quant_name(t)) + "/" + which;
      for (int64_t rows : {8192, 65536})
        benchmark::RegisterBenchmark(("Decode" + std::to_string(rows) + "x2048/" + name).c_str(),
                                     [=](benchmark::State& s) { run(s, t, *k, rows, 2048, 1); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      benchmark::RegisterBenchmark(("Prefill512x2048x2048/" + name).c_str(),
                                   [=](benchmark::State& s) { run(s, t, *k, 2048, 2048, 512); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
}

}  // namespace
}  // namespace jitllm

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  jitllm::register_all();
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
