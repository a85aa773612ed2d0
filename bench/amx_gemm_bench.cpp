// Prompt GEMM throughput of the AMX tiles (backend/cpu/jit_amx.h) against the AVX-512 kernels on
// the same machine, at Llama-3.2-1B shapes (2048 x 2048, 8192 x 2048, 2048 x 8192) and 512
// tokens: effective GMAC/s (rows x k x tokens per second), the share of an AMX call spent
// unpacking panels, and 2-16 tokens (sessions together). Global pool (JITLLM_CORES / all CPUs).
// Skips without usable AMX.
// Run: bench_amx_gemm [--benchmark_filter=Q4_K]
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_kernels.h"
#include "bench_weights.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

using Q = QuantType;

using bench::weights;

void gemm(benchmark::State& state, Q type, bool amx, int64_t rows, int64_t k, int64_t n) {
  if (amx && !jit::amx_usable()) return state.SkipWithError("no usable AMX on this CPU");
  const JitKernels kernels(jit::Isa::Avx512Vnni, amx);
  bench::time_matmul(state, kernels, type, rows, k, n);
  state.counters["GMAC/s"] = benchmark::Counter(double(rows * k * n) * double(state.iterations()) * 1e-9,
                                                benchmark::Counter::kIsRate);
}

// One thread unpacking every panel of the matrix: seconds per call, for the share above.
void pack(benchmark::State& state, Q type, int64_t rows, int64_t k) {
  const auto w = weights(type, rows, k);
  std::vector<uint8_t> panel(jit::amx_panel_bytes(type, k) + 64);
  for (auto _ : state)
    for (int64_t r = 0; r < rows; r += jit::kAmxRows) {
      jit::amx_pack_panel({type, k, w.data(), int64_t(row_bytes(type, k))}, r, jit::kAmxRows,
                          panel.data());
      benchmark::DoNotOptimize(panel.data());
    }
  state.counters["GB/s in"] = benchmark::Counter(double(w.size()) * double(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void register_all() {
  struct Shape {
    const char* name;
    int64_t rows, k;
  };
  const Shape shapes[] = {{"2048x2048", 2048, 2048}, {"8192x2048", 8192, 2048},
                          {"2048x8192", 2048, 8192}};
  for (Q t : {Q::Q8_0, Q::Q4_0, Q::Q4_K, Q::Q6_K})
    for (const Shape& s : shapes) {
      for (bool amx : {false, true})
        benchmark::RegisterBenchmark(
            (std::string("Gemm512/") + quant_name(t) + "/" + s.name + (amx ? "/amx" : "/avx512")).c_str(),
            [=](benchmark::State& st) { gemm(st, t, amx, s.rows, s.k, 512); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      benchmark::RegisterBenchmark((std::string("PackPanels/") + quant_name(t) + "/" + s.name).c_str(),
                                   [=](benchmark::State& st) { pack(st, t, s.rows, s.k); })
          ->Unit(benchmark::kMillisecond);
    }
  // Few tokens (sessions decoding together): where the AMX tiles, which unpack every panel per
  // call, start to pay against the AVX-512 tiles.
  for (Q t : {Q::Q8_0, Q::Q4_K, Q::Q6_K})
    for (int64_t n : {2, 4, 8, 16})
      for (bool amx : {false, true})
        benchmark::RegisterBenchmark(
            (std::string("GemmFew/") + quant_name(t) + "/2048x2048/n" + std::to_string(n) +
             (amx ? "/amx" : "/avx512")).c_str(),
            [=](benchmark::State& st) { gemm(st, t, amx, 2048, 2048, n); })
            ->Unit(benchmark::kMicrosecond)
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
