// Hostile GGUF input: files are assembled byte by byte here (independently of write_gguf) with
// one field corrupted, and real fixtures are truncated at many offsets. Every case must give a
// jitllm::Error naming the file, the offset and the field; none may crash or allocate wildly.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

// Little-endian GGUF bytes, written by hand from the format description.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  size_t put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return at;
  }
  size_t str(const std::string& s) {
    const size_t at = put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return at;
  }
  template <typename T>
  void patch(size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  void pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
  }
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type;
  uint64_t offset;
};

// A small valid file: general.architecture, general.name, then the tensors; data section zeros.
// `at` receives the offsets of interesting fields.
struct Built {
  Bytes bytes;
  size_t n_tensors_at, n_kv_at, name_len_at, first_tensor_at;
  std::vector<size_t> tensor_ndims_at, tensor_type_at, tensor_offset_at;
};

Built build(const std::vector<TensorSpec>& tensors, size_t data_bytes = 4096,
            const std::function<void(Bytes&)>& extra_kv = nullptr, uint64_t n_extra = 0) {
  Built r;
  Bytes& w = r.bytes;
  w.b = {'G', 'G', 'U', 'F'};
  w.put<uint32_t>(3);
  r.n_tensors_at = w.put<uint64_t>(tensors.size());
  r.n_kv_at = w.put<uint64_t>(2 + n_extra);
  w.str("general.architecture");
  w.put<uint32_t>(8);
  w.str("llama");
  w.str("general.name");
  w.put<uint32_t>(8);
  r.name_len_at = w.str("tiny");
  if (extra_kv) extra_kv(w);
  r.first_tensor_at = w.b.size();
  for (const auto& t : tensors) {
    w.str(t.name);
    r.tensor_ndims_at.push_back(w.put<uint32_t>(uint32_t(t.ne.size())));
    for (int64_t ne : t.ne) w.put<int64_t>(ne);
    r.tensor_type_at.push_back(w.put<uint32_t>(t.type));
    r.tensor_offset_at.push_back(w.put<uint64_t>(t.offset));
  }
  w.pad(32);
  w.b.resize(w.b.size() + data_bytes, 0);
  return r;
}

std::vector<TensorSpec> two_f32() {
  // [64, 2] f32 = 512 bytes at 0; [32] f32 = 128 bytes at 512.
  return {{"a.weight", {64, 2}, 0, 0}, {"b.weight", {32}, 0, 512}};
}

