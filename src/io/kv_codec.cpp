// GGUF binary key/value encoding (see kv_codec.h): encoder, bounds-checked decoder, byte cursor.
#include "io/kv_codec.h"

#include <bit>
#include <cstring>

#include "core/error.h"

namespace jitllm {

static_assert(std::endian::native == std::endian::little, "GGUF and .jlm are little-endian");

// ---- ByteCursor --------------------------------------------------------------------------------

void ByteCursor::fail(const std::string& message) const {
  throw_error("{} at offset {}: {}", name_, base_ + pos_, message);
}

const uint8_t* ByteCursor::take(size_t n, const char* what) {
  if (n > remaining())
    fail(fmt::format("{} needs {} bytes but only {} remain", what, n, remaining()));
  const uint8_t* p = bytes_ + pos_;
  pos_ += n;
  return p;
}

uint8_t ByteCursor::u8(const char* what) { return *take(1, what); }

uint32_t ByteCursor::u32(const char* what) {
  uint32_t v;
  std::memcpy(&v, take(4, what), 4);
  return v;
}

uint64_t ByteCursor::u64(const char* what) {
  uint64_t v;
  std::memcpy(&v, take(8, what), 8);
  return v;
}

std::string ByteCursor::string(const char* what) {
  const size_t at = pos_;
  const uint64_t n = u64(what);
  if (n > remaining()) {
    pos_ = at;
    fail(fmt::format("{}: string length {} runs past the end ({} bytes remain)", what, n,
                     remaining() - 8));
  }
  const uint8_t* p = take(size_t(n), what);
  return std::string(reinterpret_cast<const char*>(p), size_t(n));
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + 4);
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + 8);
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// ---- encoding ----------------------------------------------------------------------------------

namespace {

template <typename T>
void put_raw(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_scalar(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type()) {
    case ValueType::U8: put_raw(out, uint8_t(v.as_u64())); break;
    case ValueType::I8: put_raw(out, int8_t(v.as_i64())); break;
    case ValueType::U16: put_raw(out, uint16_t(v.as_u64())); break;
    case ValueType::I16: put_raw(out, int16_t(v.as_i64())); break;
    case ValueType::U32: put_raw(out, uint32_t(v.as_u64())); break;
    case ValueType::I32: put_raw(out, int32_t(v.as_i64())); break;
    case ValueType::U64: put_raw(out, uint64_t(v.as_u64())); break;
    case ValueType::I64: put_raw(out, int64_t(v.as_i64())); break;
    case ValueType::F32: put_raw(out, float(v.as_f64())); break;
    case ValueType::F64: put_raw(out, double(v.as_f64())); break;
    case ValueType::Bool: put_raw(out, uint8_t(v.as_bool() ? 1 : 0)); break;
    case ValueType::String: put_string(out, v.as_string()); break;
    case ValueType::Array: {
      const ValueArray& a = v.as_array();
      put_u32(out, uint32_t(a.element_type));
      put_u64(out, a.items.size());
      for (const Value& item : a.items) put_scalar(out, item);
      break;
    }
  }
}

// Smallest encoded size of one element of `type` (0 for unknown), to bound array counts before
// allocating: a hostile count can never make us reserve more than the input could hold.
size_t min_encoded_bytes(ValueType type) {
  switch (type) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: return 8;
    case ValueType::Array: return 12;
  }
  return 0;
}

template <typename T>
T get_raw(ByteCursor& c, const char* what) {
  T v;
  std::memcpy(&v, c.take(sizeof(T), what), sizeof(T));
  return v;
}

Value read_value(ByteCursor& c, ValueType type, const std::string& key, int depth) {
  switch (type) {
    case ValueType::U8: return Value::u8(get_raw<uint8_t>(c, "u8 value"));
    case ValueType::I8: return Value::i8(get_raw<int8_t>(c, "i8 value"));
    case ValueType::U16: return Value::u16(get_raw<uint16_t>(c, "u16 value"));
    case ValueType::I16: return Value::i16(get_raw<int16_t>(c, "i16 value"));
    case ValueType::U32: return Value::u32(get_raw<uint32_t>(c, "u32 value"));
    case ValueType::I32: return Value::i32(get_raw<int32_t>(c, "i32 value"));
    case ValueType::U64: return Value::u64(get_raw<uint64_t>(c, "u64 value"));
    case ValueType::I64: return Value::i64(get_raw<int64_t>(c, "i64 value"));
    case ValueType::F32: return Value::f32(get_raw<float>(c, "f32 value"));
    case ValueType::F64: return Value::f64(get_raw<double>(c, "f64 value"));
    case ValueType::Bool: {
      const uint8_t b = get_raw<uint8_t>(c, "bool value");
      if (b > 1) c.fail(fmt::format("key '{}': bool value {} is neither 0 nor 1", key, b));
      return Value::boolean(b != 0);
    }
    case ValueType::String: return Value::string(c.string("string value"));
    case ValueType::Array: {
      if (depth > 4) c.fail(fmt::format("key '{}': arrays nested deeper than 4", key));
      const uint32_t raw_element = c.u32("array element type");
      const size_t min_bytes = min_encoded_bytes(ValueType(raw_element));
      if (raw_element > uint32_t(ValueType::F64) || min_bytes == 0)
        c.fail(fmt::format("key '{}': unknown array element type {}", key, raw_element));
      const uint64_t count = c.u64("array count");
      if (count > c.remaining() / min_bytes)
        c.fail(fmt::format("key '{}': array of {} {} elements cannot fit in the {} bytes left",
                           key, count, value_type_name(ValueType(raw_element)), c.remaining()));
      std::vector<Value> items;
      items.reserve(size_t(count));
      for (uint64_t i = 0; i < count; ++i)
        items.push_back(read_value(c, ValueType(raw_element), key, depth + 1));
      return Value::array(ValueType(raw_element), std::move(items));
    }
  }
  c.fail(fmt::format("key '{}': unknown value type {}", key, uint32_t(type)));
}

}  // namespace

void encode_metadata(const Metadata& metadata, std::vector<uint8_t>& out) {
  put_u64(out, metadata.size());
  for (const auto& [key, value] : metadata.entries()) {
    put_string(out, key);
    put_u32(out, uint32_t(value.type()));
    put_scalar(out, value);
  }
}

Metadata decode_kv_pairs(ByteCursor& c, uint64_t count) {
  // Each pair takes at least 8 (key length) + 4 (type) + 1 bytes.
  if (count > c.remaining() / 13)
    c.fail(fmt::format("{} key/value pairs cannot fit in the {} bytes left", count, c.remaining()));
  Metadata metadata;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string key = c.string("metadata key");
    if (key.empty()) c.fail(fmt::format("metadata pair {} has an empty key", i));
    const uint32_t raw_type = c.u32("value type");
    if (raw_type > uint32_t(ValueType::F64))
      c.fail(fmt::format("key '{}': unknown value type {}", key, raw_type));
    if (metadata.has(key)) c.fail(fmt::format("key '{}' appears twice", key));
    metadata.set(key, read_value(c, ValueType(raw_type), key, 0));
  }
  return metadata;
}

Metadata decode_metadata(const uint8_t* bytes, size_t size, const std::string& name,
                         uint64_t base_offset) {
  ByteCursor c(bytes, size, name, base_offset);
  const uint64_t count = c.u64("pair count");
  Metadata metadata = decode_kv_pairs(c, count);
  if (c.remaining() != 0) c.fail(fmt::format("{} unexpected bytes after the last pair", c.remaining()));
  return metadata;
}

}  // namespace jitllm
