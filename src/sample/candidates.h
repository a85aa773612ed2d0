// The candidate list a sampler chain narrows down: token ids with their (modified) logits and,
// once computed, probabilities. Owns the deterministic ordering every stage sorts by and the
// softmax over the candidates. Must not know about models or devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace jitllm {

struct Candidate {
  int32_t id;
  float logit;
  float p;  // probability among the current candidates; valid only after softmax_candidates
};

// Higher logit first, lower id first among equal logits. A strict total order (ids are unique),
// so std::sort and std::partial_sort give the same result on every standard library, which keeps
// seeded sampling reproducible across platforms.
inline bool logit_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

struct Candidates {
  std::vector<Candidate> data;  // [size] in chain order
  bool sorted = false;          // data is in logit_before order

  // Fills one candidate per vocabulary entry (id = index), unsorted. Throws ModelOutputError if
  // a logit is NaN or +inf (it would make every comparison or the softmax, and so the whole
  // chain, meaningless); -inf is a masked token.
  void assign(std::span<const float> logits);  // [n_vocab]
  size_t size() const { return data.size(); }

  // Sorts the whole list (no-op when already sorted).
  void sort();
  // Puts the `k` best candidates first, in order, leaving the rest in unspecified order;
  // sets `sorted` only when k covers the whole list.
  void sort_prefix(size_t k);
  // Given that the first `done` candidates are the best ones in order, extends that prefix to
  // `k` without touching it (for stages that discover how far they need to look as they go).
  void extend_sorted_prefix(size_t done, size_t k);
};

// p_i = exp(logit_i - max) / sum, in float as llama.cpp does. Leaves the order unchanged.
// -inf logits get p = 0. Throws jitllm::Error if the list is empty or every logit is -inf.
void softmax_candidates(Candidates& cur);

}  // namespace jitllm
