// RoPE tables (see rope.h): the same float recurrence as ggml's rope cache.
#include "graph/rope.h"

#include <algorithm>
#include <cmath>

namespace jitllm {

// YaRN correction range (the dimensions where interpolation blends into extrapolation), as
// ggml computes it: dims where the wavelength crosses n_ctx_orig / beta.
void yarn_corr_dims(const RopeParams& p, float dims[2]) {
  const int n_dims = p.n_rot;
  const int n_ctx_orig = p.n_ctx_orig;
  const float freq_base = p.freq_base, beta_fast = p.beta_fast, beta_slow = p.beta_slow;
  auto corr_dim = [&](float n_rot) {
    return n_dims * std::log(float(n_ctx_orig) / (n_rot * 2 * float(M_PI))) /
           (2 * std::log(freq_base));
  };
  const float start = p.yarn_truncate ? std::floor(corr_dim(beta_fast)) : corr_dim(beta_fast);
  const float end = p.yarn_truncate ? std::ceil(corr_dim(beta_slow)) : corr_dim(beta_slow);
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(float(n_dims - 1), end);
}

// cos/sin per rotated pair for one position. theta is advanced by repeated multiplication in
// float, as ggml's rope cache does, so angles agree to the last bit.
void rope_cache(float position, const RopeParams& p, const float corr[2], float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
  float theta = position;
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float ff = p.freq_factors ? p.freq_factors[i0 / 2] : 1.0f;
    const float theta_extrap = theta / ff;
    float angle = p.freq_scale * theta_extrap;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float y = (float(i0 / 2) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
      const float ramp = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      angle = angle * (1 - ramp) + theta_extrap * ramp;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[i0] = std::cos(angle) * mscale;
    cache[i0 + 1] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

}  // namespace jitllm
