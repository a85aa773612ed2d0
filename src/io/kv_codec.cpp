// GGUF binary key/value encoding (see kv_codec.h): byte cursor, encoder, hardened decoder.
#include "io/kv_codec.h"

#include <bit>

#include "core/error.h"

namespace jitllm {

static_assert(std::endian::native == std::endian::little, "GGUF and .jlm are little-endian");

// ---- FieldName, ByteCursor ---------------------------------------------------------------------

std::string FieldName::str() const {
  std::string s = parent ? parent->str() : std::string();
  if (item != kNoItem) s += fmt::format(" item {}", item);
  s += text;
  return s;
}

void ByteCursor::raise(size_t position, const std::string* field, std::string_view message) const {
  const std::string where = whole_file_
                                ? fmt::format("{}: offset {}: ", name_, base_ + position)
                                : fmt::format("{} at offset {}: ", name_, base_ + position);
  if (field && !field->empty()) throw Error(fmt::format("{}{}: {}", where, *field, message));
  throw Error(where + std::string(message));
}

void ByteCursor::fail(size_t position, const FieldName& field, std::string_view message) const {
  const std::string text = field.str();
  raise(position, &text, message);
}

void ByteCursor::fail(const std::string& message) const { raise(pos_, nullptr, message); }

void ByteCursor::fail_short(size_t n, const FieldName& field) const {
  fail(pos_, field, fmt::format("{}-byte value runs past the end of {} (size {})", n, extent(),
                                size_));
}

const uint8_t* ByteCursor::take(size_t n, const FieldName& field) {
  if (n > remaining())
    fail(pos_, field,
         fmt::format("{} bytes run past the end of {} (size {})", n, extent(), size_));
  const uint8_t* p = bytes_ + pos_;
  pos_ += n;
  return p;
}

std::string ByteCursor::string(const FieldName& field) {
  const size_t at = pos_;
  const uint64_t n = u64(field);
  if (n > remaining())
    fail(at, field,
         fmt::format("string length {} runs past the end of {} (size {})", n, extent(), size_));
  std::string s(reinterpret_cast<const char*>(bytes_ + pos_), size_t(n));
  pos_ += size_t(n);
  return s;
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

namespace {

// ---- encoding ----------------------------------------------------------------------------------

template <typename T>
void put_raw(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_value(std::vector<uint8_t>& out, const Value& v) {
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
      for (const Value& item : a.items) put_value(out, item);
      break;
    }
  }
}

// ---- decoding ----------------------------------------------------------------------------------

bool is_value_type(uint32_t t) { return t <= uint32_t(ValueType::F64); }

// Smallest encoded size of one value of `type` (its exact size for fixed-size types), to bound
// counts by the bytes that remain before allocating.
size_t min_encoded_bytes(ValueType type) {
  switch (type) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: return 8;   // length
    case ValueType::Array: return 12;   // element type + length
  }
  return 1;
}

Value read_value(ByteCursor& c, ValueType type, const FieldName& field, int depth);

Value read_array(ByteCursor& c, const FieldName& field, int depth) {
  const size_t at = c.position();
  // Checked before reading on, so a million-deep chain fails here instead of on the stack.
  if (depth >= kKvMaxArrayDepth)
    c.fail(at, field, fmt::format("arrays nested deeper than {} levels", kKvMaxArrayDepth));
  const uint32_t elem = c.u32(FieldName(" element type", &field));
  if (!is_value_type(elem)) c.fail(at, field, fmt::format("unknown array element type {}", elem));
  const size_t count_at = c.position();
  const uint64_t count = c.u64(FieldName(" length", &field));
  const size_t min_bytes = min_encoded_bytes(ValueType(elem));
  if (count > c.remaining() / min_bytes)
    c.fail(count_at, field,
           fmt::format("array length {} of {} runs past the end of {} (size {}): items of at "
                       "least {} bytes cannot fit in the {} bytes left",
                       count, value_type_name(ValueType(elem)), c.extent(), c.size(), min_bytes,
                       c.remaining()));
  // Each item becomes a 48-byte Value, so the input's bytes alone do not bound the memory.
  if (count > c.array_items_left)
    c.fail(count_at, field,
           fmt::format("array length {} takes the file past {} array items in all", count,
                       kKvMaxArrayItems));
  c.array_items_left -= count;
  std::vector<Value> items;
  items.reserve(size_t(count));
  for (uint64_t i = 0; i < count; ++i)
    items.push_back(read_value(c, ValueType(elem), FieldName("", &field, i), depth + 1));
  return Value::array(ValueType(elem), std::move(items));
}

Value read_value(ByteCursor& c, ValueType type, const FieldName& field, int depth) {
  switch (type) {
    case ValueType::U8: return Value::u8(c.read<uint8_t>(field));
    case ValueType::I8: return Value::i8(c.read<int8_t>(field));
    case ValueType::U16: return Value::u16(c.read<uint16_t>(field));
    case ValueType::I16: return Value::i16(c.read<int16_t>(field));
    case ValueType::U32: return Value::u32(c.read<uint32_t>(field));
    case ValueType::I32: return Value::i32(c.read<int32_t>(field));
    case ValueType::U64: return Value::u64(c.read<uint64_t>(field));
    case ValueType::I64: return Value::i64(c.read<int64_t>(field));
    case ValueType::F32: return Value::f32(c.read<float>(field));
    case ValueType::F64: return Value::f64(c.read<double>(field));
    case ValueType::Bool: {
      const size_t at = c.position();
      const uint8_t b = c.read<uint8_t>(field);
      if (b > 1) c.fail(at, field, fmt::format("bool value {} is neither 0 nor 1", b));
      return Value::boolean(b != 0);
    }
    case ValueType::String: return Value::string(c.string(field));
    case ValueType::Array: return read_array(c, field, depth);
  }
  c.fail(c.position(), field, fmt::format("unknown value type {}", uint32_t(type)));
}

}  // namespace

