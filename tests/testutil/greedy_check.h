// Greedy continuation against a reference's ids "where the reference margin allows": a random
// tiny model often has near-ties, where float16 weights and activations may pick the other token
// with every logit still within tolerance. The ids must agree until the first difference, and
// there the reference's token must be within `tie` of our pick in our own logits (a tie within
// tolerance, after which the sequences legitimately part); anything else is a wrong token.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace jitllm::testing {

struct GreedyCheck {
  bool ok = true;
  size_t agreed = 0;    // leading ids equal to the reference's
  std::string detail;   // why not ok, or where a tie parted the sequences
};

// last: the logits after the prompt; decode(id) returns the logits after feeding id.
inline GreedyCheck check_greedy(std::vector<float> last, const std::vector<int32_t>& want,
                                const std::function<std::vector<float>(int32_t)>& decode,
                                float tie) {
  GreedyCheck r;
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t got = int32_t(std::max_element(last.begin(), last.end()) - last.begin());
    if (got != want[i]) {
      const float gap = last[size_t(got)] - last[size_t(want[i])];
      r.detail = "token " + std::to_string(i) + ": " + std::to_string(got) + " where the reference has " +
                 std::to_string(want[i]) + ", logit gap " + std::to_string(gap);
      r.ok = gap <= tie;
      return r;
    }
    ++r.agreed;
    if (i + 1 < want.size()) last = decode(got);
  }
  return r;
}

}  // namespace jitllm::testing
