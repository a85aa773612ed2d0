// Typed metadata values (GGUF's value model): construction, checked conversions whose errors say
// what was expected and what was found, equality, and a JSON form for display. Knows nothing about
// files; the GGUF reader/writer own the binary encoding.
#include "io/metadata.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace jitllm {

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

Value Value::array(ValueType element_type, std::vector<Value> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != element_type)
      throw_error("array of {}: item {} is a {}", value_type_name(element_type), i,
                  value_type_name(items[i].type()));
  }
  auto arr = std::make_shared<ValueArray>();
  arr->element_type = element_type;
  arr->items = std::move(items);
  return Value(ValueType::Array, std::shared_ptr<const ValueArray>(std::move(arr)));
}

Value Value::string_array(const std::vector<std::string>& items) {
  std::vector<Value> values;
  values.reserve(items.size());
  for (const auto& s : items) values.push_back(Value::string(s));
  return array(ValueType::String, std::move(values));
}

Value Value::f32_array(const std::vector<float>& items) {
  std::vector<Value> values;
  values.reserve(items.size());
  for (float f : items) values.push_back(Value::f32(f));
  return array(ValueType::F32, std::move(values));
}

Value Value::i32_array(const std::vector<int32_t>& items) {
  std::vector<Value> values;
  values.reserve(items.size());
  for (int32_t v : items) values.push_back(Value::i32(v));
  return array(ValueType::I32, std::move(values));
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(storage_) || std::holds_alternative<int64_t>(storage_);
}

bool Value::is_number() const { return is_integer() || std::holds_alternative<double>(storage_); }

int64_t Value::as_i64() const {
  if (const auto* u = std::get_if<uint64_t>(&storage_)) {
    if (*u > uint64_t(std::numeric_limits<int64_t>::max()))
      throw_error("{} value {} does not fit in a signed 64-bit integer", value_type_name(type_),
                  *u);
    return int64_t(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&storage_)) return *i;
  throw_error("expected an integer, got {}", value_type_name(type_));
}

uint64_t Value::as_u64() const {
  if (const auto* u = std::get_if<uint64_t>(&storage_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&storage_)) {
    if (*i < 0)
      throw_error("expected a non-negative integer, got {} value {}", value_type_name(type_), *i);
    return uint64_t(*i);
  }
  throw_error("expected an integer, got {}", value_type_name(type_));
}

double Value::as_f64() const {
  if (const auto* d = std::get_if<double>(&storage_)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&storage_)) return double(*u);
  if (const auto* i = std::get_if<int64_t>(&storage_)) return double(*i);
  throw_error("expected a number, got {}", value_type_name(type_));
}

bool Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&storage_)) return *b;
  throw_error("expected a bool, got {}", value_type_name(type_));
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&storage_)) return *s;
  throw_error("expected a string, got {}", value_type_name(type_));
}

const ValueArray& Value::as_array() const {
  if (const auto* a = std::get_if<std::shared_ptr<const ValueArray>>(&storage_)) return **a;
  throw_error("expected an array, got {}", value_type_name(type_));
}

std::vector<std::string> Value::as_string_vector() const {
  const ValueArray& arr = as_array();
  if (arr.element_type != ValueType::String)
    throw_error("expected an array of string, got an array of {}",
                value_type_name(arr.element_type));
  std::vector<std::string> out;
  out.reserve(arr.items.size());
  for (const auto& v : arr.items) out.push_back(v.as_string());
  return out;
}

std::vector<float> Value::as_f32_vector() const {
  const ValueArray& arr = as_array();
  std::vector<float> out;
  out.reserve(arr.items.size());
  for (size_t i = 0; i < arr.items.size(); ++i) {
    if (!arr.items[i].is_number())
      throw_error("expected an array of numbers, got an array of {}",
                  value_type_name(arr.element_type));
    out.push_back(float(arr.items[i].as_f64()));
  }
  return out;
}

