// A context-free grammar over bytes: the form every constraint (GBNF text, JSON Schema, a tool
// call's shape) is compiled into before it is matched against a vocabulary (matcher.h).
//
// Why bytes and not code points: tokens are byte strings (byte-fallback tokens hold half a
// character, BPE tokens can end inside one), so matching a token is matching its bytes. A
// character class over code points is written out once, here, as alternatives of UTF-8 byte
// ranges (utf8_ranges.h), and partial characters at a token's end need no special case.
//
// Layout: `code` holds every alternative of every rule as a run of elements ended by kEnd; an
// element is a byte set (index into `sets`) or a reference to a rule. A position is an index
// into `code`. Left recursion is refused when the program is finished (the matcher expands rule
// references eagerly and would not terminate).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace jitllm::constrain {

// 256 bits: which bytes an element accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(uint8_t(b));
  }
  bool operator==(const ByteSet&) const = default;
};

// One element of `code`.
constexpr uint32_t kEnd = 0xFFFFFFFFu;        // end of an alternative
constexpr uint32_t kRuleFlag = 0x80000000u;   // | rule index: a reference to that rule
inline bool is_rule_ref(uint32_t e) { return e != kEnd && (e & kRuleFlag); }
inline uint32_t rule_of(uint32_t e) { return e & ~kRuleFlag; }

struct Grammar {
  std::vector<ByteSet> sets;                    // [n_sets]
  std::vector<uint32_t> code;                   // elements, each alternative ended by kEnd
  std::vector<std::vector<uint32_t>> alts;      // [n_rules][n_alternatives] start positions
  std::vector<std::string> names;               // [n_rules]
  uint32_t root = 0;

  size_t n_rules() const { return alts.size(); }
};

// Builds a Grammar rule by rule; finish() checks it (every rule defined, no left recursion).
class GrammarBuilder {
 public:
  // The rule called `name`, created (undefined) on first mention.
  uint32_t rule(const std::string& name);
  // A fresh rule named after `base` (for repetitions and groups).
  uint32_t fresh_rule(const std::string& base);
  bool defined(uint32_t rule) const { return defined_[rule]; }

  // One alternative: a sequence of elements (set_element / rule_element values).
  using Sequence = std::vector<uint32_t>;
  uint32_t set_element(const ByteSet& set);  // interned
  static uint32_t rule_element(uint32_t rule) { return kRuleFlag | rule; }
  // Defines `rule` as these alternatives (an empty sequence matches the empty string).
  // Throws jitllm::Error if it is already defined.
  void define(uint32_t rule, std::vector<Sequence> alternatives);

  // At most this many elements in all (a hostile {m,n} nesting cannot exhaust memory).
  static constexpr size_t kMaxElements = size_t(1) << 19;

  // Throws jitllm::Error naming the rule for an undefined or left-recursive rule.
  Grammar finish(const std::string& root_name);

 private:
  Grammar g_;
  std::vector<std::vector<Sequence>> bodies_;  // [n_rules] as defined
  std::vector<bool> defined_;                  // [n_rules]
  size_t elements_ = 0;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<std::string, uint32_t> set_index_;  // ByteSet bytes -> index in g_.sets
};

}  // namespace jitllm::constrain
