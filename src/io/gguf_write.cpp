// write_gguf: serializes metadata and tensors as GGUF v3 (the layout parse_gguf reads; the KV
// block through the shared encoder in kv_codec.h). Tensor offsets are assigned here, in the
// order given, each padded to the alignment. The file is written next to its destination (under
// a unique name) and renamed into place, so a failed write leaves no half file.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/temp_file.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "io/kv_codec.h"

namespace jitllm {

namespace {

class Writer {
 public:
  explicit Writer(const std::string& path) : path_(path), out_(path, std::ios::binary) {
    if (!out_) throw_error("{}: cannot open for writing", path);
  }

  void bytes(const void* p, size_t n) {
    out_.write(static_cast<const char*>(p), std::streamsize(n));
    pos_ += n;
  }
  void pad_to(size_t alignment) {
    static const char zeros[64] = {};
    size_t pad = (alignment - pos_ % alignment) % alignment;
    while (pad > 0) {
      const size_t n = std::min(pad, sizeof(zeros));
      bytes(zeros, n);
      pad -= n;
    }
  }
  size_t pos() const { return pos_; }
  void close() {
    out_.close();
    if (!out_) throw_error("{}: write failed", path_);
  }

 private:
  std::string path_;
  std::ofstream out_;
  size_t pos_ = 0;
};

// Bytes of `t` computed from its type and shape; a caller-set `bytes` must agree.
size_t tensor_bytes(const TensorInfo& t, const std::string& path) {
  if (t.shape.size() > gguf::kMaxDims)
    throw_error("{}: tensor '{}': {} dimensions (at most {})", path, t.name, t.shape.size(),
                gguf::kMaxDims);
  // Same rule as the reader: the product with zeros counted as 1 must fit in int64.
  int64_t extent = 1, rows = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0) throw_error("{}: tensor '{}': negative dimension", path, t.name);
    if (t.shape[d] != 0 && extent > std::numeric_limits<int64_t>::max() / t.shape[d])
      throw_error("{}: tensor '{}': element count overflows", path, t.name);
    extent *= std::max<int64_t>(t.shape[d], 1);
    if (d > 0) rows *= t.shape[d];
  }
  size_t row;
  try {
    row = row_bytes(t.type, t.row_length());
  } catch (const Error& e) {
    rethrow_with_context(e, fmt::format("{}: tensor '{}'", path, t.name));
  }
  const size_t bytes = row * size_t(rows);
  if (t.bytes != 0 && t.bytes != bytes)
    throw_error("{}: tensor '{}': bytes is {}, but its type and shape need {}", path, t.name,
                t.bytes, bytes);
  if (bytes != 0 && t.data == nullptr)
    throw_error("{}: tensor '{}': no data to write", path, t.name);
  return bytes;
}

}  // namespace

void write_gguf(const std::string& path, const Metadata& metadata,
                const std::vector<TensorInfo>& tensors, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw_error("{}: alignment {} is not a power of two", path, alignment);
  // The reader takes the alignment from general.alignment, so the key must agree with it.
  Metadata md = metadata;
  if (const Value* a = md.find(gguf::kKeyAlignment)) {
    if (!a->is_integer() || a->as_i64() != int64_t(alignment))
      throw_error("{}: metadata '{}' is {}, but the file is written with alignment {}", path,
                  gguf::kKeyAlignment, a->to_json().dump(), alignment);
  } else if (alignment != gguf::kDefaultAlignment) {
    md.set(gguf::kKeyAlignment, Value::u32(uint32_t(alignment)));
  }

  std::vector<size_t> sizes;
  std::vector<uint64_t> offsets;
  uint64_t next = 0;
  for (const TensorInfo& t : tensors) {
    sizes.push_back(tensor_bytes(t, path));
    offsets.push_back(next);
    next += (sizes.back() + alignment - 1) / alignment * alignment;
  }

  // A temporary name of this call's own: concurrent writers of one path never share it.
  std::string tmp;
  ::close(create_temp_beside(path, tmp));
  try {
    // The header (magic .. tensor infos) is built in memory with the shared KV encoder: the key
    // count and the pairs are exactly encode_metadata's output.
    std::vector<uint8_t> head(gguf::kMagic, gguf::kMagic + 4);
    put_u32(head, gguf::kWriteVersion);
    put_u64(head, tensors.size());
    encode_metadata(md, head);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorInfo& t = tensors[i];
      put_string(head, t.name);
      put_u32(head, uint32_t(t.shape.size()));
      for (int64_t ne : t.shape) put_u64(head, uint64_t(ne));
      put_u32(head, uint32_t(t.type));
      put_u64(head, offsets[i]);
    }
    Writer w(tmp);
    w.bytes(head.data(), head.size());
    w.pad_to(alignment);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorInfo& t = tensors[i];
      if (sizes[i] != 0 && t.slice_stride != 0) {
        // A tensor kept in slices (a .jlm's expert pages) is written contiguous, slice by slice.
        const size_t n = size_t(t.shape.back()), slice = sizes[i] / n;
        for (size_t e = 0; e < n; ++e) w.bytes(t.data + e * t.slice_stride, slice);
      } else if (sizes[i] != 0) {
        w.bytes(t.data, sizes[i]);
      }
      w.pad_to(alignment);
    }
    w.close();
    std::filesystem::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

}  // namespace jitllm
