// A grammar matched against a vocabulary: which tokens may come next, and the state after one.
//
// The grammar runs as a pushdown automaton over bytes: a stack of positions (grammar.h) is one
// way the text so far can continue; a state is the set of such stacks. States are interned and
// their byte transitions filled in lazily (a DFA over stack sets, built as text is seen), so the
// walk of the vocabulary trie that finds a state's allowed tokens is one table lookup per trie
// node, and the allowed-token mask of a state that comes back (inside a JSON string every
// character leads back to the same state) is computed once. Rule references that end an
// alternative are tail calls (nothing to return to), so repetitions keep stacks flat.
//
// No Debian package matches grammars against a tokenizer's vocabulary for C++ (llama.cpp's
// matcher lives inside libllama, xgrammar/outlines are not packaged): written here.
//
// One Matcher per request, shared by its choices: every call locks, so several threads may
// use it. Sizes are bounded (kMaxStates, kMaxStacks); past them a call throws jitllm::Error.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "constrain/grammar.h"
#include "constrain/vocabulary.h"
#include "core/error.h"

namespace jitllm::constrain {

// A grammar that parsed but is too large or too ambiguous to match within the matcher's bounds.
// It can surface while generating (states are built as the output reaches them): front ends
// answer it as the request's fault (HTTP 400 on `grammar`), not as a server fault.
class GrammarLimitError : public Error {
 public:
  explicit GrammarLimitError(const std::string& message) : Error(message) {}
};

class Matcher {
 public:
  using State = int32_t;
  static constexpr State kDead = -1;
  static constexpr size_t kMaxStates = 1 << 16;
  static constexpr size_t kMaxStacks = 4096;  // per state (ambiguous grammars multiply them)
  // Stacks one expansion may try (duplicates are dropped as they come, but each is work):
  // `a ::= "" | ""` used n times doubles them n times, so the bound is checked while expanding.
  static constexpr size_t kMaxExpanded = 4 * kMaxStacks;
  // Stack entries (rule positions) over all states, and over one expansion: a grammar that nests
  // as deep as the output goes while offering many alternatives at each level makes states whose
  // stacks grow with every token, and memory with the square of the output (4,000 alternatives
  // nested 20 deep held 2.7 GB). 2M entries (16 MB with the index's copy) is far above any JSON
  // Schema or hand-written grammar seen.
  static constexpr size_t kMaxStackEntries = size_t(1) << 21;
  static constexpr size_t kMaxExpandedEntries = size_t(1) << 19;

  Matcher(Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary);
  ~Matcher();

  State start() const { return 0; }
  // The grammar has matched the whole text (an end token is allowed).
  bool accepting(State s);
  // Accepting with nothing more allowed: the output is complete (only an end token could come).
  bool finished(State s);
  // The state after `text`, or kDead if the grammar refuses it.
  State advance_bytes(State s, std::string_view text);
  // The state after `token`: end tokens keep an accepting state, anything refused is kDead.
  State advance(State s, int32_t token);
  bool allows(State s, int32_t token) { return advance(s, token) != kDead; }
  // [ceil(n_vocab / 64)] bit t set = token t allowed: a copy for the calling thread, valid until
  // its next mask() call (the cache behind it keeps at most kMaxMasks states' masks).
  std::span<const uint64_t> mask(State s);
  static constexpr size_t kMaxMasks = 256;

  // How many states and masks exist so far (for tests and the cost report).
  size_t n_states();
  size_t n_masks();

 private:
  using Stack = std::vector<uint32_t>;
  struct DfaState;

  State intern(std::vector<Stack> stacks);
  void expand(Stack stack, std::vector<Stack>& out, int depth) const;
  State step(State s, uint8_t byte);  // lock held

  Grammar g_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<DfaState>> states_;
  std::unordered_map<std::string, State> index_;  // stacks serialized -> state
  size_t stack_entries_ = 0;  // over states_ (see kMaxStackEntries)
  // The expansion running (lock held): pushes tried, entries kept, the distinct stacks kept (so
  // duplicates, which ambiguous grammars make by the thousand, are neither kept nor sorted).
  struct StackHash {
    size_t operator()(const std::vector<uint32_t>& s) const noexcept;
  };
  mutable size_t expanded_tries_ = 0, expanded_entries_ = 0;
  mutable std::unordered_set<std::vector<uint32_t>, StackHash> expanded_seen_;
  std::deque<State> masked_;  // states holding a cached mask, oldest first
  std::vector<State> walk_;  // [max token length + 1] states along the trie path
};

}  // namespace jitllm::constrain
