// Packed activations for the generated matmuls: the reference activation quantization (so the
// quants are the reference's bytes) re-laid out as planes the kernels address with constant
// offsets: quants, float scales, per-32 int32 values, per-16 int16 sums.
#include <cstring>
#include <vector>

#include "backend/cpu/jit_matmul.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace jitllm::jit {

namespace {

size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

bool is_k_format(QuantType t) {
  return t == QuantType::Q2_K || t == QuantType::Q3_K || t == QuantType::Q4_K ||
         t == QuantType::Q5_K || t == QuantType::Q6_K;
}

// The constant folded into each 32-block's integer sum: weights stored with an offset (Q4_0's
// q - 8, Q8_0's w ^ 0x80 on VNNI) contribute offset * sum(activation quants), subtracted here.
int bias_mul(QuantType type, Isa isa) {
  switch (type) {
    case QuantType::Q4_0: return 8;
    case QuantType::Q8_0: return isa == Isa::Avx2 ? 0 : 128;
    default: return 0;
  }
}

}  // namespace

bool jit_matmul_supported(QuantType type) {
  return type == QuantType::Q8_0 || type == QuantType::Q4_0 || type == QuantType::Q4_K ||
         type == QuantType::Q6_K;
}

ActLayout act_layout(QuantType weight_type, int64_t k) {
  ActLayout l;
  l.k = k;
  const bool kq = is_k_format(weight_type);
  const int64_t nd = kq ? k / kQK_K : k / kQK;
  l.qs = 0;
  l.d = pad64(size_t(k));
  l.s32 = l.d + pad64(size_t(nd) * 4);
  l.s16 = l.s32 + pad64(size_t(k / 32) * 4);
  l.bytes = l.s16 + (kq ? pad64(size_t(k / 16) * 2) : 0);
  return l;
}

void pack_activation(QuantType weight_type, Isa isa, const float* x, int64_t k, int64_t n,
                     uint8_t* dst) {
  const ActLayout l = act_layout(weight_type, k);
  const bool kq = is_k_format(weight_type);
  const QuantType act_type = quant_traits(weight_type).vec_dot_type;
  std::vector<uint8_t> blocks(row_bytes(act_type, k));
  const int mul = bias_mul(weight_type, isa);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* p = dst + size_t(t) * l.bytes;
    auto* qs = reinterpret_cast<int8_t*>(p + l.qs);
    auto* d = reinterpret_cast<float*>(p + l.d);
    auto* s32 = reinterpret_cast<int32_t*>(p + l.s32);
    quantize_activation(weight_type, x + t * k, blocks.data(), k);
    if (kq) {
      const auto* b = reinterpret_cast<const BlockQ8_K*>(blocks.data());
      auto* s16 = reinterpret_cast<int16_t*>(p + l.s16);
      for (int64_t i = 0; i < k / kQK_K; ++i) {
        std::memcpy(qs + i * kQK_K, b[i].qs, kQK_K);
        d[i] = b[i].d;
        std::memcpy(s16 + i * 16, b[i].bsums, sizeof(b[i].bsums));
        for (int g = 0; g < 8; ++g) s32[i * 8 + g] = b[i].bsums[2 * g] + b[i].bsums[2 * g + 1];
      }
    } else {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(blocks.data());
      for (int64_t i = 0; i < k / kQK; ++i) {
        std::memcpy(qs + i * kQK, b[i].qs, kQK);
        d[i] = fp16_to_f32(b[i].d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) sum += b[i].qs[j];
        s32[i] = -mul * sum;
      }
    }
  }
}

}  // namespace jitllm::jit
