// GGUF v2/v3 parser over bytes in memory (parse_gguf). It owns the binary layout of the header,
// the metadata KV section and the tensor table, and every check that makes hostile input safe:
// each count, length, dimension and offset read from the file is compared with the bytes that
// remain *before* anything is allocated, so a string length of 2^60 is an error, not an
// allocation. Errors name the file, the byte offset where the bad field starts, and the field.
// Opening files (mmap, split parts) is gguf_file.cpp; writing is gguf_write.cpp.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string_view>
#include <unordered_set>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"

namespace jitllm {

namespace {

// A field's description for error messages, built only when an error needs it (formatting
// "metadata key 7 ('tokenizer.ggml.tokens') item 123" for each of 150k items costs more than
// reading them). A root holds the text; a child adds " item N" and/or a suffix to its parent.
struct Field {
  std::string_view text;
  const Field* parent = nullptr;
  uint64_t item = kNoItem;
  static constexpr uint64_t kNoItem = ~uint64_t(0);

  std::string str() const {
    std::string s = parent ? parent->str() : std::string();
    if (item != kNoItem) s += fmt::format(" item {}", item);
    s += text;
    return s;
  }
};

// Reads little-endian fields from [data, data + size) and fails with the file name, the offset
// where the field starts and the field's description.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  // Array items left to read in this file (see gguf::kMaxArrayItems).
  uint64_t array_items_left = gguf::kMaxArrayItems;

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  size_t size() const { return size_; }

  [[noreturn]] void fail(size_t at, std::string_view field, std::string_view message) const {
    throw Error(fmt::format("{}: offset {}: {}: {}", name_, at, field, message));
  }
  [[noreturn]] void fail(size_t at, const Field& field, std::string_view message) const {
    fail(at, std::string_view(field.str()), message);
  }

  template <typename T>
  T read(const Field& field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T))
      fail(pos_, field,
           fmt::format("{}-byte value runs past the end of the file (size {})", sizeof(T), size_));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  T read(std::string_view field) {
    return read<T>(Field{field});
  }

