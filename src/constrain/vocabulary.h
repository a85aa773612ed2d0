// The vocabulary as a grammar sees it: each token's bytes in a trie laid out in depth-first
// order, so the tokens a grammar state allows are found in one walk that skips every subtree
// whose prefix the grammar refuses. Built once per model and shared by every constraint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitllm::constrain {

class Vocabulary {
 public:
  // bytes: [n_vocab] each token's text as generated; an empty string marks a token a grammar
  // never allows (control tokens). end_tokens: the tokens that end a generation, allowed
  // exactly when the grammar has matched completely.
  Vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_tokens);

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t token) const { return bytes_[size_t(token)]; }
  bool is_end(int32_t token) const;
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

  // The trie, nodes in preorder (the root is implicit). A node's parent is the closest earlier
  // node of depth - 1; subtree_end is the index just past its descendants.
  struct Node {
    uint8_t byte;
    uint16_t depth;        // 1 for a first byte
    uint32_t subtree_end;
    uint32_t first_token;  // tokens ending here: token_ids[first_token, next node's first_token)
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;
  std::vector<uint8_t> is_end_;  // [n_vocab]
  std::vector<Node> nodes_;      // [n_nodes + 1]: a sentinel at the end holds the last token range
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

}  // namespace jitllm::constrain
