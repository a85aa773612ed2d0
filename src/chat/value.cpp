// Value construction, Python truthiness/equality/ordering, and str()/repr() exactly as CPython
// prints them, because templates print containers and floats ("[1, 'a']", "1e-05") and the
// rendered prompt must match Jinja2 byte for byte.
#include "chat/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/text.h"
#include "core/error.h"

namespace jitllm::chat {

// ---- nesting ----

namespace {
thread_local int g_nesting = 0;
// Containers deeper than this are released from a pending list at the outermost release, so
// destruction never recurses more than kReleaseDepth levels.
constexpr int kReleaseDepth = 64;
thread_local int g_release_depth = 0;
thread_local bool g_draining = false;
thread_local std::vector<Value> g_pending;

template <typename Clear>
void release(Clear clear_items) {
  if (g_release_depth >= kReleaseDepth) {
    clear_items(&g_pending);
    return;
  }
  ++g_release_depth;
  clear_items(nullptr);
  --g_release_depth;
  if (g_release_depth == 0 && !g_draining) {
    g_draining = true;
    while (!g_pending.empty()) {
      Value v = std::move(g_pending.back());
      g_pending.pop_back();
    }
    g_draining = false;
  }
}
}  // namespace

NestingGuard::NestingGuard() {
  if (++g_nesting > kMaxNesting) {
    --g_nesting;
    throw_error("value nested deeper than {} levels (or containing itself)", kMaxNesting);
  }
}
NestingGuard::~NestingGuard() { --g_nesting; }

ValueList::~ValueList() {
  release([this](std::vector<Value>* pending) {
    if (pending)
      for (auto& v : items) pending->push_back(std::move(v));
    items.clear();
  });
}

ValueDict::~ValueDict() {
  release([this](std::vector<Value>* pending) {
    if (pending)
      for (auto& [k, v] : items) {
        pending->push_back(std::move(k));
        pending->push_back(std::move(v));
      }
    items.clear();
  });
}

// ---- ValueDict ----

Value* ValueDict::find(const Value& key) {
  for (auto& [k, v] : items)
    if (k.equals(key)) return &v;
  return nullptr;
}
const Value* ValueDict::find(const Value& key) const {
  return const_cast<ValueDict*>(this)->find(key);
}
const Value* ValueDict::find(std::string_view key) const {
  for (auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}
void ValueDict::set(Value key, Value value) {
  if (Value* slot = find(key)) {
    *slot = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}
bool ValueDict::erase(const Value& key) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].first.equals(key)) {
      items.erase(items.begin() + ptrdiff_t(i));
      return true;
    }
  }
  return false;
}

// ---- construction ----

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<ValueList>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(Kind::List, std::move(l));
}

Value Value::dict(DictFlavor flavor) {
  auto d = std::make_shared<ValueDict>();
  d->flavor = flavor;
  return Value(Kind::Dict, std::move(d));
}

Value Value::callable(std::string name, NativeFunction fn, bool is_macro) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  c->is_macro = is_macro;
  return Value(Kind::Callable, std::move(c));
}

template <typename Json>
static Value value_from_json(const Json& j) {
  NestingGuard guard;
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value::number(double(u));
      return Value::integer(int64_t(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(value_from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict_ref().items.emplace_back(Value::string(it.key()), value_from_json(it.value()));
      return d;
    }
    default: return Value::none();  // binary/discarded: not produced by the JSON parser
  }
}
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }

// ---- accessors ----

[[noreturn]] static void wrong_kind(const char* expected, const Value& v) {
  throw_error("expected {}, got {}", expected, v.is_undefined() ? std::string("an undefined value") : v.type_name());
}

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) wrong_kind("a boolean", *this);
  return std::get<bool>(data_);
}

int64_t Value::as_int() const {
  if (kind_ == Kind::Bool) return std::get<bool>(data_) ? 1 : 0;
  if (kind_ != Kind::Int) wrong_kind("an integer", *this);
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::Float) return std::get<double>(data_);
  if (kind_ != Kind::Int && kind_ != Kind::Bool) wrong_kind("a number", *this);
  return double(as_int());
}

const std::string& Value::as_string() const {
  if (kind_ != Kind::String) wrong_kind("a string", *this);
  return *std::get<std::shared_ptr<const std::string>>(data_);
}

ValueList& Value::list_ref() const {
  if (kind_ != Kind::List) wrong_kind("a list", *this);
  return *std::get<std::shared_ptr<ValueList>>(data_);
}

