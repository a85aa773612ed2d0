// Python operators and element access as jinja2 evaluates them: int arithmetic that floors like
// Python (7 // -2 == -4, -7 % 3 == 2) and fails on overflow instead of wrapping, string and list
// repetition bounded by the size limit, per-code-point string indexing and slicing, and
// jinja2's attribute/item lookup (dict methods win for `.`, keys win for `[]`).
#include <cmath>
#include <limits>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/text.h"

namespace jitllm::chat {

// ---- ArgReader ----

std::optional<Value> ArgReader::get(size_t index, const char* name) const {
  if (index < args_.positional.size()) return args_.positional[index];
  if (name)
    for (const auto& [k, v] : args_.keyword)
      if (k == name) return v;
  return std::nullopt;
}

Value ArgReader::get_or(size_t index, const char* name, Value fallback) const {
  auto v = get(index, name);
  return v ? *v : fallback;
}

void ArgReader::check(size_t max_positional, std::initializer_list<const char*> keywords) const {
  if (args_.positional.size() > max_positional)
    throw_error("{}: takes at most {} positional arguments, got {}", what_, max_positional, args_.positional.size());
  for (const auto& [k, v] : args_.keyword) {
    bool known = false;
    for (const char* kw : keywords) known |= k == kw;
    if (!known) throw_error("{}: unexpected keyword argument '{}'", what_, k);
  }
}

// ---- helpers ----

void undefined_error(const Value& v) {
  const std::string& hint = v.undefined_hint();
  throw_error("{}", hint.empty() ? std::string("value is undefined") : hint);
}

static std::string short_type(const Value& v) {
  std::string name = v.type_name();
  auto space = name.find(' ');
  return space == std::string::npos ? name : name.substr(0, space);
}

[[noreturn]] static void overflow() { throw_error("integer overflow (jitllm templates use 64-bit integers)"); }

template <typename Op>
static int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) overflow();
  return r;
}
static bool add_ov(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
static bool sub_ov(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
static bool mul_ov(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

static int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw_error("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

static int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) throw_error("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

static Value repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && uint64_t(times) > (uint64_t(1) << 40) / s.size()) in.check_size(SIZE_MAX);
    in.check_size(s.size() * size_t(times));
    std::string out;
    out.reserve(s.size() * size_t(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.list_ref().items;
  if (!items.empty() && uint64_t(times) > (uint64_t(1) << 40) / items.size()) in.charge(std::numeric_limits<int64_t>::max() / 2);
  in.charge(int64_t(items.size()) * times);
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

static int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = checked(mul_ov, result, base);
    exp >>= 1;
    if (exp) base = checked(mul_ov, base, base);
  }
  return result;
}

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.str();
    std::string t = b.str();
    in.check_size(s.size() + t.size());
    return Value::string(s + t);
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  auto unsupported = [&]() -> Value {
    throw_error("unsupported operand type(s) for {}: '{}' and '{}'", op, short_type(a), short_type(b));
  };
  if (a.is_number() && b.is_number()) {
    bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_double() == 0) throw_error("division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    if (!floats) {
      int64_t x = a.as_int(), y = b.as_int();
      if (op == "+") return Value::integer(checked(add_ov, x, y));
      if (op == "-") return Value::integer(checked(sub_ov, x, y));
      if (op == "*") return Value::integer(checked(mul_ov, x, y));
      if (op == "//") return Value::integer(floor_div(x, y));
      if (op == "%") return Value::integer(floor_mod(x, y));
      if (op == "**") {
        if (y < 0) return Value::number(std::pow(double(x), double(y)));
        return Value::integer(int_pow(x, y));
      }
    } else {
      double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value::number(x + y);
      if (op == "-") return Value::number(x - y);
      if (op == "*") return Value::number(x * y);
      if (op == "//" || op == "%") {  // CPython's float_divmod
        if (y == 0) throw_error("float division by zero");
        double mod = std::fmod(x, y);
        double div = (x - mod) / y;
        if (mod != 0 && ((y < 0) != (mod < 0))) {
          mod += y;
          div -= 1.0;
        }
        if (op == "%") return Value::number(mod != 0 ? mod : std::copysign(0.0, y));
        double floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
        return Value::number(div != 0 ? floordiv : std::copysign(0.0, x / y));
      }
      if (op == "**") return Value::number(std::pow(x, y));
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string() && (a.is_markup() || b.is_markup())) {
      // markupsafe: Markup + str escapes the str, and the result is Markup.
      std::string x = a.is_markup() ? a.as_string() : html_escape(a.as_string());
      std::string y = b.is_markup() ? b.as_string() : html_escape(b.as_string());
      in.check_size(x.size() + y.size());
      return Value::markup(x + y);
    }
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> items = a.list_ref().items;
      in.charge(int64_t(b.list_ref().items.size()));
      items.insert(items.end(), b.list_ref().items.begin(), b.list_ref().items.end());
      return Value::list(std::move(items), a.is_tuple());
    }
  }
  if (op == "+" && (a.is_string() || (a.is_list() && !b.is_number()))) {
    const char* left = a.is_string() ? "str" : a.is_tuple() ? "tuple" : "list";
    throw_error("can only concatenate {} (not \"{}\") to {}", left, short_type(b), left);
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(in, b, a.as_int());
  }
  if (op == "%" && a.is_string()) return Value::string(percent_format(in, a.as_string(), b));
  return unsupported();
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value unary_minus(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.is_float()) return Value::number(-v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  throw_error("bad operand type for unary -: '{}'", short_type(v));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;  // jinja2's Undefined iterates as empty
    case Kind::String:
      if (!item.is_string()) throw_error("'in <string>' requires string as left operand, not {}", short_type(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::List:
      for (const auto& v : container.list_ref().items)
        if (v.equals(item)) return true;
      return false;
    case Kind::Dict: return container.dict_ref().find(item) != nullptr;
    default: throw_error("argument of type '{}' is not iterable", short_type(container));
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::List: return v.list_ref().items;
    case Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.dict_ref().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      size_t i = 0;
      while (i < s.size()) {
        size_t start = i;
        utf8_next(s, i);
        chars.push_back(Value::string(s.substr(start, i - start)));
      }
      return chars;
    }
    default: throw_error("'{}' object is not iterable", short_type(v));
  }
}

void check_no_cycle(Interpreter& in, const Value& container, const Value& item) {
  const void* target = container.identity();
  if (!target || !item.identity()) return;
  std::vector<const Value*> stack{&item};
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v->identity() == target) throw_error("cannot store a {} inside itself", container.type_name());
    in.charge(1);
    if (v->is_list())
      for (const auto& x : v->list_ref().items)
        if (x.identity()) stack.push_back(&x);
    if (v->is_dict())
      for (const auto& kv : v->dict_ref().items)
        if (kv.second.identity()) stack.push_back(&kv.second);
  }
}

