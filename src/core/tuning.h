// The tuning registries: every JITLLM_* environment setting the engine reads is a Knob with a
// name, a default, its allowed values and one line of doc, read from the environment once (at
// its first use) and checked there: a bad value is a jitllm::Error naming the variable. Each
// layer that reads settings owns one registry: this file the machinery and the engine-wide
// settings (threads, pinning, logging, huge pages, tensor dumps); backend/cpu/tuning.h and
// backend/cuda/tuning.h the backends'. `jitllm info --tuning` lists them all (registries()).
//
// Tests that compare settings in one process use ScopedOverride instead of setenv(): the
// environment is read once, so a setenv() after the first use is not seen.
#pragma once

#include <atomic>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm::tuning {

class Registry;

// One environment setting. Its current value is the ScopedOverride's if one is held, else the
// environment's (read at the first use; unset or empty means the default), else the default.
class Knob {
 public:
  Knob(const Knob&) = delete;
  Knob& operator=(const Knob&) = delete;
  virtual ~Knob() = default;

  const char* name() const { return name_; }
  const std::string& fallback() const { return fallback_; }  // the default, as text
  const std::string& allowed() const { return allowed_; }    // e.g. "0 or 1", "1..1024"
  const char* doc() const { return doc_; }

  // The current value as text (the default's when unset) and as the number it stands for (the
  // value of a Number, 0 / 1 of a Flag, the index of a Choice, what a Text's parser returns).
  // Both throw jitllm::Error("JITLLM_X: 'v' is not ...") when the environment holds a bad value.
  const std::string& text() const { return state().text; }
  int number() const { return state().number; }
  // True when the environment (or an override) gives a value, even an empty one.
  bool is_set() const { return state().set; }

 protected:
  Knob(Registry& registry, const char* name, std::string fallback, std::string allowed, const char* doc,
       bool empty_is_value = false);
  // The number value v stands for; throws (reject) when v is not allowed. v is never empty
  // unless the knob takes an empty value (empty_is_value).
  virtual int parse(const std::string& v) const = 0;
  [[noreturn]] void reject(const std::string& v) const;

 private:
  friend class ScopedOverride;
  struct State {
    bool loaded = false, set = false;
    std::string text;
    int number = 0;
    std::string error;  // non-empty: the environment's value is bad (thrown at every read)
  };
  const State& state() const;
  State evaluate(const char* value) const;  // value: nullptr = unset

  const char* name_;
  std::string fallback_, allowed_;
  const char* doc_;
  bool empty_is_value_;
  mutable std::atomic<bool> loaded_{false};
  mutable std::mutex mutex_;
  mutable State state_;
};

// "0" or "1".
class Flag : public Knob {
 public:
  Flag(Registry& r, const char* name, bool fallback, const char* doc)
      : Knob(r, name, fallback ? "1" : "0", "0 or 1", doc) {}
  bool on() const { return number() != 0; }

 private:
  int parse(const std::string& v) const override;
};

// An integer in [lo, hi], or one of a list of integers.
class Number : public Knob {
 public:
  Number(Registry& r, const char* name, int fallback, int lo, int hi, const char* doc);
  Number(Registry& r, const char* name, int fallback, std::initializer_list<int> values, const char* doc);
  int get() const { return number(); }

 private:
  int parse(const std::string& v) const override;
  int lo_, hi_;
  std::vector<int> values_;  // empty: any value in [lo_, hi_]
};

// One of a list of words; number() is its index in the list.
class Choice : public Knob {
 public:
  Choice(Registry& r, const char* name, const char* fallback, std::initializer_list<const char*> choices,
         const char* doc);
  bool is(const char* choice) const { return text() == choice; }

 private:
  int parse(const std::string& v) const override;
  std::vector<std::string> choices_;
};

// Free text checked by a parser of its own, which also gets the empty value: the number the
// value stands for, or nothing when it is not allowed (the knob then names itself and `allowed`).
class Text : public Knob {
 public:
  using Parser = std::optional<int> (*)(const std::string& value);
  Text(Registry& r, const char* name, const char* fallback, const char* allowed, Parser parser, const char* doc)
      : Knob(r, name, fallback, allowed, doc, true), parser_(parser) {}

 private:
  int parse(const std::string& v) const override;
  Parser parser_;
};

// The knobs of one layer, in the order they were declared.
class Registry {
 public:
  explicit Registry(const char* name) : name_(name) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  const char* name() const { return name_; }
  const std::vector<const Knob*>& knobs() const { return knobs_; }

 private:
  friend class Knob;
  const char* name_;
  std::vector<const Knob*> knobs_;
};

// Makes a registry known to registries() and find(): called from a namespace-scope initializer
// in the registry's .cpp (the accessor builds the knobs on first call, not at static
// initialization).
bool add_registry(const Registry& (*accessor)());
// Every registry linked into this program, core first.
std::vector<const Registry*> registries();
// The knob called `name` in any of them; throws jitllm::Error for an unknown name.
const Knob& find(std::string_view name);

// For tests: `name` takes `value` (checked like an environment value: a bad one throws) until
// the override is destroyed, whatever the environment says. Not for use while other threads
// read the knob.
class ScopedOverride {
 public:
  ScopedOverride(std::string_view name, const std::string& value);
  ~ScopedOverride();
  ScopedOverride(const ScopedOverride&) = delete;
  ScopedOverride& operator=(const ScopedOverride&) = delete;

 private:
  const Knob& knob_;
  Knob::State saved_;
};

// The engine-wide settings (src/core and the layers above it).
struct CoreKnobs {
  Registry registry{"core"};
  Number cores{registry, "JITLLM_CORES", 0, 0, 4096,
               "threads of the CPU thread pool when -t is not given (0: one per core)"};
  Flag pin{registry, "JITLLM_PIN", true,
           "pin each pool thread, the caller included, to one of the process's CPUs (0: let them float)"};
  Choice log{registry, "JITLLM_LOG", "warn", {"debug", "info", "warn", "error"},
             "lowest level of the messages printed on stderr"};
  Flag nohuge{registry, "JITLLM_NOHUGE", false,
              "1: no huge-page advice for the CPU decode copies of the weights (core/huge_buffer.h)"};
  Text dump{registry, "JITLLM_DUMP", "", "comma list of tensor names, or all", [](const std::string&) { return std::optional<int>(0); },
            "tensors to dump per layer as .f32 files (model/dump.cpp, into JITLLM_DUMP_DIR); set: no CUDA decode graphs"};
  Text dump_dir{registry, "JITLLM_DUMP_DIR", "", "a folder", [](const std::string&) { return std::optional<int>(0); },
                "where JITLLM_DUMP writes its files (empty: the working directory)"};
  Flag sched_overlap{registry, "JITLLM_SCHED_OVERLAP", true,
                     "jitllmd: stream a step's text (detokenising, stop strings, events) on a side "
                     "thread while the engine runs the next step"};
  Flag sched_debug{registry, "JITLLM_SCHED_DEBUG", false,
                   "jitllmd: print every scheduler step's groups on stderr ([choice:rows@position])"};
};
const CoreKnobs& core_knobs();

}  // namespace jitllm::tuning