void encode_metadata(const Metadata& metadata, std::vector<uint8_t>& out) {
  put_u64(out, metadata.size());
  for (const auto& [key, value] : metadata.entries()) {
    // The decoder (like llama.cpp's) refuses empty keys: never write a file that cannot be read.
    if (key.empty()) throw_error("metadata has an empty key, which GGUF and .jlm cannot store");
    put_string(out, key);
    put_u32(out, uint32_t(value.type()));
    put_value(out, value);
  }
}

Metadata decode_kv_pairs(ByteCursor& c, uint64_t count, KvLocate* locate) {
  if (count > c.remaining() / kKvMinPairBytes)
    c.fail(fmt::format("{} key/value pairs cannot fit in the {} bytes left", count, c.remaining()));
  Metadata metadata;
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = c.position();
    // A few dozen keys per file: formatting their names eagerly is cheap (items are lazy).
    const std::string key_field = fmt::format("metadata key {}", i);
    const std::string key = c.string(key_field);
    if (key.empty()) c.fail(at, key_field, "empty key");  // llama.cpp refuses these too
    const std::string root_text = fmt::format("metadata key {} ('{}')", i, key);
    const FieldName root(root_text);
    if (metadata.has(key)) c.fail(at, root, "duplicate key");
    const size_t type_at = c.position();
    const uint32_t type = c.u32(FieldName(" type", &root));
    if (!is_value_type(type)) c.fail(type_at, root, fmt::format("unknown value type {}", type));
    if (locate && key == locate->key) {
      locate->at = at;
      locate->found = true;
    }
    metadata.set(key, read_value(c, ValueType(type), root, 0));
  }
  return metadata;
}

Metadata decode_metadata(const uint8_t* bytes, size_t size, const std::string& name,
                         uint64_t base_offset) {
  ByteCursor c(bytes, size, name, base_offset);
  const uint64_t count = c.u64("pair count");
  Metadata metadata = decode_kv_pairs(c, count);
  if (c.remaining() != 0)
    c.fail(fmt::format("{} unexpected bytes after the last pair", c.remaining()));
  return metadata;
}

}  // namespace jitllm
