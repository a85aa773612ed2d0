// Vocabulary trie (see vocabulary.h).
#include "constrain/vocabulary.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace jitllm::constrain {

Vocabulary::Vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_tokens)
    : bytes_(std::move(bytes)), end_tokens_(std::move(end_tokens)), is_end_(bytes_.size(), 0) {
  for (int32_t t : end_tokens_) {
    if (t < 0 || size_t(t) >= bytes_.size())
      throw_error("vocabulary: end token {} is outside the vocabulary of {}", t, bytes_.size());
    is_end_[size_t(t)] = 1;
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i].empty() || is_end_[i]) continue;
    if (bytes_[i].size() > std::numeric_limits<uint16_t>::max())
      throw_error("vocabulary: token {} is {} bytes long", i, bytes_[i].size());
    order.push_back(int32_t(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)];
  });
  // Sorted strings give the preorder directly: each string adds the nodes past its common
  // prefix with the one before. open[d] is the node on the current path at depth d + 1.
  std::vector<uint32_t> open;
  const std::string* prev = nullptr;
  for (int32_t t : order) {
    const std::string& s = bytes_[size_t(t)];
    size_t common = 0;
    if (prev) {
      const size_t limit = std::min(prev->size(), s.size());
      while (common < limit && (*prev)[common] == s[common]) ++common;
    }
    if (!prev || common < s.size() || common < prev->size()) {
      // Close the nodes deeper than the common prefix, then open the rest of s.
      while (open.size() > common) {
        nodes_[open.back()].subtree_end = uint32_t(nodes_.size());
        open.pop_back();
      }
      for (size_t d = common; d < s.size(); ++d) {
        open.push_back(uint32_t(nodes_.size()));
        nodes_.push_back({uint8_t(s[d]), uint16_t(d + 1), 0, uint32_t(token_ids_.size())});
      }
    }
    // Tokens of one node are contiguous: equal strings are adjacent in the sorted order, and the
    // node just opened (or the same one again) is the last node.
    token_ids_.push_back(t);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!open.empty()) {
    nodes_[open.back()].subtree_end = uint32_t(nodes_.size());
    open.pop_back();
  }
  nodes_.push_back({0, 0, uint32_t(nodes_.size() + 1), uint32_t(token_ids_.size())});
}

bool Vocabulary::is_end(int32_t token) const {
  return token >= 0 && size_t(token) < is_end_.size() && is_end_[size_t(token)];
}

}  // namespace jitllm::constrain