std::vector<int64_t> Value::as_i64_vector() const {
  const ValueArray& arr = as_array();
  std::vector<int64_t> out;
  out.reserve(arr.items.size());
  for (size_t i = 0; i < arr.items.size(); ++i) {
    if (!arr.items[i].is_integer())
      throw_error("expected an array of integers, got an array of {}",
                  value_type_name(arr.element_type));
    try {
      out.push_back(arr.items[i].as_i64());
    } catch (const Error& e) {
      throw_error("array item {}: {}", i, e.what());
    }
  }
  return out;
}

namespace {

// GGUF strings are bytes; JSON needs UTF-8. Invalid sequences become U+FFFD so display never throws.
std::string sanitize_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = uint8_t(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (uint8_t(s[i + k]) & 0xC0) == 0x80;
    if (ok && len > 1) {
      // Reject overlong encodings and surrogates, which nlohmann::json refuses to dump.
      uint32_t cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
      const uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min_cp && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

nlohmann::json Value::to_json(size_t max_items) const {
  return std::visit(
      [&](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, std::string>) {
          return sanitize_utf8(v);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<const ValueArray>>) {
          nlohmann::json arr = nlohmann::json::array();
          const size_t n = v->items.size();
          for (size_t i = 0; i < n && i < max_items; ++i) arr.push_back(v->items[i].to_json(max_items));
          if (n > max_items) arr.push_back(fmt::format("... ({} items in all)", n));
          return arr;
        } else if constexpr (std::is_same_v<T, double>) {
          // An f32 is shown by its shortest float decimal (0.1f as 0.1, not 0.10000000149...).
          if (type_ == ValueType::F32 && std::isfinite(v))
            return std::strtod(fmt::format("{}", float(v)).c_str(), nullptr);
          return v;
        } else {
          return v;
        }
      },
      storage_);
}

bool Value::operator==(const Value& other) const {
  if (type_ != other.type_ || storage_.index() != other.storage_.index()) return false;
  if (const auto* a = std::get_if<std::shared_ptr<const ValueArray>>(&storage_)) {
    const auto& b = std::get<std::shared_ptr<const ValueArray>>(other.storage_);
    if (*a == b) return true;
    if (!*a || !b) return false;
    return (*a)->element_type == b->element_type && (*a)->items == b->items;
  }
  return storage_ == other.storage_;
}

// ---- Metadata ----

const Value* Metadata::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

const Value& Metadata::at(const std::string& key) const {
  const Value* v = find(key);
  if (!v) throw_error("metadata key '{}' is missing", key);
  return *v;
}

namespace {

// Runs a checked conversion, naming the key in its error.
template <typename F>
auto convert(const std::string& key, const Value& v, F&& f) -> decltype(f(v)) {
  try {
    return f(v);
  } catch (const Error& e) {
    throw_error("metadata key '{}': {}", key, e.what());
  }
}

}  // namespace

int64_t Metadata::get_i64(const std::string& key) const {
  return convert(key, at(key), [](const Value& v) { return v.as_i64(); });
}
uint64_t Metadata::get_u64(const std::string& key) const {
  return convert(key, at(key), [](const Value& v) { return v.as_u64(); });
}
double Metadata::get_f64(const std::string& key) const {
  return convert(key, at(key), [](const Value& v) { return v.as_f64(); });
}
bool Metadata::get_bool(const std::string& key) const {
  return convert(key, at(key), [](const Value& v) { return v.as_bool(); });
}
std::string Metadata::get_string(const std::string& key) const {
  return convert(key, at(key), [](const Value& v) { return v.as_string(); });
}

int64_t Metadata::get_i64_or(const std::string& key, int64_t fallback) const {
  return has(key) ? get_i64(key) : fallback;
}
double Metadata::get_f64_or(const std::string& key, double fallback) const {
  return has(key) ? get_f64(key) : fallback;
}
bool Metadata::get_bool_or(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string Metadata::get_string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
std::optional<std::string> Metadata::get_string_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

nlohmann::json Metadata::to_json(size_t max_items) const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : values_) out[sanitize_utf8(key)] = value.to_json(max_items);
  return out;
}

}  // namespace jitllm