ValueDict& Value::dict_ref() const {
  if (kind_ != Kind::Dict) wrong_kind("a dict", *this);
  return *std::get<std::shared_ptr<ValueDict>>(data_);
}

const Callable& Value::callable_ref() const {
  if (kind_ != Kind::Callable) wrong_kind("a callable", *this);
  return *std::get<std::shared_ptr<Callable>>(data_);
}

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  if (auto* s = std::get_if<std::shared_ptr<const std::string>>(&data_)) return **s;
  return empty;
}

const void* Value::identity() const {
  if (auto* l = std::get_if<std::shared_ptr<ValueList>>(&data_)) return l->get();
  if (auto* d = std::get_if<std::shared_ptr<ValueDict>>(&data_)) return d->get();
  if (auto* c = std::get_if<std::shared_ptr<Callable>>(&data_)) return c->get();
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !list_ref().items.empty();
    case Kind::Dict: return !dict_ref().items.empty();
    case Kind::Callable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType object";
    case Kind::Bool: return "bool object";
    case Kind::Int: return "int object";
    case Kind::Float: return "float object";
    case Kind::String: return "str object";
    case Kind::List: return is_tuple() ? "tuple object" : "list object";
    case Kind::Dict:
      switch (dict_ref().flavor) {
        case DictFlavor::Namespace: return "Namespace object";
        case DictFlavor::Loop: return "LoopContext object";
        default: return "dict object";
      }
    case Kind::Callable: return callable_ref().is_macro ? "Macro object" : "function object";
  }
  return "object";
}

// ---- Python text forms ----

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then CPython's layout: fixed for 1e-4 <= |d| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(size_t(-point), '0') + digits;
    } else if (size_t(point) >= digits.size()) {
      out += digits + std::string(size_t(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string python_string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t cp = utf8_next(s, i);
    if (cp == '\\') out += "\\\\";
    else if (cp == uint32_t(quote)) out += std::string("\\") + quote;
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (!is_printable(cp)) {
      char buf[16];
      if (cp < 0x100) std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      else if (cp < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      else std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return python_float_repr(as_double());
    case Kind::String: return python_string_repr(as_string());
    case Kind::List: {
      NestingGuard guard;
      const auto& l = list_ref();
      std::string out = l.is_tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += l.items[i].repr();
      }
      if (l.is_tuple && l.items.size() == 1) out += ",";
      return out + (l.is_tuple ? ")" : "]");
    }
    case Kind::Dict: {
      NestingGuard guard;
      const auto& d = dict_ref();
      std::string out = "{";
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        out += d.items[i].first.repr() + ": " + d.items[i].second.repr();
      }
      out += "}";
      if (d.flavor == DictFlavor::Namespace) return "<Namespace " + out + ">";
      if (d.flavor == DictFlavor::Loop) return "<LoopContext>";
      return out;
    }
    case Kind::Callable:
      if (callable_ref().is_macro) return "<Macro '" + callable_ref().name + "'>";
      return "<built-in function " + callable_ref().name + ">";
  }
  return "";
}

// ---- comparison ----

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return as_double() == other.as_double();
    return as_int() == other.as_int();
  }
  if (kind_ != other.kind_) return false;
  if (identity() && identity() == other.identity()) return true;
  NestingGuard guard;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return as_string() == other.as_string();
    case Kind::List: {
      const auto& a = list_ref().items;
      const auto& b = other.list_ref().items;
      if (list_ref().is_tuple != other.list_ref().is_tuple || a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!a[i].equals(b[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const auto& a = dict_ref().items;
      const auto& b = other.dict_ref();
      if (a.size() != b.items.size()) return false;
      for (const auto& [k, v] : a) {
        const Value* o = b.find(k);
        if (!o || !v.equals(*o)) return false;
      }
      return true;
    }
    case Kind::Callable: return identity() == other.identity();
    default: return false;
  }
}

static std::string python_type(const Value& v) {
  std::string name = v.type_name();
  auto space = name.find(' ');
  return space == std::string::npos ? name : name.substr(0, space);
}

bool python_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    NestingGuard guard;
    const auto& x = a.list_ref().items;
    const auto& y = b.list_ref().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals(y[i])) return python_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw_error("'<' not supported between instances of '{}' and '{}'", python_type(a), python_type(b));
}

}  // namespace jitllm::chat
