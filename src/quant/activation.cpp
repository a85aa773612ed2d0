// Activation conversion for dot products, as ggml-cpu's from_float does it on x86 with AVX2 (the
// oracle's build): Q8_0 and Q8_1 use the AVX path, which differs from the reference quantizers
// used for model files (scale 127/amax instead of 1/(amax/127), round half to even instead of
// half away from zero), so the same floats can give different bytes here and in quantize_row.
#include <algorithm>
#include <cmath>

#include "quant/ref_kernels.h"

namespace jitllm::quant_ref {

namespace {

// One block of 32: stores the int8 quants (round half to even, saturating like packs_epi16) and
// returns d = amax / 127 and the sum of the quants.
float quantize_block_avx(const float* x, int8_t* qs, int& sum) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  sum = 0;
  for (int j = 0; j < kQK; ++j) {
    const int q = std::clamp(int(std::nearbyint(x[j] * id)), -128, 127);
    qs[j] = int8_t(q);
    sum += q;
  }
  return d;
}

}  // namespace

void activation_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    int sum;
    y[i].d = f2h(quantize_block_avx(x, y[i].qs, sum));
  }
}

void activation_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    int sum;
    const float d = quantize_block_avx(x, y[i].qs, sum);
    y[i].d = f2h(d);
    y[i].s = f2h(d * float(sum));  // d before its fp16 rounding, as ggml
  }
}

}  // namespace jitllm::quant_ref
