// The stateless stages of a sampler chain: each narrows or rescales a candidate list in place,
// with llama.cpp's semantics (src/llama-sampler.cpp of b10472). Stateful stages (penalties) and
// the final draw live elsewhere. Must not know about models or devices.
#pragma once

#include "sample/candidates.h"

#include <cstddef>
#include <cstdint>

namespace jitllm {

// Keeps the k highest logits, sorted (ties: lower id first). k <= 0 disables. Ignores min_keep,
// as llama.cpp does.
void apply_top_k(Candidates& cur, int32_t k);

// Nucleus: sorts by probability (softmax of the current logits) and keeps the shortest prefix
// whose cumulative probability reaches p, the token that crosses p included; at least min_keep.
// p >= 1 disables.
void apply_top_p(Candidates& cur, float p, size_t min_keep);

// Keeps tokens whose probability is at least p times the most likely token's, i.e. whose logit is
// >= max_logit + log(p); at least min_keep (the best ones). p <= 0 disables.
void apply_min_p(Candidates& cur, float p, size_t min_keep);

// Locally typical sampling: entropy H of the current distribution; candidates ordered by
// |-log p_i - H| (closest to the entropy first); keeps the shortest prefix whose cumulative
// probability exceeds p (strictly), at least min_keep. Leaves the list unsorted. p >= 1 disables.
void apply_typical(Candidates& cur, float p, size_t min_keep);

// Divides every logit by t (t > 0).
void apply_temperature(Candidates& cur, float t);

// Index (into cur.data) of the highest logit, the lowest id among equal logits.
size_t argmax_candidate(const Candidates& cur);

}  // namespace jitllm
