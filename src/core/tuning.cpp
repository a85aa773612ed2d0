// Knobs read once from the environment, the list of registries, and the overrides tests use
// (see tuning.h).
#include "core/tuning.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace jitllm::tuning {

namespace {

std::vector<const Registry& (*)()>& accessors() {
  static std::vector<const Registry& (*)()> list;
  return list;
}

// "a, b or c".
std::string join(const std::vector<std::string>& words, const char* last) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i)
    s += (i == 0 ? "" : i + 1 == words.size() ? last : ", ") + words[i];
  return s;
}

}  // namespace

Knob::Knob(Registry& registry, const char* name, std::string fallback, std::string allowed, const char* doc,
           bool empty_is_value)
    : name_(name),
      fallback_(std::move(fallback)),
      allowed_(std::move(allowed)),
      doc_(doc),
      empty_is_value_(empty_is_value) {
  registry.knobs_.push_back(this);
}

void Knob::reject(const std::string& v) const {
  throw_error("{}: '{}' is not {}", name_, v, allowed_);
}

Knob::State Knob::evaluate(const char* value) const {
  State s;
  s.loaded = true;
  s.set = value != nullptr;
  const bool use_default = !value || (!*value && !empty_is_value_);
  s.text = use_default ? fallback_ : std::string(value);
  try {
    s.number = parse(s.text);
  } catch (const Error& e) {
    s.error = e.what();
  }
  return s;
}

const Knob::State& Knob::state() const {
  if (!loaded_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    if (!state_.loaded) state_ = evaluate(std::getenv(name_));
    loaded_.store(true, std::memory_order_release);
  }
  if (!state_.error.empty()) throw Error(state_.error);
  return state_;
}

int Flag::parse(const std::string& v) const {
  if (v == "0") return 0;
  if (v == "1") return 1;
  reject(v);
}

Number::Number(Registry& r, const char* name, int fallback, int lo, int hi, const char* doc)
    : Knob(r, name, std::to_string(fallback), fmt::format("an integer in {}..{}", lo, hi), doc), lo_(lo), hi_(hi) {}

namespace {
std::string number_list(std::initializer_list<int> values) {
  std::vector<std::string> w;
  for (int v : values) w.push_back(std::to_string(v));
  return join(w, " or ");
}
}  // namespace

Number::Number(Registry& r, const char* name, int fallback, std::initializer_list<int> values, const char* doc)
    : Knob(r, name, std::to_string(fallback), number_list(values), doc),
      lo_(std::min(values)),
      hi_(std::max(values)),
      values_(values) {}

int Number::parse(const std::string& v) const {
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo_ || n > hi_) reject(v);
  if (!values_.empty() && std::find(values_.begin(), values_.end(), n) == values_.end()) reject(v);
  return n;
}

int Text::parse(const std::string& v) const {
  const std::optional<int> n = parser_(v);
  if (!n) reject(v);
  return *n;
}

namespace {
std::string choice_list(std::initializer_list<const char*> choices) {
  std::vector<std::string> w;
  for (const char* c : choices) w.push_back(std::string(c));
  return (w.size() > 2 ? "one of " : "") + join(w, " or ");
}
}  // namespace

Choice::Choice(Registry& r, const char* name, const char* fallback, std::initializer_list<const char*> choices,
               const char* doc)
    : Knob(r, name, fallback, choice_list(choices), doc), choices_(choices.begin(), choices.end()) {}

int Choice::parse(const std::string& v) const {
  const auto it = std::find(choices_.begin(), choices_.end(), v);
  if (it == choices_.end()) reject(v);
  return int(it - choices_.begin());
}

bool add_registry(const Registry& (*accessor)()) {
  accessors().push_back(accessor);
  return true;
}

std::vector<const Registry*> registries() {
  std::vector<const Registry*> out{&core_knobs().registry};
  for (auto* accessor : accessors())
    if (const Registry* r = &accessor(); std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  std::sort(out.begin() + 1, out.end(),
            [](const Registry* a, const Registry* b) { return std::string_view(a->name()) < b->name(); });
  return out;
}

const Knob& find(std::string_view name) {
  for (const Registry* r : registries())
    for (const Knob* k : r->knobs())
      if (name == k->name()) return *k;
  throw_error("{}: not a setting of this build (jitllm info --tuning lists them)", name);
}

ScopedOverride::ScopedOverride(std::string_view name, const std::string& value) : knob_(find(name)) {
  Knob::State next = knob_.evaluate(value.c_str());
  if (!next.error.empty()) throw Error(next.error);
  std::lock_guard lock(knob_.mutex_);
  saved_ = knob_.state_;
  knob_.state_ = std::move(next);
  knob_.loaded_.store(true, std::memory_order_release);
}

ScopedOverride::~ScopedOverride() {
  std::lock_guard lock(knob_.mutex_);
  knob_.state_ = saved_;
  // Restored to "not read yet" when it was: the environment is then read at the next use.
  knob_.loaded_.store(saved_.loaded, std::memory_order_release);
}

const CoreKnobs& core_knobs() {
  static const CoreKnobs knobs;
  return knobs;
}

}  // namespace jitllm::tuning
