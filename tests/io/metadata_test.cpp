// Metadata / Value: checked conversions (errors name the key and the types), equality, nested
// arrays, and the display JSON.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/metadata.h"

namespace jitllm {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Metadata, IntegerConversionsBetweenWidths) {
  EXPECT_EQ(Value::u8(200).as_i64(), 200);
  EXPECT_EQ(Value::i8(-5).as_i64(), -5);
  EXPECT_EQ(Value::u16(65535).as_u64(), 65535u);
  EXPECT_EQ(Value::i32(-7).as_f64(), -7.0);
  EXPECT_EQ(Value::u64(std::numeric_limits<uint64_t>::max()).as_u64(),
            std::numeric_limits<uint64_t>::max());
  // Not representable: a u64 above INT64_MAX as i64, a negative as u64.
  EXPECT_NE(error_of([] { Value::u64(uint64_t(1) << 63).as_i64(); }).find("9223372036854775808"),
            std::string::npos);
  EXPECT_NE(error_of([] { Value::i32(-1).as_u64(); }).find("non-negative"), std::string::npos);
  EXPECT_TRUE(Value::u8(1).is_integer());
  EXPECT_FALSE(Value::f32(1).is_integer());
  EXPECT_TRUE(Value::f32(1).is_number());
  EXPECT_FALSE(Value::boolean(true).is_number());
  EXPECT_FALSE(Value::string("1").is_number());
}

TEST(Metadata, WrongTypeErrorsSayExpectedAndGot) {
  EXPECT_EQ(error_of([] { Value::string("x").as_i64(); }), "expected an integer, got string");
  EXPECT_EQ(error_of([] { Value::f32(1.5f).as_i64(); }), "expected an integer, got f32");
  EXPECT_EQ(error_of([] { Value::u32(1).as_string(); }), "expected a string, got u32");
  EXPECT_EQ(error_of([] { Value::u32(1).as_bool(); }), "expected a bool, got u32");
  EXPECT_EQ(error_of([] { Value::boolean(true).as_f64(); }), "expected a number, got bool");
  EXPECT_EQ(error_of([] { Value::i64(3).as_array(); }), "expected an array, got i64");
}

TEST(Metadata, GettersNameTheKey) {
  Metadata md;
  md.set("general.architecture", Value::string("llama"));
  md.set("llama.block_count", Value::u32(32));
  md.set("llama.rope.freq_base", Value::f32(500000.0f));
  md.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  EXPECT_EQ(md.architecture(), "llama");
  EXPECT_EQ(md.get_i64("llama.block_count"), 32);
  EXPECT_EQ(md.get_u64("llama.block_count"), 32u);
  EXPECT_EQ(md.get_f64("llama.block_count"), 32.0);
  EXPECT_EQ(md.get_f64("llama.rope.freq_base"), 500000.0);
  EXPECT_TRUE(md.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(md.get_i64_or("llama.expert_count", 0), 0);
  EXPECT_EQ(md.get_string_or("general.name", "unnamed"), "unnamed");
  EXPECT_FALSE(md.get_string_opt("general.name").has_value());
  EXPECT_EQ(md.get_string_opt("general.architecture").value(), "llama");

  EXPECT_EQ(error_of([&] { md.get_i64("llama.context_length"); }),
            "metadata key 'llama.context_length' is missing");
  EXPECT_EQ(error_of([&] { md.get_string("llama.block_count"); }),
            "metadata key 'llama.block_count': expected a string, got u32");
  // A present key of the wrong type is an error even with a fallback.
  EXPECT_EQ(error_of([&] { md.get_i64_or("general.architecture", 1); }),
            "metadata key 'general.architecture': expected an integer, got string");
  EXPECT_EQ(error_of([&] { md.get_bool_or("llama.block_count", false); }),
            "metadata key 'llama.block_count': expected a bool, got u32");
}

TEST(Metadata, ArraysAndVectors) {
  Value tokens = Value::string_array({"<unk>", "<s>", "</s>"});
  EXPECT_EQ(tokens.type(), ValueType::Array);
  EXPECT_EQ(tokens.as_array().element_type, ValueType::String);
  EXPECT_EQ(tokens.as_string_vector(), (std::vector<std::string>{"<unk>", "<s>", "</s>"}));
  EXPECT_EQ(Value::f32_array({0.5f, -1.0f}).as_f32_vector(), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(Value::i32_array({3, -4}).as_i64_vector(), (std::vector<int64_t>{3, -4}));
  // Integer arrays read as floats; floats do not read as integers.
  EXPECT_EQ(Value::i32_array({3}).as_f32_vector(), (std::vector<float>{3.0f}));
  EXPECT_NE(error_of([] { Value::f32_array({1.0f}).as_i64_vector(); }).find("integers"),
            std::string::npos);
  EXPECT_NE(error_of([] { Value::i32_array({1}).as_string_vector(); }).find("array of i32"),
            std::string::npos);
  // Items must have the declared element type.
  EXPECT_NE(error_of([] { Value::array(ValueType::U8, {Value::u8(1), Value::i8(1)}); })
                .find("item 1 is a i8"),
            std::string::npos);
}

TEST(Metadata, NestedArraysCompareDeeply) {
  auto inner = [](std::vector<int32_t> v) { return Value::i32_array(v); };
  Value a = Value::array(ValueType::Array, {inner({1, 2}), inner({3})});
  Value b = Value::array(ValueType::Array, {inner({1, 2}), inner({3})});
  Value c = Value::array(ValueType::Array, {inner({1, 2}), inner({4})});
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  EXPECT_EQ(a.as_array().items[0].as_i64_vector(), (std::vector<int64_t>{1, 2}));
  // Same number, different GGUF type: not equal (a written file must be identical).
  EXPECT_FALSE(Value::u32(1) == Value::i32(1));
  EXPECT_TRUE(Value::f32(0.25f) == Value::f32(0.25f));
}

TEST(Metadata, ToJsonCutsLongArraysWithACount) {
  Metadata md;
  md.set("a.name", Value::string("x"));
  md.set("a.list", Value::i32_array({1, 2, 3, 4, 5}));
  md.set("a.flag", Value::boolean(false));
  md.set("a.bytes", Value::string(std::string("ok\xff", 3)));  // not UTF-8
  const nlohmann::json j = md.to_json(2);
  EXPECT_EQ(j["a.name"], "x");
  EXPECT_EQ(j["a.flag"], false);
  ASSERT_EQ(j["a.list"].size(), 3u);
  EXPECT_EQ(j["a.list"][0], 1);
  EXPECT_EQ(j["a.list"][1], 2);
  EXPECT_NE(j["a.list"][2].get<std::string>().find("5 items"), std::string::npos);
  EXPECT_NO_THROW((void)j.dump());  // invalid UTF-8 was replaced
  EXPECT_EQ(j["a.bytes"], "ok\xEF\xBF\xBD");
  EXPECT_EQ(Value::i32_array({1, 2, 3}).to_json().size(), 3u);
  // f32 values display as the decimal the writer meant, f64 exactly.
  EXPECT_EQ(Value::f32(1e-5f).to_json().dump(), "1e-05");
  EXPECT_EQ(Value::f32(0.1f).to_json().dump(), "0.1");
  EXPECT_EQ(Value::f64(0.1).to_json().dump(), "0.1");
  EXPECT_EQ(Value::u64(uint64_t(1) << 63).to_json().dump(), "9223372036854775808");
  EXPECT_EQ(Value::i8(-3).to_json().dump(), "-3");
}

}  // namespace
}  // namespace jitllm
