// Model metadata as typed key/value pairs with GGUF's value types and GGUF's key names
// ("general.architecture", "llama.block_count", "tokenizer.ggml.tokens", ...). It is the one
// metadata model inside the engine: the GGUF reader produces it, the .jlm container stores it
// (in GGUF's binary KV encoding), the HF converter builds it from config.json/tokenizer.json,
// and the tokenizer and model Config read from it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace jitllm {

// GGUF's gguf_type numbering (stored on disk; do not renumber).
enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType type);

class Value;
struct ValueArray {
  ValueType element_type = ValueType::U8;
  std::vector<Value> items;
};

// One metadata value. Integers keep their exact GGUF type so a file written back is identical.
class Value {
 public:
  Value() = default;
  static Value u8(uint8_t v) { return Value(ValueType::U8, uint64_t(v)); }
  static Value i8(int8_t v) { return Value(ValueType::I8, int64_t(v)); }
  static Value u16(uint16_t v) { return Value(ValueType::U16, uint64_t(v)); }
  static Value i16(int16_t v) { return Value(ValueType::I16, int64_t(v)); }
  static Value u32(uint32_t v) { return Value(ValueType::U32, uint64_t(v)); }
  static Value i32(int32_t v) { return Value(ValueType::I32, int64_t(v)); }
  static Value u64(uint64_t v) { return Value(ValueType::U64, v); }
  static Value i64(int64_t v) { return Value(ValueType::I64, v); }
  static Value f32(float v) { return Value(ValueType::F32, double(v)); }
  static Value f64(double v) { return Value(ValueType::F64, v); }
  static Value boolean(bool v) { return Value(ValueType::Bool, v); }
  static Value string(std::string v) { return Value(ValueType::String, std::move(v)); }
  static Value array(ValueType element_type, std::vector<Value> items);
  static Value string_array(const std::vector<std::string>& items);
  static Value f32_array(const std::vector<float>& items);
  static Value i32_array(const std::vector<int32_t>& items);

  ValueType type() const { return type_; }
  bool is_integer() const;
  bool is_number() const;  // integer or float

  // Checked conversions; throw jitllm::Error ("expected an integer, got string") when the type
  // does not fit. Integers convert between widths when the value is representable.
  int64_t as_i64() const;
  uint64_t as_u64() const;
  double as_f64() const;  // any number
  bool as_bool() const;
  const std::string& as_string() const;
  const ValueArray& as_array() const;

  // Array helpers (element conversions checked as above).
  std::vector<std::string> as_string_vector() const;
  std::vector<float> as_f32_vector() const;
  std::vector<int64_t> as_i64_vector() const;

  // A human-readable JSON form (arrays longer than `max_items` are cut, with a count).
  nlohmann::json to_json(size_t max_items = SIZE_MAX) const;

  bool operator==(const Value& other) const;

 private:
  using Storage = std::variant<std::monostate, uint64_t, int64_t, double, bool, std::string,
                               std::shared_ptr<const ValueArray>>;
  Value(ValueType type, Storage storage) : type_(type), storage_(std::move(storage)) {}
  ValueType type_ = ValueType::U8;
  Storage storage_;
};

// Ordered (by key) metadata with typed, error-naming getters.
class Metadata {
 public:
  void set(const std::string& key, Value value) { values_[key] = std::move(value); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const Value* find(const std::string& key) const;
  // Throws "metadata key 'llama.block_count' is missing" when absent.
  const Value& at(const std::string& key) const;
  void erase(const std::string& key) { values_.erase(key); }
  size_t size() const { return values_.size(); }
  const std::map<std::string, Value>& entries() const { return values_; }

  // Typed getters: the checked conversion of at(key), with the key in the error message.
  int64_t get_i64(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  double get_f64(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  // ... or `fallback` when the key is absent (a present key of the wrong type still throws).
  int64_t get_i64_or(const std::string& key, int64_t fallback) const;
  double get_f64_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;

  // general.architecture, e.g. "llama"; keys of the model are "<arch>.<name>".
  std::string architecture() const { return get_string("general.architecture"); }

  nlohmann::json to_json(size_t max_items = 8) const;

  bool operator==(const Metadata& other) const { return values_ == other.values_; }

 private:
  std::map<std::string, Value> values_;
};

}  // namespace jitllm
