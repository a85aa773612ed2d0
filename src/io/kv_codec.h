// GGUF's binary key/value encoding of `Metadata` (little-endian), the one encoder and the one
// hardened decoder used by the GGUF reader/writer and the .jlm container: per pair a string key
// (u64 length + bytes), a u32 gguf_type, then the value (strings as u64 length + bytes, bools as
// one byte, arrays as u32 element type + u64 count + elements). The .jlm container stores its
// metadata this way so a GGUF's metadata survives conversion exactly, integer widths included.
// Also the bounds-checked ByteCursor both readers use for their other tables.
//
// The decoder checks every length and count against the bytes left before allocating, bounds
// array nesting and the total number of array items, and names the byte offset and the field
// ("metadata key 7 ('tokenizer.ggml.tokens') item 123") in its errors. Field names are built only
// when an error needs them, so decoding a 300k-item vocabulary costs no formatting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "io/metadata.h"

namespace jitllm {

// Limits of the decoder.
inline constexpr int kKvMaxArrayDepth = 8;  // arrays nested deeper than this are refused
// Array items per decode (a GGUF file, a .jlm section), all arrays together. A 262k-token
// vocabulary with scores, types and merges is ~1M; the cap keeps a hostile u8 array from becoming
// 48 bytes of Value per byte of input.
inline constexpr uint64_t kKvMaxArrayItems = uint64_t(1) << 24;
// Smallest pair: key length (8) + type (4) + one value byte.
inline constexpr uint64_t kKvMinPairBytes = 13;

// A field's description for error messages, built only when an error needs it. A root holds the
// text; a child adds " item N" and/or a suffix to its parent. Views must outlive the read.
struct FieldName {
  static constexpr uint64_t kNoItem = ~uint64_t(0);
  std::string_view text;
  const FieldName* parent = nullptr;
  uint64_t item = kNoItem;

  FieldName(const char* t) : text(t) {}  // NOLINT: implicit, a plain name is the common case
  FieldName(std::string_view t, const FieldName* p = nullptr, uint64_t i = kNoItem)
      : text(t), parent(p), item(i) {}
  FieldName(const std::string& t) : text(t) {}  // NOLINT
  std::string str() const;
};

// A bounds-checked little-endian reader over a byte range. Errors read
//   "<file>: offset N: <field>: <message>"          for a whole file (ByteCursor::whole_file), or
//   "<name> at offset N: <field>: <message>"        for a section (name like "m.jlm: metadata"),
// with N the offset in the file (base_offset + position) where the bad field starts.
class ByteCursor {
 public:
  ByteCursor(const uint8_t* bytes, size_t size, std::string name, uint64_t base_offset)
      : bytes_(bytes), size_(size), name_(std::move(name)), base_(base_offset) {}
  static ByteCursor whole_file(const uint8_t* bytes, size_t size, std::string file) {
    ByteCursor c(bytes, size, std::move(file), 0);
    c.whole_file_ = true;
    return c;
  }

  // Array items the KV decoder may still create (see kKvMaxArrayItems).
  uint64_t array_items_left = kKvMaxArrayItems;

  template <typename T>
  T read(const FieldName& field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) fail_short(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint8_t u8(const FieldName& field) { return read<uint8_t>(field); }
  uint32_t u32(const FieldName& field) { return read<uint32_t>(field); }
  uint64_t u64(const FieldName& field) { return read<uint64_t>(field); }
  int32_t i32(const FieldName& field) { return read<int32_t>(field); }
  int64_t i64(const FieldName& field) { return read<int64_t>(field); }
  std::string string(const FieldName& field);  // u64 length + bytes
  const uint8_t* take(size_t n, const FieldName& field);

  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  size_t size() const { return size_; }
  uint64_t file_offset() const { return base_ + pos_; }
  const std::string& name() const { return name_; }
  // What "runs past the end of ..." refers to in errors.
  const char* extent() const { return whole_file_ ? "the file" : "the section"; }

  // Throws at `position` (a position in this range), naming `field`.
  [[noreturn]] void fail(size_t position, const FieldName& field, std::string_view message) const;
  // Throws at the current position, without a field.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  [[noreturn]] void fail_short(size_t n, const FieldName& field) const;
  [[noreturn]] void raise(size_t position, const std::string* field,
                          std::string_view message) const;

  const uint8_t* bytes_;
  size_t size_;
  size_t pos_ = 0;
  std::string name_;
  uint64_t base_;
  bool whole_file_ = false;
};

// Little-endian appenders matching ByteCursor.
void put_u32(std::vector<uint8_t>& out, uint32_t v);
void put_u64(std::vector<uint8_t>& out, uint64_t v);
void put_string(std::vector<uint8_t>& out, const std::string& s);

// Appends `count` (u64) then every pair of `metadata`, in key order. The GGUF header's key count
// is immediately followed by its pairs, so the GGUF writer uses this as is.
void encode_metadata(const Metadata& metadata, std::vector<uint8_t>& out);

// Decodes what encode_metadata wrote from `bytes` (exactly `size` bytes must be consumed).
// `name` (e.g. "model.jlm: metadata") and `base_offset` (file offset of bytes[0]) go into errors.
Metadata decode_metadata(const uint8_t* bytes, size_t size, const std::string& name,
                         uint64_t base_offset);

// Reads `count` key/value pairs at the cursor (the GGUF header's KV block and decode_metadata).
// Keys must be non-empty and unique. If `locate` is given and its key is read, `locate->at` gets
// the cursor position where that pair starts (for checks made after decoding).
struct KvLocate {
  std::string_view key;
  size_t at = 0;
  bool found = false;
};
Metadata decode_kv_pairs(ByteCursor& cursor, uint64_t count, KvLocate* locate = nullptr);

}  // namespace jitllm
