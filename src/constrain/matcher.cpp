// Grammar matcher (see matcher.h).
#include "constrain/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace jitllm::constrain {

struct Matcher::DfaState {
  std::vector<Stack> stacks;          // sorted, unique; an empty stack = the root matched
  bool accepting = false;
  std::vector<State> next;            // [256] lazily: -2 unknown, kDead or a state
  std::vector<uint64_t> mask;         // [n_words] once computed
};

namespace {
constexpr Matcher::State kUnknown = -2;
constexpr int kMaxExpandDepth = 4096;
}  // namespace

Matcher::Matcher(Grammar grammar, std::shared_ptr<const Vocabulary> vocabulary)
    : g_(std::move(grammar)), vocab_(std::move(vocabulary)) {
  walk_.resize(vocab_->max_depth() + 1);
  std::vector<Stack> start;
  for (uint32_t alt : g_.alts[g_.root]) expand(Stack{alt}, start, 0);
  expanded_seen_ = {};
  intern(std::move(start));
}

Matcher::~Matcher() = default;

namespace {

[[noreturn]] void too_large() {
  throw GrammarLimitError(
      "grammar: its matcher states grew past their memory budget (the grammar nests as deep as "
      "the output goes with many alternatives at each level); simplify the grammar or shorten "
      "max_tokens");
}

[[noreturn]] void too_deep() {
  throw GrammarLimitError(fmt::format("grammar: rules nest more than {} deep", kMaxExpandDepth));
}

}  // namespace

size_t Matcher::StackHash::operator()(const std::vector<uint32_t>& s) const noexcept {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the entries
  for (uint32_t e : s) h = (h ^ e) * 1099511628211ull;
  return size_t(h);
}

void Matcher::expand(Stack s, std::vector<Stack>& out, int depth) const {
  if (depth > kMaxExpandDepth) too_deep();
  // Every path ends in one pushed stack, so bounding the pushes bounds the work; their entries
  // bound the memory (deep stacks times many of them).
  auto push = [&](Stack&& done) {
    if (out.empty()) {  // the first push of this expansion
      expanded_tries_ = expanded_entries_ = 0;
      expanded_seen_.clear();
    }
    if (++expanded_tries_ > kMaxExpanded)
      throw GrammarLimitError(fmt::format(
          "grammar: more than {} ways to continue at once (the grammar is too ambiguous)",
          kMaxExpanded));
    if (!expanded_seen_.insert(done).second) return;
    expanded_entries_ += done.size();
    if (expanded_entries_ > kMaxExpandedEntries) too_large();
    out.push_back(std::move(done));
  };
  for (;;) {
    if (s.empty()) {
      push(std::move(s));
      return;
    }
    const uint32_t pos = s.back();
    const uint32_t e = g_.code[pos];
    if (e == kEnd) {
      s.pop_back();
      continue;
    }
    if (!is_rule_ref(e)) {
      push(std::move(s));
      return;
    }
    // A reference: return past it (or nowhere, when it ends the alternative), then enter
    // each alternative of the rule.
    if (g_.code[pos + 1] == kEnd) s.pop_back();
    else s.back() = pos + 1;
    const auto& alts = g_.alts[rule_of(e)];
    for (size_t a = 0; a + 1 < alts.size(); ++a) {
      Stack t = s;
      t.push_back(alts[a]);
      expand(std::move(t), out, depth + 1);
    }
    s.push_back(alts.back());
    ++depth;
    if (depth > kMaxExpandDepth) too_deep();
  }
}

Matcher::State Matcher::intern(std::vector<Stack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return kDead;
  if (stacks.size() > kMaxStacks)
    throw GrammarLimitError(fmt::format(
        "grammar: more than {} ways to continue at once (the grammar is too ambiguous)", kMaxStacks));
  std::string key;
  for (const Stack& s : stacks) {
    const uint32_t n = uint32_t(s.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof n);
    key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
  }
  auto [it, added] = index_.try_emplace(std::move(key), State(states_.size()));
  if (!added) return it->second;
  if (states_.size() >= kMaxStates)
    throw GrammarLimitError(fmt::format(
        "grammar: more than {} matcher states (the grammar or its nesting is too large)", kMaxStates));
  size_t entries = 0;
  for (const Stack& st : stacks) entries += st.size();
  if (stack_entries_ + entries > kMaxStackEntries) {
    index_.erase(it);
    too_large();
  }
  stack_entries_ += entries;
  auto st = std::make_unique<DfaState>();
  st->accepting = stacks.front().empty();  // sorted: the empty stack comes first
  st->stacks = std::move(stacks);
  states_.push_back(std::move(st));
  return it->second;
}

