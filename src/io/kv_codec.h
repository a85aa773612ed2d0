// GGUF's binary key/value encoding of `Metadata` (little-endian): per pair a string key
// (u64 length + bytes), a u32 gguf_type, then the value (strings as u64 length + bytes, bools as one
// byte, arrays as u32 element type + u64 count + elements). The .jlm container stores its
// metadata this way so a GGUF's metadata survives conversion exactly, integer widths included.
// The decoder checks every length and count against the bytes left and names the section, the
// byte offset and the key in its errors; it never allocates more than the input could hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/metadata.h"

namespace jitllm {

// Appends `count` (u64) then every pair of `metadata`, in key order.
void encode_metadata(const Metadata& metadata, std::vector<uint8_t>& out);

// Decodes what encode_metadata wrote from `bytes` (exactly `size` bytes must be consumed).
// `name` (e.g. "model.jlm: metadata") and `base_offset` (file offset of bytes[0]) go into errors.
Metadata decode_metadata(const uint8_t* bytes, size_t size, const std::string& name,
                         uint64_t base_offset);

// A bounds-checked little-endian reader over a byte range, shared by the .jlm table readers.
class ByteCursor {
 public:
  ByteCursor(const uint8_t* bytes, size_t size, std::string name, uint64_t base_offset)
      : bytes_(bytes), size_(size), name_(std::move(name)), base_(base_offset) {}

  uint8_t u8(const char* what);
  uint32_t u32(const char* what);
  uint64_t u64(const char* what);
  int32_t i32(const char* what) { return int32_t(u32(what)); }
  int64_t i64(const char* what) { return int64_t(u64(what)); }
  std::string string(const char* what);  // u64 length + bytes
  const uint8_t* take(size_t n, const char* what);

  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  uint64_t file_offset() const { return base_ + pos_; }
  const std::string& name() const { return name_; }
  // Throws "<name> at offset N: <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const uint8_t* bytes_;
  size_t size_;
  size_t pos_ = 0;
  std::string name_;
  uint64_t base_;
};

// Little-endian appenders matching ByteCursor.
void put_u32(std::vector<uint8_t>& out, uint32_t v);
void put_u64(std::vector<uint8_t>& out, uint64_t v);
void put_string(std::vector<uint8_t>& out, const std::string& s);

// Reads `count` key/value pairs at the cursor (the GGUF header's KV block uses this too).
Metadata decode_kv_pairs(ByteCursor& cursor, uint64_t count);

}  // namespace jitllm
