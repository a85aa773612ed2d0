// Matmul throughput of the formats in backend/cpu/jit_formats.h (F16, BF16, Q4_1, Q5_0, Q5_1,
// IQ4_NL, MXFP4; Q4_0 and Q8_0 for comparison): generated kernels vs the reference path, decode (one token, 8192 x 2048 weights:
// weight GB/s) and prefill (512 tokens, 2048 x 2048: GFLOP/s), on the global pool
// (JITLLM_CORES / all CPUs). Run: bench_formats_matmul --benchmark_filter=Decode
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "core/fp16.h"
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
  // Q4_0 and Q8_0 (jit_matmul.h's kernels) as the yardstick of a tuned format.
  const Q formats[] = {Q::F16,   Q::BF16,  Q::Q4_1, Q::Q5_0, Q::Q5_1,
                       Q::IQ4_NL, Q::MXFP4, Q::Q4_0, Q::Q8_0};
  for (Q t : formats)
    for (const char* which : {"jit", "reference"}) {
      const CpuKernels* k = &resolve_cpu_kernels(which);
      const std::string name = std::string(quant_name(t)) + "/" + which;
      benchmark::RegisterBenchmark(("Decode8192x2048/" + name).c_str(),
                                   [=](benchmark::State& s) { run(s, t, *k, 8192, 2048, 1); })
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