Matcher::State Matcher::step(State s, uint8_t byte) {
  DfaState* st = states_[size_t(s)].get();
  if (st->next.empty()) st->next.assign(256, kUnknown);
  State& slot = st->next[byte];
  if (slot != kUnknown) return slot;
  std::vector<Stack> out;
  for (const Stack& stack : st->stacks) {
    if (stack.empty()) continue;
    const uint32_t pos = stack.back();
    if (!g_.sets[g_.code[pos]].test(byte)) continue;
    Stack t = stack;
    t.back() = pos + 1;
    expand(std::move(t), out, 0);
  }
  expanded_seen_ = {};  // its copies are not kept between expansions
  const State next = intern(std::move(out));
  states_[size_t(s)]->next[byte] = next;  // states_ may have grown: index again
  return next;
}

bool Matcher::accepting(State s) {
  std::lock_guard lock(mutex_);
  return s >= 0 && states_[size_t(s)]->accepting;
}

bool Matcher::finished(State s) {
  std::lock_guard lock(mutex_);
  return s >= 0 && states_[size_t(s)]->accepting && states_[size_t(s)]->stacks.size() == 1;
}

Matcher::State Matcher::advance_bytes(State s, std::string_view text) {
  std::lock_guard lock(mutex_);
  for (char c : text) {
    if (s < 0) return kDead;
    s = step(s, uint8_t(c));
  }
  return s;
}

Matcher::State Matcher::advance(State s, int32_t token) {
  if (s < 0 || token < 0 || size_t(token) >= vocab_->size()) return kDead;
  if (vocab_->is_end(token)) return accepting(s) ? s : kDead;
  const std::string& bytes = vocab_->bytes(token);
  if (bytes.empty()) return kDead;
  return advance_bytes(s, bytes);
}

std::span<const uint64_t> Matcher::mask(State s) {
  thread_local std::vector<uint64_t> out;
  std::lock_guard lock(mutex_);
  const size_t words = (vocab_->size() + 63) / 64;
  if (s < 0) {
    out.assign(words, 0);
    return out;
  }
  if (states_[size_t(s)]->mask.empty()) {
    std::vector<uint64_t> m(words, 0);
    const auto& nodes = vocab_->nodes();
    const auto& ids = vocab_->token_ids();
    walk_[0] = s;
    const size_t n = nodes.size() - 1;  // the last node is a sentinel
    for (size_t i = 0; i < n;) {
      const auto& node = nodes[i];
      const State next = step(walk_[node.depth - 1], node.byte);
      if (next == kDead) {
        i = node.subtree_end;
        continue;
      }
      walk_[node.depth] = next;
      for (uint32_t k = node.first_token; k < nodes[i + 1].first_token; ++k)
        m[size_t(ids[k]) >> 6] |= uint64_t(1) << (ids[k] & 63);
      ++i;
    }
    if (states_[size_t(s)]->accepting)
      for (int32_t t : vocab_->end_tokens()) m[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
    // Bounded: a long output through ever new states (a string with a large maxLength) would
    // otherwise keep a mask per token.
    if (masked_.size() >= kMaxMasks) {
      states_[size_t(masked_.front())]->mask = {};
      masked_.pop_front();
    }
    states_[size_t(s)]->mask = std::move(m);
    masked_.push_back(s);
  }
  out = states_[size_t(s)]->mask;
  return out;
}

size_t Matcher::n_states() {
  std::lock_guard lock(mutex_);
  return states_.size();
}

size_t Matcher::n_masks() {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& st : states_) n += !st->mask.empty();
  return n;
}

}  // namespace jitllm::constrain
