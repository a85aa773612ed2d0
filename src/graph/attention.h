// What an attention op is asked to compute, for every family: heads, K and V widths, the mask
// (causal or bidirectional, sliding window) and the score transforms (soft-cap, sinks). A
// backend that does not implement a field refuses the call with an error naming it
// (check_attention), never silently computes something else.
#pragma once

#include <string>

namespace jitllm {

struct AttnSpec {
  int n_head = 0, n_head_kv = 0;  // query head h reads KV head h / (n_head / n_head_kv)
  int head_dim_k = 0;             // per head: q and k width
  int head_dim_v = 0;             // per head: v and output width (== head_dim_k but for MLA)
  float scale = 1.0f;             // scores = q.k * scale
  bool causal = true;             // false: every row sees every position of its sequence
  int window = 0;                 // > 0: a row sees only the last `window` positions (itself incl.)
  float softcap = 0.0f;           // > 0: scores = softcap * tanh(scores / softcap) (Gemma 2)
  const float* sinks = nullptr;   // [n_head] per-head sink logits in the softmax (gpt-oss), or null
  // V is the first head_dim_v values of each K row (MLA's absorbed form: one latent per position
  // serves as K with its rope part, and as V without it), so the layer keeps one plane, K's.
  bool v_in_k = false;

  int q_dim() const { return n_head * head_dim_k; }
  int k_dim() const { return n_head_kv * head_dim_k; }
  // The V plane's row width (0 when V is read from K's rows).
  int v_dim() const { return v_in_k ? 0 : n_head_kv * head_dim_v; }
  int out_dim() const { return n_head * head_dim_v; }
  // True for the plain causal, full-window, equal-width attention every backend implements.
  bool is_plain() const {
    return causal && window == 0 && softcap == 0.0f && sinks == nullptr &&
           head_dim_k == head_dim_v && !v_in_k;
  }
};

// Throws jitllm::Error naming the first field of `spec` that `backend` does not implement (a
// backend that implements only the plain attention calls this with is_plain()'s fields).
void refuse_unplain_attention(const AttnSpec& spec, const std::string& backend);

}  // namespace jitllm
