// Finds stop strings in generated text that arrives a piece at a time. A stop string may span
// token boundaries, so text that could still be the start of a stop string is held back until
// it is proven not to be one; what is released is exactly the text before the first stop.
#pragma once

#include <string>
#include <vector>

namespace jitllm::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends a piece; returns the text now safe to emit. After a stop is found, `stopped()` is
  // true, the returned text ends right before the stop string, and later pieces return "".
  std::string push(const std::string& piece);
  // End of generation: releases whatever was held back (no stop can complete any more).
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& matched_stop() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: a suffix that is a prefix of some stop string
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace jitllm::server
