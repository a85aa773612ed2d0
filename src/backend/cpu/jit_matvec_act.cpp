// Packed activation of the decode matvec kernels (layouts in jit_matvec.h): the reference
// activation quantization (quantize_activation, so the quants and scales are exactly ggml's),
// rearranged into per-block records the kernels walk with one pointer and constant offsets.
#include <cstring>
#include <vector>

#include "backend/cpu/jit_matvec.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

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
  const QuantType act_type = quant_traits(type).vec_dot_type;
  thread_local std::vector<uint8_t> blocks;
  blocks.resize(row_bytes(act_type, k));
  quantize_activation(type, x, blocks.data(), k);
  if (type == QuantType::Q4_K || type == QuantType::Q6_K) {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(blocks.data());
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      uint8_t* rec = dst + size_t(i) * kKRecord;
      auto* sums = reinterpret_cast<int16_t*>(rec + 256);
      if (type == QuantType::Q4_K) {
        for (int p = 0; p < 8; ++p)
          std::memcpy(rec + 32 * p, b[i].qs + 32 * (isa == Isa::Avx512Vnni ? kQ4KGroupAt[p] : p), 32);
        for (int g = 0; g < 8; ++g) {
          sums[g] = 0;  // lanes facing the 8 group scales of the weights' scale vector
          sums[8 + g] = int16_t(b[i].bsums[2 * g] + b[i].bsums[2 * g + 1]);
        }
      } else {
        std::memcpy(rec, b[i].qs, 256);
        std::memcpy(sums, b[i].bsums, 32);
      }
      std::memcpy(rec + 288, &b[i].d, 4);
      std::memset(rec + 292, 0, kKRecord - 292);
    }
    return;
  }
  if (type == QuantType::Q8_0) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(blocks.data());
    const int64_t nb = k / kQK;
    auto* d = reinterpret_cast<float*>(dst + size_t(nb) * kQ8Record);
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* rec = dst + size_t(i) * kQ8Record;
      std::memcpy(rec, b[i].qs, 32);
      std::memcpy(rec + 32, b[i].qs, 32);
      auto* corr = reinterpret_cast<int32_t*>(rec + 64);
      for (int l = 0; l < 8; ++l) {
        int s = 0;
        for (int j = 0; j < 4; ++j) s += b[i].qs[4 * l + j];
        corr[l] = corr[l + 8] = -128 * s;  // the weights enter as w + 128 (unsigned)
      }
      d[i] = fp16_to_f32(b[i].d);
    }
    return;
  }
  throw_error("matvec activation: no layout for {}", quant_name(type));
}

}  // namespace jitllm::jit
