// The GGUF key/value codec used for .jlm metadata: every value type round-trips with its exact
// type, and every truncation or hostile count is an Error naming the section and offset.
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/kv_codec.h"

namespace jitllm {
namespace {

Metadata sample() {
  Metadata m;
  m.set("a.u8", Value::u8(200));
  m.set("a.i8", Value::i8(-100));
  m.set("a.u16", Value::u16(60000));
  m.set("a.i16", Value::i16(-30000));
  m.set("a.u32", Value::u32(4000000000u));
  m.set("a.i32", Value::i32(-2000000000));
  m.set("a.u64", Value::u64(~uint64_t(0)));
  m.set("a.i64", Value::i64(INT64_MIN));
  m.set("a.f32", Value::f32(1e-5f));
  m.set("a.f64", Value::f64(-2.5e300));
  m.set("a.bool", Value::boolean(false));
  m.set("a.str", Value::string(std::string("nul\0inside", 10)));
  m.set("a.strs", Value::string_array({"", "x", "\xe2\x96\x81"}));
  m.set("a.nested", Value::array(ValueType::Array, {Value::i32_array({1, 2}), Value::i32_array({})}));
  return m;
}

TEST(JlmKvCodec, EveryTypeRoundTripsExactly) {
  const Metadata m = sample();
  std::vector<uint8_t> bytes;
  encode_metadata(m, bytes);
  const Metadata back = decode_metadata(bytes.data(), bytes.size(), "test", 0);
  EXPECT_EQ(back, m);
  for (const auto& [key, value] : m.entries()) EXPECT_EQ(back.at(key).type(), value.type()) << key;
}

TEST(JlmKvCodec, EveryTruncationIsAnError) {
  std::vector<uint8_t> bytes;
  encode_metadata(sample(), bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      decode_metadata(bytes.data(), n, "m.jlm: metadata", 4096);
      ADD_FAILURE() << "prefix of " << n << " bytes decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("m.jlm: metadata at offset"), std::string::npos)
          << e.what();
    }
  }
}

TEST(JlmKvCodec, HostileCountsAreRefusedBeforeAllocating) {
  std::vector<uint8_t> bytes;
  put_u64(bytes, 1);
  put_string(bytes, "k");
  put_u32(bytes, uint32_t(ValueType::Array));
  put_u32(bytes, uint32_t(ValueType::U64));
  put_u64(bytes, uint64_t(1) << 61);  // 2^61 elements in a few bytes
  try {
    decode_metadata(bytes.data(), bytes.size(), "x", 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot fit"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> bad_type;
  put_u64(bad_type, 1);
  put_string(bad_type, "k");
  put_u32(bad_type, 99);
  bad_type.resize(bad_type.size() + 8, 0);
  try {
    decode_metadata(bad_type.data(), bad_type.size(), "x", 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown value type 99"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace jitllm