std::string parse_error(const std::vector<uint8_t>& b, const std::string& name = "x.gguf") {
  try {
    parse_gguf(b.data(), b.size(), name);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("non-jitllm exception: ") + e.what();
  }
  return "(parsed)";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(GgufHostile, BaselineParses) {
  Built f = build(two_f32());
  GgufParsed p = parse_gguf(f.bytes.b.data(), f.bytes.b.size(), "x.gguf");
  EXPECT_EQ(p.version, 3u);
  EXPECT_EQ(p.metadata.get_string("general.name"), "tiny");
  ASSERT_EQ(p.tensors.size(), 2u);
  EXPECT_EQ(p.tensors[0].bytes, 512u);
  EXPECT_EQ(p.tensors[1].offset, 512u);
  EXPECT_EQ(p.data_offset % 32, 0u);
  EXPECT_EQ(p.tensors[1].data, f.bytes.b.data() + p.data_offset + 512);
}

TEST(GgufHostile, VersionTwoParses) {
  Built f = build(two_f32());
  f.bytes.patch<uint32_t>(4, 2);
  EXPECT_EQ(parse_gguf(f.bytes.b.data(), f.bytes.b.size(), "x.gguf").version, 2u);
}

TEST(GgufHostile, MagicAndVersion) {
  Built f = build(two_f32());
  auto b = f.bytes.b;
  b[0] = 'X';
  EXPECT_HAS(parse_error(b), "x.gguf: offset 0: magic");
  EXPECT_HAS(parse_error({'G', 'G'}), "magic");
  EXPECT_HAS(parse_error({}), "magic");
  b = f.bytes.b;
  std::memcpy(b.data() + 4, "\x01\0\0\0", 4);
  EXPECT_HAS(parse_error(b), "offset 4: version: GGUF version 1");
  std::memcpy(b.data() + 4, "\x04\0\0\0", 4);
  EXPECT_HAS(parse_error(b), "unsupported GGUF version 4");
  std::memcpy(b.data() + 4, "\0\0\0\x03", 4);
  EXPECT_HAS(parse_error(b), "big-endian");
}

TEST(GgufHostile, HugeCounts) {
  Built f = build(two_f32());
  auto b = f.bytes.b;
  std::memcpy(b.data() + f.n_tensors_at, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
  EXPECT_HAS(parse_error(b), "offset 8: tensor count");
  b = f.bytes.b;
  std::memcpy(b.data() + f.n_kv_at, "\0\0\0\0\0\0\0\x10", 8);
  EXPECT_HAS(parse_error(b), "offset 16: metadata key count");
  // A count that fits the file but not its contents fails while reading, naming the key.
  b = f.bytes.b;
  b[f.n_kv_at] = 200;
  EXPECT_HAS(parse_error(b), "metadata key");
}

TEST(GgufHostile, HugeStringLengthDoesNotAllocate) {
  Built f = build(two_f32());
  auto b = f.bytes.b;
  const uint64_t len = uint64_t(1) << 60;
  std::memcpy(b.data() + f.name_len_at, &len, 8);
  const std::string want = "x.gguf: offset " + std::to_string(f.name_len_at) +
                           ": metadata key 1 ('general.name'): string length 1152921504606846976 "
                           "runs past the end of the file (size " +
                           std::to_string(b.size()) + ")";
  EXPECT_EQ(parse_error(b), want);
  // The key's own length: the key is not known yet, so the index names it.
  b = f.bytes.b;
  std::memcpy(b.data() + 24, &len, 8);
  EXPECT_HAS(parse_error(b), "offset 24: metadata key 0: string length 1152921504606846976");
  // A tensor name length.
  b = f.bytes.b;
  std::memcpy(b.data() + f.first_tensor_at, &len, 8);
  EXPECT_HAS(parse_error(b), "tensor 0 name: string length");
}

TEST(GgufHostile, ValueTypesAndArrays) {
  auto with_kv = [](uint32_t type, const std::function<void(Bytes&)>& value) {
    return build(two_f32(), 4096, [&](Bytes& w) {
      w.str("test.key");
      w.put<uint32_t>(type);
      value(w);
    }, 1).bytes.b;
  };
  EXPECT_HAS(parse_error(with_kv(13, [](Bytes&) {})),
             "metadata key 2 ('test.key'): unknown value type 13");
  EXPECT_HAS(parse_error(with_kv(7, [](Bytes& w) { w.put<uint8_t>(2); })), "bool value 2");
  // Array length that cannot fit: 2^40 u32 items.
  EXPECT_HAS(parse_error(with_kv(9, [](Bytes& w) {
               w.put<uint32_t>(4);
               w.put<uint64_t>(uint64_t(1) << 40);
             })),
             "metadata key 2 ('test.key'): array length 1099511627776 of u32 runs past the end");
  // An array that fits the file but exceeds the per-file item budget (2^24): 17M u8 items.
  {
    const uint64_t n = (uint64_t(1) << 24) + 1;
    auto big = with_kv(9, [&](Bytes& w) {
      w.put<uint32_t>(0);
      w.put<uint64_t>(n);
      w.b.resize(w.b.size() + n, 0);
    });
    EXPECT_HAS(parse_error(big), "array length 16777217 takes the file past 16777216 array items");
  }
  // Array of strings: the minimum 8 bytes per item is what bounds the count.
  EXPECT_HAS(parse_error(with_kv(9, [](Bytes& w) {
               w.put<uint32_t>(8);
               w.put<uint64_t>(1000);
             })),
             "array length 1000 of string");
  EXPECT_HAS(parse_error(with_kv(9, [](Bytes& w) {
               w.put<uint32_t>(99);
               w.put<uint64_t>(1);
             })),
             "unknown array element type 99");
  // A string inside an array, with a bad length: the item is named.
  EXPECT_HAS(parse_error(with_kv(9, [](Bytes& w) {
               w.put<uint32_t>(8);
               w.put<uint64_t>(2);
               w.str("ok");
               w.put<uint64_t>(uint64_t(1) << 50);
             })),
             "metadata key 2 ('test.key') item 1: string length");
  // Duplicate key.
  auto dup = build(two_f32(), 4096, [](Bytes& w) {
    w.str("general.name");
    w.put<uint32_t>(8);
    w.str("again");
  }, 1).bytes.b;
  EXPECT_HAS(parse_error(dup), "metadata key 2 ('general.name'): duplicate key");
}

void nested(Bytes& w, int depth) {
  // depth arrays of arrays, innermost an array of one i16.
  if (depth == 0) {
    w.put<uint32_t>(3);
    w.put<uint64_t>(1);
    w.put<int16_t>(-3);
    return;
  }
  w.put<uint32_t>(9);
  w.put<uint64_t>(1);
  nested(w, depth - 1);
}

TEST(GgufHostile, NestedArrayDepthIsBounded) {
  auto file = [](int depth) {
    return build(two_f32(), 4096, [&](Bytes& w) {
      w.str("test.nested");
      w.put<uint32_t>(9);
      nested(w, depth);
    }, 1).bytes.b;
  };
  auto ok = file(3);
  GgufParsed p = parse_gguf(ok.data(), ok.size(), "x.gguf");
  const Value* v = &p.metadata.at("test.nested");
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(v->as_array().element_type, ValueType::Array);
    v = &v->as_array().items.at(0);
  }
  EXPECT_EQ(v->as_i64_vector(), (std::vector<int64_t>{-3}));
  EXPECT_HAS(parse_error(file(50)), "nested deeper than");
  // Million-deep nesting must not overflow the stack.
  std::vector<uint8_t> deep = build(two_f32(), 0, [](Bytes& w) {
    w.str("test.deep");
    w.put<uint32_t>(9);
    for (int i = 0; i < 100000; ++i) {
      w.put<uint32_t>(9);
      w.put<uint64_t>(1);
    }
  }, 1).bytes.b;
  EXPECT_HAS(parse_error(deep), "nested deeper than");
}

TEST(GgufHostile, Alignment) {
  auto with_align = [](uint32_t type, uint64_t value) {
    return build(two_f32(), 4096, [&](Bytes& w) {
      w.str("general.alignment");
      w.put<uint32_t>(type);
      if (type == 8) w.str("32"); else w.put<uint32_t>(uint32_t(value));
    }, 1).bytes.b;
  };
  // The KV starts right after the two built-in keys: 24 + (8+20+4+8+5) + (8+12+4+8+4) = 105.
  EXPECT_HAS(parse_error(with_align(4, 0)),
             "x.gguf: offset 105: metadata key 'general.alignment': alignment 0 is not a power");
  EXPECT_HAS(parse_error(with_align(4, 48)), "alignment 48 is not a power of two");
  EXPECT_HAS(parse_error(with_align(8, 0)), "'general.alignment': expected an integer, got string");
  // Alignment 64: offset 512 is fine; the data section starts on a 64-byte boundary.
  auto b = with_align(4, 64);
  b.resize(b.size() + 64);  // room for the larger padding
  GgufParsed p = parse_gguf(b.data(), b.size(), "x.gguf");
  EXPECT_EQ(p.alignment, 64u);
  EXPECT_EQ(p.data_offset % 64, 0u);
  // With alignment 1024, the tensor at 512 is misaligned.
  auto c = with_align(4, 1024);
  c.resize(c.size() + 2048);
  EXPECT_HAS(parse_error(c), "tensor 1 ('b.weight'): data offset 512 is not a multiple of the alignment 1024");
}

TEST(GgufHostile, TensorDims) {
  EXPECT_HAS(parse_error(build({{"t", {1, 1, 1, 1, 1}, 0, 0}}).bytes.b),
             "tensor 0 ('t'): 5 dimensions (at most 4)");
  EXPECT_HAS(parse_error(build({{"t", {4, -2}, 0, 0}}).bytes.b),
             "tensor 0 ('t'): dimension 1 is negative (-2)");
  EXPECT_HAS(parse_error(build({{"t", {int64_t(1) << 32, int64_t(1) << 32}, 0, 0}}).bytes.b),
             "tensor 0 ('t'): dimension 1 (4294967296) makes the element count overflow");
  // Element count fits in int64 but the byte size does not fit in memory / the file.
  EXPECT_HAS(parse_error(build({{"t", {int64_t(1) << 30, int64_t(1) << 31}, 0, 0}}).bytes.b),
             "runs past the end of the file");
  // An empty tensor (a zero dimension) with huge other dimensions: rows() would overflow.
  EXPECT_HAS(parse_error(build({{"t", {0, int64_t(1) << 40, int64_t(1) << 40}, 0, 0}}).bytes.b),
             "tensor 0 ('t'): dimension 2 (1099511627776) makes the element count overflow");
  // Element count fits in int64, the byte size (2^33 bytes per row x 2^31 rows) does not.
  EXPECT_HAS(parse_error(build({{"t", {int64_t(1) << 31, int64_t(1) << 31}, 0, 0}}).bytes.b),
             "tensor 0 ('t'): byte size overflows 64 bits");
  // A huge n_dims field (not just 5) is refused before reading dims.
  Built f = build(two_f32());
  f.bytes.patch<uint32_t>(f.tensor_ndims_at[0], 0xffffffffu);
  EXPECT_HAS(parse_error(f.bytes.b), "4294967295 dimensions");
}

TEST(GgufHostile, TensorTypes) {
  EXPECT_HAS(parse_error(build({{"blk.0.x", {32}, 4, 0}}).bytes.b),
             "tensor 0 ('blk.0.x'): unknown tensor type id 4");
  EXPECT_HAS(parse_error(build({{"blk.0.x", {32}, 0xdeadbeef, 0}}).bytes.b),
             "unknown tensor type id 3735928559");
  // Q4_0 rows must be whole 32-element blocks.
  EXPECT_HAS(parse_error(build({{"blk.0.y", {33, 2}, 2, 0}}).bytes.b),
             "tensor 0 ('blk.0.y'): a row of 33 elements is not a whole number of q4_0 blocks");
}

TEST(GgufHostile, TensorOffsets) {
  // Misaligned.
  EXPECT_HAS(parse_error(build({{"a", {8}, 0, 0}, {"b", {8}, 0, 40}}).bytes.b),
             "tensor 1 ('b'): data offset 40 is not a multiple of the alignment 32");
  // Overlapping: a is 512 bytes at 0, b starts at 256.
  EXPECT_HAS(parse_error(build({{"a", {128}, 0, 0}, {"b", {8}, 0, 256}}).bytes.b),
             "tensor 1 ('b'): data [256, 288) overlaps tensor 'a' at [0, 512)");
  // Overlap hidden behind an empty tensor in sorted order.
  EXPECT_HAS(parse_error(build({{"a", {128}, 0, 0}, {"e", {0}, 0, 64}, {"b", {8}, 0, 256}}).bytes.b),
             "overlaps tensor 'a'");
  // Same offset twice.
  EXPECT_HAS(parse_error(build({{"a", {8}, 0, 0}, {"b", {8}, 0, 0}}).bytes.b), "overlaps");
  // Past the end, including offsets that overflow when added.
  EXPECT_HAS(parse_error(build({{"a", {8}, 0, 4096}}).bytes.b),
             "tensor 0 ('a'): data [");
  EXPECT_HAS(parse_error(build({{"a", {8}, 0, 4096}}).bytes.b), "runs past the end of the file");
  EXPECT_HAS(parse_error(build({{"a", {8}, 0, ~uint64_t(31)}}).bytes.b),
             "runs past the end of the file");
  // Duplicate names.
  EXPECT_HAS(parse_error(build({{"a", {8}, 0, 0}, {"a", {8}, 0, 32}}).bytes.b),
             "tensor 1 ('a'): duplicate tensor name");
  // Empty tensors may share offsets and sit at the very end.
  Built ok = build({{"e1", {0, 4}, 0, 0}, {"e2", {0}, 0, 0}, {"a", {8}, 0, 0}}, 32);
  EXPECT_EQ(parse_gguf(ok.bytes.b.data(), ok.bytes.b.size(), "x.gguf").tensors.size(), 3u);
}

TEST(GgufHostile, TruncatedRealFixtureAtManyOffsets) {
  const auto bytes = testing::read_bytes(testing::oracle_path("models/synth-llama.Q4_K_M.gguf"));
  const GgufParsed full = parse_gguf(bytes.data(), bytes.size(), "full");
  // Every offset of the first KiB (header, first keys), every 7th through the rest of the
  // metadata and tensor table, then every 997th through the data (prime steps so cuts land at
  // varied positions inside strings, arrays and tensors). Only cuts past the last tensor's end
  // can parse.
  size_t data_end = 0;
  for (const auto& t : full.tensors)
    data_end = std::max(data_end, full.data_offset + size_t(t.offset) + t.bytes);
  size_t checked = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += cut < 1024 ? 1 : cut < full.data_offset ? 7 : 997) {
    try {
      parse_gguf(bytes.data(), cut, "cut.gguf");
      EXPECT_GE(cut, data_end) << "parsed a file cut at " << cut;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.gguf: offset ", 0), 0u) << e.what();
    }
    ++checked;
  }
  EXPECT_GT(checked, 2000u);
}

TEST(GgufHostile, EveryHeaderByteFlippedNeverCrashes) {
  // Flip each header byte of a small built file to 0xff and 0x80: parse or a clean jitllm::Error.
  Built f = build(two_f32(), 1024, [](Bytes& w) {
    w.str("test.arr");
    w.put<uint32_t>(9);
    w.put<uint32_t>(8);
    w.put<uint64_t>(2);
    w.str("p");
    w.str("q");
  }, 1);
  const size_t header = f.tensor_offset_at.back() + 8;
  for (size_t i = 0; i < header; ++i) {
    for (uint8_t v : {uint8_t(0xff), uint8_t(0x80), uint8_t(0x00)}) {
      auto b = f.bytes.b;
      b[i] = v;
      const std::string e = parse_error(b);
      EXPECT_EQ(e.find("non-jitllm"), std::string::npos) << "byte " << i << ": " << e;
    }
  }
}

}  // namespace
}  // namespace jitllm
