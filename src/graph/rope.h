// Rotary position embedding parameters and the cos/sin tables every backend shares (the card
// gets them from the host), so all backends rotate by the same bits.
#pragma once

namespace jitllm {

enum class RopeMode { Normal, Neox };  // Normal: rotate pairs (2i, 2i+1); Neox: (i, i + n_rot/2)

struct RopeParams {
  int n_rot = 0;                 // rotated dimensions per head (<= head_dim, even)
  RopeMode mode = RopeMode::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;       // 1/factor for linear scaling
  const float* freq_factors = nullptr;  // [n_rot/2] divisors of theta (llama3 rope_freqs), or null
  float ext_factor = 0.0f;       // YaRN mix (0 = off)
  float attn_factor = 1.0f;      // magnitude scale of cos/sin
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int n_ctx_orig = 0;            // YaRN original context
  // The YaRN correction range rounded out to whole dimensions (ggml, and transformers' default);
  // false keeps it fractional (transformers' `truncate: false`, gpt-oss's configs).
  bool yarn_truncate = true;
};

// The YaRN correction range of `p` (dims where interpolation blends into extrapolation, as ggml
// computes it), and the cos/sin of each rotated pair at `position` (cache: [n_rot], cos at 2i,
// sin at 2i+1), advanced by repeated float multiplication as ggml's rope cache is, so angles
// agree to the last bit.
void yarn_corr_dims(const RopeParams& p, float dims[2]);
void rope_cache(float position, const RopeParams& p, const float corr[2], float* cache);

}  // namespace jitllm
