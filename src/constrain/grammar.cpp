// GrammarBuilder (see grammar.h).
#include "constrain/grammar.h"

#include "core/error.h"

namespace jitllm::constrain {

uint32_t GrammarBuilder::rule(const std::string& name) {
  auto [it, added] = by_name_.try_emplace(name, uint32_t(bodies_.size()));
  if (added) {
    bodies_.emplace_back();
    defined_.push_back(false);
    g_.names.push_back(name);
  }
  return it->second;
}

uint32_t GrammarBuilder::fresh_rule(const std::string& base) {
  for (size_t n = by_name_.size();; ++n) {
    const std::string name = base + "-" + std::to_string(n);
    if (!by_name_.count(name)) return rule(name);
  }
}

uint32_t GrammarBuilder::set_element(const ByteSet& set) {
  const std::string key(reinterpret_cast<const char*>(set.bits.data()), sizeof(set.bits));
  auto [it, added] = set_index_.try_emplace(key, uint32_t(g_.sets.size()));
  if (added) g_.sets.push_back(set);
  return it->second;
}

void GrammarBuilder::define(uint32_t rule, std::vector<Sequence> alternatives) {
  if (defined_[rule]) throw_error("grammar: rule '{}' is defined twice", g_.names[rule]);
  defined_[rule] = true;
  for (const Sequence& seq : alternatives) elements_ += seq.size() + 1;
  if (elements_ > kMaxElements)
    throw_error("grammar: more than {} elements (repetitions are written out: use smaller counts)",
                kMaxElements);
  bodies_[rule] = std::move(alternatives);
}

Grammar GrammarBuilder::finish(const std::string& root_name) {
  auto root = by_name_.find(root_name);
  if (root == by_name_.end() || !defined_[root->second])
    throw_error("grammar: no rule '{}' (the start rule)", root_name);
  const size_t n = bodies_.size();
  for (size_t r = 0; r < n; ++r)
    if (!defined_[r]) throw_error("grammar: rule '{}' is used but never defined", g_.names[r]);

  // Which rules can match the empty string: a worklist over the alternatives, linear in the
  // grammar's size (passes until nothing changes were quadratic: a chain of 60,000 rules, 1 MB,
  // held a thread for 13 s). An alternative is nullable once every element in it is a reference
  // to a nullable rule; `waiting[alt]` counts the references still unknown.
  std::vector<bool> nullable(n, false);
  std::vector<uint32_t> owner, waiting;                   // per alternative
  std::vector<std::vector<uint32_t>> used_in(n);          // per rule: alternatives naming it
  std::vector<uint32_t> ready;                            // rules found nullable, to propagate
  for (size_t r = 0; r < n; ++r)
    for (const Sequence& seq : bodies_[r]) {
      const auto alt = uint32_t(owner.size());
      owner.push_back(uint32_t(r));
      bool terminal = false;
      for (uint32_t e : seq) terminal = terminal || !is_rule_ref(e);
      waiting.push_back(terminal ? 1u : uint32_t(seq.size()));  // a terminal never goes away
      if (terminal) continue;
      for (uint32_t e : seq) used_in[rule_of(e)].push_back(alt);
      if (seq.empty() && !nullable[r]) {
        nullable[r] = true;
        ready.push_back(uint32_t(r));
      }
    }
  while (!ready.empty()) {
    const uint32_t r = ready.back();
    ready.pop_back();
    for (uint32_t alt : used_in[r])
      if (--waiting[alt] == 0 && !nullable[owner[alt]]) {
        nullable[owner[alt]] = true;
        ready.push_back(owner[alt]);
      }
  }
  // Left recursion: a rule reaching itself through references at the start of an alternative
  // (after nullable ones). Depth-first search over those edges, colouring rules on the path.
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (const Sequence& seq : bodies_[r])
      for (uint32_t e : seq) {
        if (!is_rule_ref(e)) break;
        left[r].push_back(rule_of(e));
        if (!nullable[rule_of(e)]) break;
      }
  std::vector<uint8_t> colour(n, 0);  // 0 unseen, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (colour[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(start), 0}};
    colour[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left[r].size()) {
        colour[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = left[r][next++];
      if (colour[to] == 1)
        throw_error("grammar: rule '{}' is left-recursive (it can start with itself); write the "
                    "repetition on the right, e.g. 'list ::= item (\",\" item)*'",
                    g_.names[to]);
      if (colour[to] == 0) {
        colour[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }

  g_.alts.assign(n, {});
  for (size_t r = 0; r < n; ++r)
    for (const Sequence& seq : bodies_[r]) {
      g_.alts[r].push_back(uint32_t(g_.code.size()));
      g_.code.insert(g_.code.end(), seq.begin(), seq.end());
      g_.code.push_back(kEnd);
    }
  g_.root = root->second;
  return std::move(g_);
}

}  // namespace jitllm::constrain
