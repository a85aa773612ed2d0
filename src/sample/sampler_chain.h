// A configured sampler chain: logits [n_vocab] -> one token id. Order of work per call:
// logit bias (always first, as in llama.cpp), then the stages of params.order, then a seeded draw
// from the softmax of what is left ("dist"). temperature <= 0 is greedy: after logit bias and
// penalties, the highest logit wins, ties to the lowest id. Owns the penalty window and the RNG
// state of one generation stream; one chain per session. Must not know about models or devices.
#pragma once

#include "sample/candidates.h"
#include "sample/penalties.h"
#include "sample/rng.h"
#include "sample/sampling_params.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace jitllm {

struct TokenProb {
  int32_t id;
  float p;
};

class SamplerChain {
 public:
  // Throws jitllm::Error for invalid params (see validate_sampling_params).
  SamplerChain(SamplingParams params, int32_t n_vocab);

  // logits: [>= n_vocab]. Only the first n_vocab are candidates: a model whose head is padded
  // past the tokenizer's last token (8192 logits, 8000 tokens) is sampled with n_vocab = the
  // tokens both know, so an id without a token can never come out. Returns the chosen token.
  // Does not accept it: call accept() with the token that is actually appended (the caller may
  // override the choice, e.g. stop strings).
  // allowed: empty, or [ceil(n_vocab / 64)] bits (bit t of word t / 64 = token t may come out):
  // a grammar's mask, applied after logit bias and before every stage, so the filters and the
  // draw see only what the grammar allows. Throws jitllm::Error when it allows nothing.
  int32_t sample(std::span<const float> logits, std::span<const uint64_t> allowed = {});

  // What a row must hold for sample_reduced() to choose exactly what sample() chooses over the
  // whole row (same token, same probabilities, same RNG draws): the row's `top` best logits
  // (logit_before order) and the logits of `touched`, the tokens the logit bias or the penalty
  // window may move. Why it is exact: a token outside both keeps its raw logit and ranks below
  // `top` = k + |touched| others, at most |touched| of which can move below it, so the k best after
  // bias and penalties are all in the reduced row, and every stage after top-k sees only them.
  // nullopt when the chain needs the whole row: drawn with no top_k (or one that is not the first
  // filter, or a temperature before it: dividing can tie distinct logits), or `top` past max_top.
  // Greedy needs only 1 + |touched|. Under a grammar's mask the row's best must be chosen among
  // the allowed tokens (sample_reduced's `allowed`).
  struct Reduction {
    int32_t top = 0;
    std::vector<int32_t> touched;  // ascending, unique
  };
  std::optional<Reduction> reduction(int32_t max_top) const;

  // sample() over a reduced row: `row` holds (id, raw logit) of at least what reduction() asked
  // for, ids unique, in any order (p unused). Same result, probabilities() and RNG use as sample()
  // on the whole row; throws as sample() does for NaN / +inf logits in `row`. With a grammar's
  // mask (`allowed`, as sample() takes it), the row's best must be chosen as if the tokens it
  // leaves out were -inf (LogitsPick::allowed): then the draw equals sample(row, allowed).
  int32_t sample_reduced(std::span<const Candidate> row, std::span<const uint64_t> allowed = {});

  // Records a token of the sequence (prompt or generated) in the penalty window.
  void accept(int32_t token);

  // Forgets the penalty window and restarts the RNG from the seed.
  void reset();

  // The distribution the last sample() drew from: the surviving candidates with probabilities
  // that sum to 1, in chain order (not necessarily by probability). Greedy: {token, 1}.
  std::span<const TokenProb> probabilities() const { return probs_; }
  // The n most likely entries of probabilities(), most likely first (ties: lower id first).
  std::vector<TokenProb> top_probabilities(size_t n) const;

  const SamplingParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }
  uint32_t seed() const { return seed_; }  // the seed in use (drawn when params.seed is random)

 private:
  void apply_logit_bias(Candidates& cur) const;
  // Penalties apply: a penalty is not neutral, the window keeps tokens and the order names them.
  bool penalties_active() const;
  void apply_mask(Candidates& cur, std::span<const uint64_t> allowed) const;
  // The greedy pick read straight off the logits, or nullopt where the full chain is needed
  // (sampling, penalties, a biased token on top).
  std::optional<int32_t> greedy_direct(std::span<const float> logits,
                                       std::span<const uint64_t> allowed) const;
  void apply_stage(SamplerStage stage, Candidates& cur);
  // The chain over cur_ once bias and mask are in: greedy's argmax, or every stage then the
  // draw; fills probs_. sample() and sample_reduced() share it.
  int32_t run_stages();
  size_t draw(const Candidates& cur);

  SamplingParams params_;
  int32_t n_vocab_;
  uint32_t seed_;
  SampleRng rng_;
  PenaltyWindow penalties_;
  Candidates cur_;                // [n_candidates] reused between calls
  std::vector<TokenProb> probs_;  // [n_candidates] of the last sample()
};

}  // namespace jitllm
