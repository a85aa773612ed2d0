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

  // Which rules can match the empty string (a fixpoint over the alternatives).
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Sequence& seq : bodies_[r]) {
        bool all = true;
        for (uint32_t e : seq) all = all && is_rule_ref(e) && nullable[rule_of(e)];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
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
