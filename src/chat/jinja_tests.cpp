// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...) with Python's type rules:
// a bool is a number but not an integer, a dict is a sequence and iterable, undefined is
// iterable (it iterates as empty) but not a sequence.
#include <cmath>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/text.h"

namespace jitllm::chat {
namespace {

using TestFn = bool (*)(Interpreter&, const Value&, const CallArgs&);

const Value& arg0(const CallArgs& a, const char* test) {
  if (a.positional.empty()) throw_error("test '{}' needs an argument", test);
  return a.positional[0];
}

bool is_odd_even(const Value& v, bool odd, const char* test) {
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_int() && !v.is_bool()) throw_error("test '{}': expected an integer, got {}", test, v.type_name());
  int64_t r = v.as_int() % 2;
  return odd ? r != 0 : r == 0;
}

bool compare(const Value& a, const Value& b, const char* op) {
  std::string o = op;
  if (o == "==") return a.equals(b);
  if (o == "!=") return !a.equals(b);
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (o == "<") return python_less(a, b);
  if (o == ">") return python_less(b, a);
  if (o == "<=") return !python_less(b, a);
  return !python_less(a, b);
}

bool case_test(const Value& v, bool upper) {
  if (!v.is_string()) return false;
  bool cased = false;
  for (char c : v.as_string()) {
    bool lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
    if (lo || up) {
      cased = true;
      if (upper ? lo : up) return false;
    }
  }
  return cased;
}

const std::unordered_map<std::string, TestFn>& test_table() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", [](Interpreter&, const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"true", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_int(); }},
      {"float", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_float(); }},
      {"number", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, const CallArgs&) {
         return v.is_dict() && v.dict_ref().flavor == DictFlavor::Dict;
       }},
      {"iterable", [](Interpreter&, const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence", [](Interpreter&, const Value& v, const CallArgs&) {
         return v.is_string() || v.is_list() || (v.is_dict() && v.dict_ref().flavor == DictFlavor::Dict);
       }},
      {"callable", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_callable(); }},
      {"odd", [](Interpreter&, const Value& v, const CallArgs&) { return is_odd_even(v, true, "odd"); }},
      {"even", [](Interpreter&, const Value& v, const CallArgs&) { return is_odd_even(v, false, "even"); }},
      {"divisibleby", [](Interpreter&, const Value& v, const CallArgs& a) {
         const Value& n = arg0(a, "divisibleby");
         if (!v.is_number() || !n.is_number()) throw_error("test 'divisibleby': expected numbers");
         if (v.is_float() || n.is_float()) {
           if (n.as_double() == 0) throw_error("float modulo by zero");
           return std::fmod(v.as_double(), n.as_double()) == 0;
         }
         if (n.as_int() == 0) throw_error("integer division or modulo by zero");
         return n.as_int() == -1 || v.as_int() % n.as_int() == 0;
       }},
      {"eq", [](Interpreter&, const Value& v, const CallArgs& a) { return compare(v, arg0(a, "eq"), "=="); }},
      {"ne", [](Interpreter&, const Value& v, const CallArgs& a) { return compare(v, arg0(a, "ne"), "!="); }},
      {"lt", [](Interpreter&, const Value& v, const CallArgs& a) { return compare(v, arg0(a, "lt"), "<"); }},
      {"le", [](Interpreter&, const Value& v, const CallArgs& a) { return compare(v, arg0(a, "le"), "<="); }},
      {"gt", [](Interpreter&, const Value& v, const CallArgs& a) { return compare(v, arg0(a, "gt"), ">"); }},
      {"ge", [](Interpreter&, const Value& v, const CallArgs& a) { return compare(v, arg0(a, "ge"), ">="); }},
      {"in", [](Interpreter&, const Value& v, const CallArgs& a) { return contains(arg0(a, "in"), v); }},
      {"sameas", [](Interpreter&, const Value& v, const CallArgs& a) {
         const Value& o = arg0(a, "sameas");
         if (v.identity() || o.identity()) return v.identity() == o.identity();
         return v.kind() == o.kind() && v.equals(o);
       }},
      {"lower", [](Interpreter&, const Value& v, const CallArgs&) { return case_test(v, false); }},
      {"upper", [](Interpreter&, const Value& v, const CallArgs&) { return case_test(v, true); }},
      {"escaped", [](Interpreter&, const Value&, const CallArgs&) { return false; }},
      {"filter", [](Interpreter&, const Value& v, const CallArgs&) {
         static const char* names[] = {"abs", "attr", "batch", "capitalize", "center", "count", "d", "default",
                                       "dictsort", "e", "escape", "first", "float", "format", "indent", "int",
                                       "items", "join", "last", "length", "list", "lower", "map", "max", "min",
                                       "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
                                       "selectattr", "sort", "string", "sum", "title", "tojson", "trim",
                                       "unique", "upper", "wordcount"};
         if (!v.is_string()) return false;
         for (const char* n : names)
           if (v.as_string() == n) return true;
         return false;
       }},
      {"test", [](Interpreter&, const Value& v, const CallArgs&) { return v.is_string() && has_test(v.as_string()); }},
  };
  return table;
}

const std::unordered_map<std::string, std::string>& test_aliases() {
  static const std::unordered_map<std::string, std::string> aliases = {
      {"equalto", "eq"}, {"==", "eq"}, {"!=", "ne"}, {"lessthan", "lt"}, {"<", "lt"}, {"<=", "le"},
      {"greaterthan", "gt"}, {">", "gt"}, {">=", "ge"},
  };
  return aliases;
}

const std::string& canonical(const std::string& name) {
  auto it = test_aliases().find(name);
  return it == test_aliases().end() ? name : it->second;
}

}  // namespace

bool has_test(const std::string& name) { return test_table().count(canonical(name)) != 0; }

bool apply_test(Interpreter& in, const std::string& name, const Value& subject, CallArgs& args) {
  in.charge(1);
  auto it = test_table().find(canonical(name));
  if (it == test_table().end()) throw_error("no test named '{}'", name);
  return it->second(in, subject, args);
}

}  // namespace jitllm::chat
