// The default elementwise kernels of CpuKernels (see reference_kernels.h): plain loops split over
// the pool. They are the oracle and, until a family's profile says otherwise, the hot path too:
// each is one pass over an activation, small beside the matmuls around it.
#include <algorithm>
#include <cmath>

#include "backend/cpu/reference_kernels.h"
#include "core/thread_pool.h"

namespace jitllm {

namespace {

// Splits [0, count) over the pool in pieces of at least 4096 elements.
template <typename F>
void for_pieces(int64_t count, F&& f) {
  if (count <= 4096) return f(int64_t(0), count);
  ThreadPool::global().parallel_for(count, 4096, f);
}

}  // namespace

float gelu_tanh(float x) {
  // GELU's tanh approximation, as transformers' gelu_pytorch_tanh and ggml's gelu compute it.
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}

void CpuKernels::geglu(const float* gate, const float* up, float* out, int64_t count) const {
  for_pieces(count, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
  });
}

void CpuKernels::swiglu_oai(const float* gate, const float* up, float* out, int64_t count,
                            float alpha, float limit) const {
  for_pieces(count, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = std::min(gate[i], limit);
      const float u = std::clamp(up[i], -limit, limit);
      out[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
    }
  });
}

void CpuKernels::add_rows(float* x, const float* bias, int64_t n, int64_t dim) const {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < dim; ++i) x[t * dim + i] += bias[i];
}

void CpuKernels::scale(float* x, float s, int64_t count) const {
  for (int64_t i = 0; i < count; ++i) x[i] *= s;
}

void CpuKernels::softcap(float* x, float cap, int64_t count) const {
  const float inv = 1.0f / cap;
  for_pieces(count, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] = cap * std::tanh(x[i] * inv);
  });
}

void CpuKernels::layer_norm(const float* x, const float* w, const float* b, int64_t n, int64_t dim,
                            float eps, float* out) const {
  // Mean and variance accumulated in double, as ggml_norm does (sums of hundreds of floats).
  ThreadPool::global().parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x + t * dim;
      float* o = out + t * dim;
      double sum = 0.0;
      for (int64_t i = 0; i < dim; ++i) sum += xr[i];
      const float mean = float(sum / double(dim));
      double var = 0.0;
      for (int64_t i = 0; i < dim; ++i) var += double(xr[i] - mean) * double(xr[i] - mean);
      const float inv = 1.0f / std::sqrt(float(var / double(dim)) + eps);
      for (int64_t i = 0; i < dim; ++i) {
        const float y = (xr[i] - mean) * inv;
        o[i] = y * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
      }
    }
  });
}

void CpuKernels::gelu_erf(const float* x, float* out, int64_t count) const {
  for_pieces(count, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * float(M_SQRT1_2)));
  });
}

}  // namespace jitllm
