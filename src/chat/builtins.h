// The library a template can call: Python operators, attribute/item access, str/list/dict
// methods, jinja2's filters and tests, the global functions (range, namespace, dict) and the
// argument helper they share. Each group lives in its own .cpp (operators, methods, filters,
// jinja_tests, json_dump, globals); this header is their common interface to the interpreter.
#pragma once

#include <map>
#include <optional>
#include <vector>
#include <string>

#include "chat/value.h"

namespace jitllm::chat {

class Interpreter;

// Positional-or-keyword argument access with Python-like errors ("filter 'join': unexpected
// keyword argument 'x'").
class ArgReader {
 public:
  ArgReader(const CallArgs& args, std::string what) : args_(args), what_(std::move(what)) {}
  // Argument `index` or keyword `name`, or std::nullopt.
  std::optional<Value> get(size_t index, const char* name) const;
  Value get_or(size_t index, const char* name, Value fallback) const;
  // Fails on more positional arguments than `max_positional` or an unknown keyword.
  void check(size_t max_positional, std::initializer_list<const char*> keywords) const;
  const std::string& what() const { return what_; }

 private:
  const CallArgs& args_;
  std::string what_;
};

// ---- operators (operators.cpp) ----
// op: + - * / // % ** ~
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
Value unary_minus(const Value& v);
bool contains(const Value& container, const Value& item);  // `item in container`
// Python iteration: list items, dict keys, string code points; undefined iterates as empty.
std::vector<Value> iterate(const Value& v);
// jinja2's environment.getattr (obj.name) and getitem (obj[key]); never throws for a defined
// object, returns undefined with a hint instead.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);
// Raises the jinja2 UndefinedError for an undefined value used where a value is needed.
[[noreturn]] void undefined_error(const Value& v);
int64_t py_length(const Value& v);  // len(); throws for values without a length
// Throws when storing `item` inside `container` would make a container contain itself: such
// cycles would leak (shared ownership) and make printing recurse forever. Walks `item`
// iteratively, one step per container visited.
void check_no_cycle(Interpreter& in, const Value& container, const Value& item);

// markupsafe.escape: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

// ---- methods (methods.cpp) ----
// The bound method `obj.name` (str, list and dict methods), or undefined.
Value get_method(const Value& obj, const std::string& name);
// Python's "%s" % args and str.format(*args, **kwargs).
std::string percent_format(Interpreter& in, const std::string& format, const Value& args);
std::string str_format(Interpreter& in, const std::string& format, const CallArgs& args);

// ---- filters and tests (filters.cpp, jinja_tests.cpp) ----
Value apply_filter(Interpreter& in, const std::string& name, const Value& subject, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& subject, CallArgs& args);
bool has_test(const std::string& name);

// ---- json (json_dump.cpp) ----
// json.dumps(v, ensure_ascii=..., indent=indent, separators=..., sort_keys=sort_keys).
// indent < 0 means None; item/key separators default to Python's (", " / ": " without indent,
// "," / ": " with one).
std::string json_dumps(const Value& v, int indent, const std::optional<std::string>& item_separator,
                       const std::optional<std::string>& key_separator, bool sort_keys, bool ensure_ascii = false);
// Parses JSON text into a Value (from_json filter).
Value json_loads(const std::string& text);

// ---- globals (globals.cpp) ----
// range, namespace, dict. (raise_exception and strftime_now come from ChatTemplate, which owns
// the clock and the error type; joiner/cycler/lipsum are not used by chat templates.)
void add_builtin_globals(std::map<std::string, Value>& globals);

}  // namespace jitllm::chat
