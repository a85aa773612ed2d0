// JitKernels: construction, the in-process cache of emitted matmul kernels, and the process-wide
// instances. The ops themselves live beside their concern: jit_matmul_dispatch.cpp (matmuls),
// jit_elementwise.cpp (norms, RoPE, SwiGLU, adds, row copies), jit_attention.cpp.
#include "backend/cpu/jit_kernels.h"

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_matvec.h"
#include "backend/cpu/jit_repack.h"
#include "backend/cpu/tuning.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace jitllm {

namespace {

const char* isa_kernel_name(jit::Isa isa) {
  switch (isa) {
    case jit::Isa::Avx2: return "jit-avx2";
    case jit::Isa::AvxVnni: return "jit-avxvnni";
    case jit::Isa::Avx512Vnni: return "jit-avx512";
  }
  return "jit";
}

}  // namespace

size_t JitKernels::KeyHash::operator()(const jit::MatKey& k) const {
  size_t h = size_t(k.type);
  h = h * 1000003u ^ size_t(k.k);
  h = h * 1000003u ^ size_t(k.rows * 64 + k.tokens);
  h = h * 1000003u ^ size_t(k.isa);
  return h;
}

JitKernels::JitKernels(jit::Isa isa, bool amx)
    : isa_(isa), amx_(amx), name_(amx ? "jit-amx" : isa_kernel_name(isa)), ref_(reference_kernels()) {
  if (!jit::cpu_supports(isa)) throw_error("jit kernels: this CPU cannot run {}", jit::isa_name(isa));
  if (amx && (isa != jit::Isa::Avx512Vnni || !jit::amx_usable()))
    throw_error("jit kernels: AMX tiles need an AMX CPU that lets this process use them, with avx512");
}

const jit::MatKernel& JitKernels::mat_kernel(const jit::MatKey& key) const {
  std::lock_guard lock(mutex_);
  auto& slot = cache_[key];
  if (!slot) slot = std::make_unique<jit::MatKernel>(key);
  return *slot;
}

std::unique_ptr<PreparedWeights> JitKernels::prepare_weights(QuantType type,
                                                             const uint8_t* weights, int64_t rows,
                                                             int64_t k) const {
  if (!jit::repack_enabled() || !jit::repack_supported(type) ||
      !jit::matvec_supported(type, isa_, k) || rows <= 0)
    return nullptr;
  return jit::repack_matrix(type, weights, rows, k, &ThreadPool::global());
}

bool JitKernels::prefill_reads_prepared(QuantType type, int64_t k) const {
  return amx_ && jit::repack_enabled() && jit::repack_supported(type) &&
         jit::matvec_supported(type, isa_, k) && jit::amx_supported(type, k);
}

bool JitKernels::rows_from_prepared(const PreparedWeights& copy, const int32_t* ids, int64_t n,
                                    uint8_t* dst) const {
  const auto* m = dynamic_cast<const jit::RepackedMatrix*>(&copy);
  if (!m) return false;
  const jit::AmxSource src{m->type, m->k, nullptr, 0, m};
  const size_t bb = quant_traits(m->type).block_bytes, rb = row_bytes(m->type, m->k);
  const int64_t nb = m->k / quant_traits(m->type).block_elems;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= m->rows) throw_error("row {} of a {}-row copy", ids[i], m->rows);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* at = dst + size_t(i) * rb + size_t(b) * bb;
      src.block(ids[i], b, at);  // assembled in place: the copy is interleaved
    }
  }
  return true;
}

const CpuKernels& jit_kernels() {
  static const JitKernels kernels(jit::selected_isa(), jit::selected_amx());
  return kernels;
}

}  // namespace jitllm