  std::string read_string(const Field& field) {
    const size_t at = pos_;
    const uint64_t len = read<uint64_t>(field);
    if (len > remaining())
      fail(at, field,
           fmt::format("string length {} runs past the end of the file (size {})", len, size_));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  std::string read_string(std::string_view field) { return read_string(Field{field}); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

bool is_value_type(uint32_t t) { return t <= uint32_t(ValueType::F64); }

Value read_value(Cursor& in, ValueType type, const Field& field, int depth);

Value read_array(Cursor& in, const Field& field, int depth) {
  const size_t at = in.pos();
  if (depth >= gguf::kMaxArrayDepth)
    in.fail(at, field, fmt::format("arrays nested deeper than {} levels", gguf::kMaxArrayDepth));
  const uint32_t elem = in.read<uint32_t>(Field{" element type", &field});
  if (!is_value_type(elem))
    in.fail(at, field, fmt::format("unknown array element type {}", elem));
  const size_t count_at = in.pos();
  const uint64_t count = in.read<uint64_t>(Field{" length", &field});
  const size_t min_bytes = gguf::min_encoded_bytes(ValueType(elem));
  if (count > in.remaining() / min_bytes)
    in.fail(count_at, field,
            fmt::format("array length {} of {} runs past the end of the file (size {})", count,
                        value_type_name(ValueType(elem)), in.size()));
  // Each item becomes a 48-byte Value, so bytes in the file alone do not bound the memory.
  if (count > in.array_items_left)
    in.fail(count_at, field,
            fmt::format("array length {} takes the file past {} array items in all", count,
                        gguf::kMaxArrayItems));
  in.array_items_left -= count;
  std::vector<Value> items;
  items.reserve(size_t(count));
  for (uint64_t i = 0; i < count; ++i)
    items.push_back(read_value(in, ValueType(elem), Field{"", &field, i}, depth + 1));
  return Value::array(ValueType(elem), std::move(items));
}

Value read_value(Cursor& in, ValueType type, const Field& field, int depth) {
  switch (type) {
    case ValueType::U8: return Value::u8(in.read<uint8_t>(field));
    case ValueType::I8: return Value::i8(in.read<int8_t>(field));
    case ValueType::U16: return Value::u16(in.read<uint16_t>(field));
    case ValueType::I16: return Value::i16(in.read<int16_t>(field));
    case ValueType::U32: return Value::u32(in.read<uint32_t>(field));
    case ValueType::I32: return Value::i32(in.read<int32_t>(field));
    case ValueType::U64: return Value::u64(in.read<uint64_t>(field));
    case ValueType::I64: return Value::i64(in.read<int64_t>(field));
    case ValueType::F32: return Value::f32(in.read<float>(field));
    case ValueType::F64: return Value::f64(in.read<double>(field));
    case ValueType::Bool: {
      const size_t at = in.pos();
      const uint8_t b = in.read<uint8_t>(field);
      if (b > 1) in.fail(at, field, fmt::format("bool value {} is neither 0 nor 1", b));
      return Value::boolean(b != 0);
    }
    case ValueType::String: return Value::string(in.read_string(field));
    case ValueType::Array: return read_array(in, field, depth);
  }
  in.fail(in.pos(), field, fmt::format("unknown value type {}", uint32_t(type)));
}

void read_header(Cursor& in, GgufParsed& out, uint64_t& n_tensors, uint64_t& n_kv) {
  if (in.size() < 4 || std::memcmp(in.read<std::array<char, 4>>("magic").data(), "GGUF", 4) != 0)
    in.fail(0, "magic", "not a GGUF file (expected the bytes 'GGUF')");
  const uint32_t version = in.read<uint32_t>("version");
  if (version == 1)
    in.fail(4, "version",
            "GGUF version 1 (32-bit counts) is not supported; re-save the model with a current "
            "llama.cpp (GGUF v3)");
  if (version != 2 && version != 3) {
    // A big-endian file reads its version byte-swapped (3 -> 0x03000000).
    if (version == 0x02000000u || version == 0x03000000u)
      in.fail(4, "version", "big-endian GGUF files are not supported");
    in.fail(4, "version", fmt::format("unsupported GGUF version {} (supported: 2, 3)", version));
  }
  out.version = version;
  n_tensors = in.read<uint64_t>("tensor count");
  n_kv = in.read<uint64_t>("metadata key count");
  // Both sections follow: each KV takes at least 13 bytes, each tensor info at least 24.
  if (n_kv > in.remaining() / gguf::kMinKvBytes)
    in.fail(16, "metadata key count",
            fmt::format("{} keys cannot fit in the {} bytes that follow", n_kv, in.remaining()));
  if (n_tensors > in.remaining() / gguf::kMinTensorInfoBytes ||
      n_kv * gguf::kMinKvBytes + n_tensors * gguf::kMinTensorInfoBytes > in.remaining())
    in.fail(8, "tensor count",
            fmt::format("{} tensors (and {} keys) cannot fit in the {} bytes that follow",
                        n_tensors, n_kv, in.remaining()));
}

void read_metadata(Cursor& in, uint64_t n_kv, Metadata& metadata, size_t& alignment_at) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = in.pos();
    const std::string key_field = fmt::format("metadata key {}", i);
    std::string key = in.read_string(key_field);
    const std::string field = fmt::format("metadata key {} ('{}')", i, key);
    const Field root{field};
    if (metadata.has(key)) in.fail(at, field, "duplicate key");
    const size_t type_at = in.pos();
    const uint32_t type = in.read<uint32_t>(Field{" type", &root});
    if (!is_value_type(type)) in.fail(type_at, field, fmt::format("unknown value type {}", type));
    if (key == gguf::kKeyAlignment) alignment_at = at;
    metadata.set(key, read_value(in, ValueType(type), root, 0));
  }
}

// general.alignment, checked at the end of the KV section; `key_at` is where its KV starts.
size_t read_alignment(const Cursor& in, const Metadata& metadata, size_t key_at) {
  const Value* v = metadata.find(gguf::kKeyAlignment);
  if (!v) return gguf::kDefaultAlignment;
  const std::string field = fmt::format("metadata key '{}'", gguf::kKeyAlignment);
  if (!v->is_integer())
    in.fail(key_at, field, fmt::format("expected an integer, got {}", value_type_name(v->type())));
  const int64_t a = v->as_i64();
  if (a <= 0 || (a & (a - 1)) != 0 || a > (int64_t(1) << 30))
    in.fail(key_at, field, fmt::format("alignment {} is not a power of two in [1, 2^30]", a));
  return size_t(a);
}

struct TensorRecord {
  size_t header_at;  // where the tensor's info starts in the file (for messages)
  std::string field;
};

void read_tensor_infos(Cursor& in, uint64_t n_tensors, std::vector<TensorInfo>& tensors,
                       std::vector<TensorRecord>& records) {
  tensors.reserve(size_t(n_tensors));
  records.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = in.pos();
    TensorInfo t;
    t.name = in.read_string(fmt::format("tensor {} name", i));
    const std::string field = fmt::format("tensor {} ('{}')", i, t.name);
    const size_t dims_at = in.pos();
    const uint32_t n_dims = in.read<uint32_t>(field + " dimension count");
    if (n_dims > gguf::kMaxDims)
      in.fail(dims_at, field, fmt::format("{} dimensions (at most {})", n_dims, gguf::kMaxDims));
    // The product of the dimensions, zeros counted as 1, must fit: then every partial product
    // (elements(), rows()) does too, even when a zero dimension makes the tensor empty.
    int64_t extent = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t ne_at = in.pos();
      const int64_t ne = in.read<int64_t>(fmt::format("{} dimension {}", field, d));
      if (ne < 0) in.fail(ne_at, field, fmt::format("dimension {} is negative ({})", d, ne));
      if (ne != 0 && extent > std::numeric_limits<int64_t>::max() / ne)
        in.fail(ne_at, field,
                fmt::format("dimension {} ({}) makes the element count overflow 64 bits", d, ne));
      extent *= std::max<int64_t>(ne, 1);
      t.shape.push_back(ne);
    }
    const size_t type_at = in.pos();
    const uint32_t type_id = in.read<uint32_t>(field + " type");
    const QuantTraits* traits = quant_traits(type_id);
    if (!traits) in.fail(type_at, field, fmt::format("unknown tensor type id {}", type_id));
    t.type = traits->type;
    size_t row;
    try {
      row = row_bytes(t.type, t.row_length());
    } catch (const Error& e) {
      in.fail(type_at, field, e.what());
    }
    const int64_t rows = t.rows();  // cannot overflow: the full product did not
    if (rows != 0 && row > std::numeric_limits<size_t>::max() / size_t(rows))
      in.fail(type_at, field, "byte size overflows 64 bits");
    t.bytes = row * size_t(rows);
    t.offset = in.read<uint64_t>(field + " data offset");
    tensors.push_back(std::move(t));
    records.push_back({at, field});
  }
  // Checked once the vector no longer moves, so the views stay valid.
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!names.insert(tensors[i].name).second)
      in.fail(records[i].header_at, records[i].field, "duplicate tensor name");
}

