// Repetition penalties: the window of recently accepted tokens with per-token counts, and the
// llama.cpp rule for applying them to candidate logits. Must not know about models or devices.
#pragma once

#include "sample/candidates.h"

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace jitllm {

class PenaltyWindow {
 public:
  // last_n: how many accepted tokens are remembered; 0 remembers none, -1 remembers all.
  explicit PenaltyWindow(int32_t last_n) : last_n_(last_n) {}

  void accept(int32_t token);
  void clear();
  // How often `token` occurs among the remembered tokens.
  int32_t count(int32_t token) const;
  size_t size() const { return window_.size(); }
  // The distinct tokens of the window, ascending.
  std::vector<int32_t> tokens() const;

  // For each candidate seen n > 0 times in the window (llama.cpp's rule):
  //   logit = logit <= 0 ? logit * repeat : logit / repeat   (pushes it toward less likely)
  //   logit -= n * frequency + presence
  // Leaves the list marked unsorted. No-op when every penalty is neutral.
  void apply(Candidates& cur, float repeat, float frequency, float presence) const;

 private:
  int32_t last_n_;
  std::deque<int32_t> window_;                // oldest first
  std::unordered_map<int32_t, int32_t> counts_;  // token -> occurrences in window_
};

}  // namespace jitllm
