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

// A decode step's matvecs in the model's order over 16 distinct layers of the 1B's shapes
// (q/k/v and gate/up grouped as the engine groups them; v and down Q6_K as in Q4_K_M files),
// 620 MB in all: what the weights stream at when the matrices are layer-sized, not head-sized.
void layers(benchmark::State& state) {
  struct Mat {
    HugeBuffer w;
    std::unique_ptr<jit::RepackedMatrix> rp;
    int64_t rows, k;
    Q type;
  };
  struct Layer { Mat m[7]; };  // q k v o gate up down
  const struct { Q type; int64_t rows, k; } shapes[7] = {
      {Q::Q4_K, 2048, 2048}, {Q::Q4_K, 512, 2048}, {Q::Q6_K, 512, 2048}, {Q::Q4_K, 2048, 2048},
      {Q::Q4_K, 8192, 2048}, {Q::Q4_K, 8192, 2048}, {Q::Q6_K, 2048, 8192}};
  std::vector<Layer> ls(size_t(state.range(0)));
  size_t bytes = 0;
  for (Layer& l : ls)
    for (int i = 0; i < 7; ++i) {
      l.m[i].w = weights(shapes[i].type, shapes[i].rows, shapes[i].k);
      l.m[i].rp = jit::repack_matrix(shapes[i].type, l.m[i].w.data(), shapes[i].rows, shapes[i].k);
      l.m[i].rows = shapes[i].rows;
      l.m[i].k = shapes[i].k;
      l.m[i].type = shapes[i].type;
      bytes += row_bytes(shapes[i].type, shapes[i].k) * size_t(shapes[i].rows);
    }
  std::vector<float> x(8192, 0.5f), out(8192 * 2 + 4096);
  const jit::Isa isa = jit::selected_isa();
  auto target = [&](Mat& m, float* o) { return jit::MatvecTarget{m.type, m.w.data(), m.rows, o, m.rp.get()}; };
  for (auto _ : state) {
    for (Layer& l : ls) {
      x[0] += 1e-3f;
      const jit::MatvecTarget qkv[3] = {target(l.m[0], out.data()), target(l.m[1], out.data() + 2048),
                                        target(l.m[2], out.data() + 2560)};
      jit::matvec_group(isa, qkv, 2048, x.data(), ThreadPool::global());
      x[1] += 1e-3f;
      const jit::MatvecTarget o = target(l.m[3], out.data());
      jit::matvec_group(isa, {&o, 1}, 2048, x.data(), ThreadPool::global());
      x[2] += 1e-3f;
      const jit::MatvecTarget gu[2] = {target(l.m[4], out.data()), target(l.m[5], out.data() + 8192)};
      jit::matvec_group(isa, gu, 2048, x.data(), ThreadPool::global());
      x[3] += 1e-3f;
      const jit::MatvecTarget d = target(l.m[6], out.data());
      jit::matvec_group(isa, {&d, 1}, 8192, x.data(), ThreadPool::global());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(double(bytes) * double(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

void register_all() {
  benchmark::RegisterBenchmark("layers/1B-Q4_K_M", layers)->Arg(16)->Arg(4)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (Q t : {Q::Q8_0, Q::Q4_K, Q::Q6_K})
    for (int64_t rows : {int64_t(4 * 128256), int64_t(128256), int64_t(8192)})
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
