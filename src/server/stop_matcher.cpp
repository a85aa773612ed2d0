// StopMatcher: hold back what could still become a stop string, release the rest.
#include "server/stop_matcher.h"

#include <algorithm>

namespace jitllm::server {

std::string StopMatcher::push(const std::string& piece) {
  if (stopped_) return "";
  pending_ += piece;
  // The earliest complete stop string wins (ties: the longer one, as it starts at the same place).
  size_t best = std::string::npos;
  for (const auto& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at != std::string::npos && (best == std::string::npos || at < best ||
                                    (at == best && stop.size() > matched_.size()))) {
      best = at;
      matched_ = stop;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return "";
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace jitllm::server
