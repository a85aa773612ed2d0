// Penalty window (see penalties.h).
#include "sample/penalties.h"

#include <algorithm>

namespace jitllm {

void PenaltyWindow::accept(int32_t token) {
  if (last_n_ == 0) return;
  window_.push_back(token);
  ++counts_[token];
  if (last_n_ > 0 && window_.size() > size_t(last_n_)) {
    const int32_t old = window_.front();
    window_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

void PenaltyWindow::clear() {
  window_.clear();
  counts_.clear();
}

std::vector<int32_t> PenaltyWindow::tokens() const {
  std::vector<int32_t> out;
  out.reserve(counts_.size());
  for (const auto& [token, n] : counts_) out.push_back(token);
  std::sort(out.begin(), out.end());
  return out;
}

int32_t PenaltyWindow::count(int32_t token) const {
  auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

void PenaltyWindow::apply(Candidates& cur, float repeat, float frequency, float presence) const {
  if (counts_.empty() || (repeat == 1.0f && frequency == 0.0f && presence == 0.0f)) return;
  for (auto& c : cur.data) {
    auto it = counts_.find(c.id);
    if (it == counts_.end()) continue;
    const int32_t n = it->second;
    // Dividing a negative logit would make the token more likely, so negatives are multiplied.
    if (c.logit <= 0.0f) {
      c.logit *= repeat;
    } else {
      c.logit /= repeat;
    }
    c.logit -= float(n) * frequency + presence;
  }
  cur.sorted = false;
}

}  // namespace jitllm