// Places each tensor inside the data section: aligned, inside the file, not overlapping another.
void place_tensors(const Cursor& in, size_t data_offset, size_t alignment,
                   std::vector<TensorInfo>& tensors, const std::vector<TensorRecord>& records,
                   const uint8_t* bytes) {
  const size_t size = in.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorInfo& t = tensors[i];
    if (t.offset % alignment != 0)
      in.fail(records[i].header_at, records[i].field,
              fmt::format("data offset {} is not a multiple of the alignment {}", t.offset,
                          alignment));
    // data_offset + offset + bytes <= size, without overflow.
    const bool inside = data_offset <= size && t.offset <= size - data_offset &&
                        t.bytes <= size - data_offset - t.offset;
    if (!inside)
      in.fail(records[i].header_at, records[i].field,
              fmt::format("data [{}, +{} bytes) at data offset {} runs past the end of the file "
                          "(size {}, data section starts at {})",
                          data_offset + t.offset, t.bytes, t.offset, size, data_offset));
    t.data = bytes + data_offset + t.offset;
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  // Sorted by offset, a tensor overlaps an earlier one iff it starts before the furthest end so
  // far (empty tensors occupy nothing and are skipped).
  const TensorInfo* furthest = nullptr;
  for (size_t k : order) {
    const TensorInfo& cur = tensors[k];
    if (cur.bytes == 0) continue;
    if (furthest && furthest->offset + furthest->bytes > cur.offset)
      in.fail(records[k].header_at, records[k].field,
              fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", cur.offset,
                          cur.offset + cur.bytes, furthest->name, furthest->offset,
                          furthest->offset + furthest->bytes));
    if (!furthest || cur.offset + cur.bytes > furthest->offset + furthest->bytes) furthest = &cur;
  }
}

}  // namespace

GgufParsed parse_gguf(const uint8_t* bytes, size_t size, const std::string& name) {
  Cursor in(bytes, size, name);
  GgufParsed out;
  uint64_t n_tensors = 0, n_kv = 0;
  read_header(in, out, n_tensors, n_kv);
  size_t alignment_at = 0;
  read_metadata(in, n_kv, out.metadata, alignment_at);
  out.alignment = read_alignment(in, out.metadata, alignment_at);
  std::vector<TensorRecord> records;
  read_tensor_infos(in, n_tensors, out.tensors, records);
  const size_t end = in.pos();
  out.data_offset = (end + out.alignment - 1) / out.alignment * out.alignment;
  place_tensors(in, out.data_offset, out.alignment, out.tensors, records, bytes);
  return out;
}

}  // namespace jitllm
