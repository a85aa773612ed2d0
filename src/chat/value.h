// The value model of the chat-template interpreter: what a Jinja2 template sees when Hugging Face
// transformers renders it with Python objects. Undefined is distinct from none; ints, floats and
// bools follow Python (True == 1, 7 // -2 == -4); lists and dicts have reference semantics (a
// namespace attribute or an appended list item is visible through every alias); dicts keep
// insertion order like Python's. Conversions to text follow Python's str() and repr().
// This file knows nothing about templates, parsing or rendering.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace jitllm::chat {

class Value;
class Interpreter;

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Value(Interpreter&, CallArgs&)>;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

// A Python list (or tuple: printed with parentheses, otherwise the same).
struct ValueList {
  std::vector<Value> items;
  bool is_tuple = false;
  ValueList() = default;
  ValueList(const ValueList&) = delete;
  ValueList& operator=(const ValueList&) = delete;
  ~ValueList();  // iterative: a million-deep nested list must not overflow the stack
};

// Plain dicts, jinja2 `namespace()` objects (attribute assignment allowed) and loop contexts
// are all ordered key/value tables; the flavor only changes how they print and which methods
// they have.
enum class DictFlavor { Dict, Namespace, Loop };
struct ValueDict {
  std::vector<std::pair<Value, Value>> items;  // insertion order
  DictFlavor flavor = DictFlavor::Dict;
  ValueDict() = default;
  ValueDict(const ValueDict&) = delete;
  ValueDict& operator=(const ValueDict&) = delete;
  ~ValueDict();

  Value* find(const Value& key);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
  bool erase(const Value& key);
};

// A builtin function, bound method or template macro.
struct Callable {
  std::string name;
  NativeFunction fn;
  bool is_macro = false;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string hint = {}) {
    Value v;
    if (!hint.empty()) v.data_ = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value none() { return Value(Kind::None, std::monostate{}); }
  static Value boolean(bool b) { return Value(Kind::Bool, b); }
  static Value integer(int64_t i) { return Value(Kind::Int, i); }
  static Value number(double d) { return Value(Kind::Float, d); }
  static Value string(std::string s) { return Value(Kind::String, std::make_shared<const std::string>(std::move(s))); }
  // A markupsafe.Markup string (from |safe or |escape): `markup + str` HTML-escapes the str.
  static Value markup(std::string s) {
    Value v = string(std::move(s));
    v.markup_ = true;
    return v;
  }
  static Value list(std::vector<Value> items = {}, bool is_tuple = false);
  static Value dict(DictFlavor flavor = DictFlavor::Dict);
  static Value callable(std::string name, NativeFunction fn, bool is_macro = false);
  // JSON input (the caller's messages, tools, extra variables). Object key order is kept.
  static Value from_json(const nlohmann::ordered_json& j);
  static Value from_json(const nlohmann::json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }  // Python int, excluding bool
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  bool is_tuple() const { return is_list() && list_ref().is_tuple; }
  bool is_markup() const { return markup_; }

  // Checked accessors: the wrong kind throws jitllm::Error ("expected an integer, got str
  // object"), so a filter argument of the wrong type is a template error, never a crash.
  bool as_bool() const;
  int64_t as_int() const;       // Int or Bool
  double as_double() const;     // any number
  const std::string& as_string() const;
  const std::string& undefined_hint() const;
  ValueList& list_ref() const;
  ValueDict& dict_ref() const;
  const Callable& callable_ref() const;
  const void* identity() const;  // the shared object of a list/dict/callable, else null

  // Python truthiness (undefined is false).
  bool truthy() const;
  // str(x) as {{ x }} prints it (undefined prints nothing).
  std::string str() const;
  // repr(x), used inside printed containers.
  std::string repr() const;
  // Python == (1 == 1.0 == True; containers element-wise).
  bool equals(const Value& other) const;
  // jinja2's name for the type in messages ("str object", "dict object").
  std::string type_name() const;

 private:
  // Strings are shared and immutable: templates pass message contents around by value.
  using Data = std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
                            std::shared_ptr<ValueList>, std::shared_ptr<ValueDict>,
                            std::shared_ptr<Callable>>;
  template <typename T>
  Value(Kind kind, T data) : kind_(kind), data_(std::move(data)) {}
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  Data data_;  // Undefined keeps its hint ("'x' is undefined") in the string slot
};

// Bounds the recursion of repr/equals/ordering/JSON over nested (or self-containing) values.
class NestingGuard {
 public:
  NestingGuard();
  ~NestingGuard();
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
  static constexpr int kMaxNesting = 1000;
};

// Python's repr of a float ("1.0", "1e+16", "1e-05", "inf").
std::string python_float_repr(double d);
// Python's repr of a str ('a', "it's", 'x\ny').
std::string python_string_repr(std::string_view s);
// Python ordering (<) for numbers, strings and lists; throws jitllm::Error naming both types.
bool python_less(const Value& a, const Value& b);

}  // namespace jitllm::chat