int64_t py_length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return int64_t(utf8_length(v.as_string()));
    case Kind::List: return int64_t(v.list_ref().items.size());
    case Kind::Dict: return int64_t(v.dict_ref().items.size());
    default: throw_error("object of type '{}' has no len()", short_type(v));
  }
}

static Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", obj.type_name(), name));
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_dict()) {
    if (obj.dict_ref().flavor == DictFlavor::Dict) {
      Value method = get_method(obj, name);
      if (!method.is_undefined()) return method;
    }
    if (const Value* v = obj.dict_ref().find(std::string_view(name))) return *v;
    return no_attribute(obj, name);
  }
  Value method = get_method(obj, name);
  if (!method.is_undefined()) return method;
  return no_attribute(obj, name);
}

static bool normalize_index(int64_t& i, int64_t n) {
  if (i < 0) i += n;
  return i >= 0 && i < n;
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_ref().find(key)) return *v;
    if (key.is_string() && obj.dict_ref().flavor == DictFlavor::Dict) {
      Value method = get_method(obj, key.as_string());
      if (!method.is_undefined()) return method;
    }
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", obj.type_name(), key.str()));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const auto& items = obj.list_ref().items;
      if (!normalize_index(i, int64_t(items.size())))
        return Value::undefined(fmt::format("'{}' has no element {}", obj.type_name(), key.as_int()));
      return items[size_t(i)];
    }
    std::vector<size_t> off = utf8_offsets(obj.as_string());
    if (!normalize_index(i, int64_t(off.size()) - 1))
      return Value::undefined(fmt::format("'{}' has no element {}", obj.type_name(), key.as_int()));
    return Value::string(obj.as_string().substr(off[size_t(i)], off[size_t(i) + 1] - off[size_t(i)]));
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(fmt::format("'{}' has no element {}", obj.type_name(), key.repr()));
}

Value slice(Interpreter& in, const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) throw_error("slice {} must be an integer or None, not {}", what, short_type(v));
    return v.as_int();
  };
  std::optional<int64_t> start = as_index(start_v, "start"), stop = as_index(stop_v, "stop");
  int64_t step = as_index(step_v, "step").value_or(1);
  if (step == 0) throw_error("slice step cannot be zero");
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_string()) {
    off = utf8_offsets(obj.as_string());
    n = int64_t(off.size()) - 1;
  } else if (obj.is_list()) {
    n = int64_t(obj.list_ref().items.size());
  } else {
    throw_error("'{}' object is not subscriptable", short_type(obj));
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t lo = adjust(start, step < 0 ? n - 1 : 0);
  int64_t hi = adjust(stop, step < 0 ? -1 : n);
  std::vector<int64_t> picks;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picks.push_back(i);
  in.charge(int64_t(picks.size()));
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::string out;
    for (int64_t i : picks) out += s.substr(off[size_t(i)], off[size_t(i) + 1] - off[size_t(i)]);
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i : picks) out.push_back(obj.list_ref().items[size_t(i)]);
  return Value::list(std::move(out), obj.is_tuple());
}

}  // namespace jitllm::chat
