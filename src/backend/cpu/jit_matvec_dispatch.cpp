// Dispatch of the decode matvec kernels (jit_matvec.h): the activation packed once per format
// family (cached per calling thread: q/k/v and gate/up share their input, so do consecutive
// calls with the same floats), and the rows of every matrix of a group handed out in chunks from
// one atomic counter, so a q/k/v or gate/up group costs one pool wake-up, not three.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/jit_row_split.h"
#include "backend/cpu/jit_pack_cache.h"
#include "backend/cpu/jit_matvec.h"
#include "backend/cpu/jit_repack.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

int pack_family(QuantType t, Isa isa) {
  switch (t) {
    case QuantType::Q4_K: return isa == Isa::Avx512Vnni ? 0 : 3;  // group order differs
    case QuantType::Q6_K: return 1;
    default: return 2;
  }
}

// The last packed input of each family on this thread (see PackCache): families alternate
// within a layer (q/k Q4_K, v Q6_K), so each keeps its own.
const uint8_t* packed_input(QuantType type, Isa isa, const float* x, int64_t k) {
  thread_local PackCache caches[4];
  return caches[pack_family(type, isa)].get(
      0, x, k, 1, matvec_act_bytes(type, k),
      [&](uint8_t* dst) { pack_matvec_act(type, isa, x, k, dst); });
}

// Chunks per thread of a matrix's rows: two, so each thread streams long contiguous runs and one
// preempted thread still leaves its second chunk to the other (8 were slower, 1 ties:
// docs/perf/cpu.md, "Tuning measurements").
constexpr int64_t kChunksPerThread = 2;

struct Job {
  MatvecFn fn;
  const uint8_t* w;
  size_t stride;       // bytes per row (of the main plane when packed)
  const uint8_t* side;  // packed: the side plane
  size_t side_stride;
  const uint8_t* act;
  float* out;
  int64_t rows, chunk, first;  // first: index of this job's first chunk in the work list
};

}  // namespace

void matvec_group(Isa isa, std::span<const MatvecTarget> mats, int64_t k, const float* x,
                  ThreadPool& pool) {
  std::vector<Job> jobs;
  jobs.reserve(mats.size());
  int64_t n_chunks = 0;
  for (const MatvecTarget& m : mats) {
    if (!matvec_supported(m.type, isa, k))
      throw_error("jit matvec: no kernel for {} k={} on {}", quant_name(m.type), k, isa_name(isa));
    if (m.rows <= 0) continue;
    Job j;
    if (m.packed) {
      if (m.packed->type != m.type || m.packed->k != k || m.packed->rows != m.rows)
        throw_error("jit matvec: the repacked copy is {} [{}, {}], the matrix {} [{}, {}]",
                    quant_name(m.packed->type), m.packed->rows, m.packed->k, quant_name(m.type),
                    m.rows, k);
      j.fn = matvec_kernel({m.type, k, kRepackGroup, isa, true}).fn();
      j.w = m.packed->main;
      j.stride = size_t(m.packed->main_row_bytes);
      j.side = m.packed->side;
      j.side_stride = size_t(m.packed->side_row_bytes);
    } else {
      j.fn = matvec_kernel({m.type, k, matvec_rows(m.type, isa), isa}).fn();
      j.w = m.weights;
      j.stride = row_bytes(m.type, k);
      j.side = nullptr;
      j.side_stride = 0;
    }
    j.act = packed_input(m.type, isa, x, k);
    j.out = m.out;
    j.rows = m.rows;
    // kChunksPerThread per thread, 16-row multiples (so packed chunks start on a row group)
    j.chunk = row_chunk(m.rows, pool.size(), kChunksPerThread);
    j.first = n_chunks;
    n_chunks += (m.rows + j.chunk - 1) / j.chunk;
    jobs.push_back(j);
  }
  if (jobs.empty()) return;
  auto run_chunk = [&](int64_t c) {
    size_t i = 0;
    while (i + 1 < jobs.size() && jobs[i + 1].first <= c) ++i;
    const Job& j = jobs[i];
    const int64_t r0 = (c - j.first) * j.chunk, r1 = std::min(j.rows, r0 + j.chunk);
    const MatvecArgs a{j.w + size_t(r0) * j.stride, int64_t(j.stride), r1 - r0, j.act,
                       j.out + r0, j.side ? j.side + size_t(r0) * j.side_stride : nullptr};
    j.fn(&a);
  };
  if (pool.size() == 1 || n_chunks == 1) {
    for (int64_t c = 0; c < n_chunks; ++c) run_chunk(c);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < n_chunks;) run_chunk(c);
  });
}

}  // namespace jitllm::jit
