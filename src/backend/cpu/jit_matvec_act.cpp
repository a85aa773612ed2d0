// Packed activation of the decode matvec kernels (layouts in jit_matvec.h): the GEMM's generated
// activation quantizer (pack_activation: quants and scales exactly quantize_activation's, i.e.
// ggml's), rearranged into per-block records the kernels walk with one pointer and constant
// offsets.
#include <cstring>

#include "backend/cpu/jit_matmul.h"
#include "backend/cpu/jit_matvec.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

constexpr size_t kKRecord = 320;    // Q4_K / Q6_K: quants 256, sums 32, d 4, padding
constexpr size_t kQ8Record = 128;   // Q8_0: quants 2 x 32, corrections 2 x 32

// Q4_K's group order within a super-block for the zmm kernel: a 64-byte weight load holds groups
// 4i, 4i+2 in its low nibbles and 4i+1, 4i+3 in its high nibbles (ymm kernels: natural order).
constexpr int kQ4KGroupAt[8] = {0, 2, 1, 3, 4, 6, 5, 7};

}  // namespace

size_t matvec_act_bytes(QuantType type, int64_t k) {
  switch (type) {
    case QuantType::Q4_K:
    case QuantType::Q6_K: return size_t(k / kQK_K) * kKRecord;
    case QuantType::Q8_0: return size_t(k / kQK) * (kQ8Record + 4);
    default: throw_error("matvec activation: no layout for {}", quant_name(type));
  }
}

void pack_matvec_act(QuantType type, Isa isa, const float* x, int64_t k, uint8_t* dst) {
  matvec_act_bytes(type, k);  // throws for a format without a layout
  // The generated quantizer of the GEMM activation (jit_act.cpp, bytes identical to
  // quantize_activation's: 20x faster than the scalar reference for Q8_0), then rearranged.
  const ActLayout l = act_layout(type, k);
  thread_local AlignedPtr<uint8_t> tmp;
  thread_local size_t cap = 0;
  if (l.bytes > cap) {
    cap = l.bytes;
    tmp = make_aligned<uint8_t>(cap, 64);
  }
  pack_activation(type, isa, x, k, 1, tmp.get());
  const auto* qs = reinterpret_cast<const int8_t*>(tmp.get() + l.qs);
  const auto* d = reinterpret_cast<const float*>(tmp.get() + l.d);
  if (type == QuantType::Q4_K || type == QuantType::Q6_K) {
    const auto* s32 = reinterpret_cast<const int32_t*>(tmp.get() + l.s32);  // sums of 32
    const auto* s16 = reinterpret_cast<const int16_t*>(tmp.get() + l.s16);  // sums of 16
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      uint8_t* rec = dst + size_t(i) * kKRecord;
      const int8_t* q = qs + i * kQK_K;
      auto* sums = reinterpret_cast<int16_t*>(rec + 256);
      if (type == QuantType::Q4_K) {
        for (int p = 0; p < 8; ++p)
          std::memcpy(rec + 32 * p, q + 32 * (isa == Isa::Avx512Vnni ? kQ4KGroupAt[p] : p), 32);
        for (int g = 0; g < 8; ++g) {
          sums[g] = 0;  // lanes facing the 8 group scales of the weights' scale vector
          sums[8 + g] = int16_t(s32[8 * i + g]);  // |sum| <= 32 * 128
        }
      } else {
        std::memcpy(rec, q, 256);
        std::memcpy(sums, s16 + 16 * i, 32);
      }
      std::memcpy(rec + 288, d + i, 4);
      std::memset(rec + 292, 0, kKRecord - 292);
    }
    return;
  }
  const int64_t nb = k / kQK;
  auto* dd = reinterpret_cast<float*>(dst + size_t(nb) * kQ8Record);
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* rec = dst + size_t(i) * kQ8Record;
    const int8_t* q = qs + i * kQK;
    std::memcpy(rec, q, 32);
    std::memcpy(rec + 32, q, 32);
    int32_t corr[8];
    for (int ln = 0; ln < 8; ++ln)
      corr[ln] = -128 * (q[4 * ln] + q[4 * ln + 1] + q[4 * ln + 2] + q[4 * ln + 3]);
    std::memcpy(rec + 64, corr, 32);  // the weights enter as w + 128 (unsigned)
    std::memcpy(rec + 96, corr, 32);
    dd[i] = d[i];
  }
}

}  // namespace jitllm::jit
