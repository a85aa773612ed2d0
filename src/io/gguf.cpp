// GGUF v2/v3 parser over bytes in memory (parse_gguf). It owns the binary layout of the header
// and the tensor table, and every check that makes them safe on hostile input: each count,
// dimension and offset read from the file is compared with the bytes that remain *before*
// anything is allocated. The metadata KV block is decoded by the shared KV decoder (kv_codec.h),
// over the same whole-file cursor, so its errors have the same form: the file, the byte offset
// where the bad field starts, and the field. Opening files (mmap, split parts) is gguf_file.cpp;
// writing is gguf_write.cpp.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string_view>
#include <unordered_set>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "io/kv_codec.h"

namespace jitllm {

namespace {

void read_header(ByteCursor& in, GgufParsed& out, uint64_t& n_tensors, uint64_t& n_kv) {
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
  if (n_kv > in.remaining() / kKvMinPairBytes)
    in.fail(16, "metadata key count",
            fmt::format("{} keys cannot fit in the {} bytes that follow", n_kv, in.remaining()));
  if (n_tensors > in.remaining() / gguf::kMinTensorInfoBytes ||
      n_kv * kKvMinPairBytes + n_tensors * gguf::kMinTensorInfoBytes > in.remaining())
    in.fail(8, "tensor count",
            fmt::format("{} tensors (and {} keys) cannot fit in the {} bytes that follow",
                        n_tensors, n_kv, in.remaining()));
}

// general.alignment, checked at the end of the KV section; `key_at` is where its KV starts.
size_t read_alignment(const ByteCursor& in, const Metadata& metadata, size_t key_at) {
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

void read_tensor_infos(ByteCursor& in, uint64_t n_tensors, std::vector<TensorInfo>& tensors,
                       std::vector<TensorRecord>& records) {
  tensors.reserve(size_t(n_tensors));
  records.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = in.position();
    TensorInfo t;
    t.name = in.string(fmt::format("tensor {} name", i));
    const std::string field = fmt::format("tensor {} ('{}')", i, t.name);
    const size_t dims_at = in.position();
    const uint32_t n_dims = in.read<uint32_t>(field + " dimension count");
    if (n_dims > gguf::kMaxDims)
      in.fail(dims_at, field, fmt::format("{} dimensions (at most {})", n_dims, gguf::kMaxDims));
    // The product of the dimensions, zeros counted as 1, must fit: then every partial product
    // (elements(), rows()) does too, even when a zero dimension makes the tensor empty.
    int64_t extent = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t ne_at = in.position();
      const int64_t ne = in.read<int64_t>(fmt::format("{} dimension {}", field, d));
      if (ne < 0) in.fail(ne_at, field, fmt::format("dimension {} is negative ({})", d, ne));
      if (ne != 0 && extent > std::numeric_limits<int64_t>::max() / ne)
        in.fail(ne_at, field,
                fmt::format("dimension {} ({}) makes the element count overflow 64 bits", d, ne));
      extent *= std::max<int64_t>(ne, 1);
      t.shape.push_back(ne);
    }
    const size_t type_at = in.position();
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
void place_tensors(const ByteCursor& in, size_t data_offset, size_t alignment,
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
  ByteCursor in = ByteCursor::whole_file(bytes, size, name);
  GgufParsed out;
  uint64_t n_tensors = 0, n_kv = 0;
  read_header(in, out, n_tensors, n_kv);
  KvLocate alignment_key{gguf::kKeyAlignment};
  out.metadata = decode_kv_pairs(in, n_kv, &alignment_key);
  out.alignment = read_alignment(in, out.metadata, alignment_key.at);
  std::vector<TensorRecord> records;
  read_tensor_infos(in, n_tensors, out.tensors, records);
  const size_t end = in.position();
  out.data_offset = (end + out.alignment - 1) / out.alignment * out.alignment;
  place_tensors(in, out.data_offset, out.alignment, out.tensors, records, bytes);
  return out;
}

}  // namespace jitllm
