// JSON Schema -> grammar: instances the schema accepts match, the ones it refuses do not, and
// unsupported keywords are refused by name.
#include <gtest/gtest.h>

#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"

namespace jitllm::constrain {
namespace {

using ojson = nlohmann::ordered_json;

// Every byte is a token: the matcher then decides on whole texts.
std::shared_ptr<const Vocabulary> byte_vocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  return std::make_shared<Vocabulary>(bytes, std::vector<int32_t>{});
}

struct Case {
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

const std::vector<Case> kCases = {
    {R"({"type": "string"})", {R"("")", R"("a b")", R"("\"\\\n\u00e9")", R"("é")"},
     {R"(a)", R"("a)", "\"\x01\"", R"("\q")"}},
    {R"({"type": "integer"})", {"0", "-7", "1234567890"}, {"01", "1.5", "-", "1e3", "\"1\""}},
    {R"({"type": "number"})", {"0", "-0.5", "3.25e-3", "10E+2"}, {".5", "1.", "+1", "01"}},
    {R"({"type": "boolean"})", {"true", "false"}, {"True", "1"}},
    {R"({"type": "null"})", {"null"}, {"nul", "None"}},
    {R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1"}},
    {R"({"enum": ["red", 1, null, {"a": [true]}]})", {R"("red")", "1", "null", R"({"a":[true]})"},
     {R"("blue")", "2", R"({"a": [true]})"}},
    {R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"}},
    {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"]})",
     {R"({"name": "Ann", "age": 41})", R"({ "name" : "Ann" , "age" : 41 })",
      "{\n  \"name\": \"Ann\",\n  \"age\": 41\n}"},
     {R"({"age": 41, "name": "Ann"})", R"({"name": "Ann"})", R"({"name": "Ann", "age": 41, "x": 1})",
      R"({"name": 1, "age": 41})"}},
    {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
        "c": {"type": "integer"}}, "required": ["b"]})",
     {R"({"b": 1})", R"({"a": 0, "b": 1})", R"({"b": 1, "c": 2})", R"({"a": 0, "b": 1, "c": 2})"},
     {R"({})", R"({"a": 0})", R"({"a": 0, "c": 2})", R"({"b": 1,})", R"({, "b": 1})"}},
    {R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
     {R"({})", R"({"a": 1})"}, {R"({"b": 1})"}},
    {R"({"type": "object", "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "string"}})",
     {R"({})", R"({"a": 1, "x": "y"})", R"({"x": "y", "z": "w"})"}, {R"({"x": 1})"}},
    {R"({"type": "object"})", {R"({})", R"({"any": [1, {"x": null}]})"}, {"[]", "1"}},
    {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
     {"[1, 2]", "[1,2,3]"}, {"[]", "[1]", "[1, 2, 3, 4]", "[1, \"2\"]", "[1, 2,]"}},
    {R"({"type": "array", "items": {"type": "boolean"}})", {"[]", "[true]", "[ true , false ]"},
     {"[true false]", "[,]"}},
    {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": false})",
     {"[]", R"(["a"])", R"(["a", 1])"}, {R"([1])", R"(["a", 1, 2])"}},
    {R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"},
        "minItems": 2})",
     {R"(["a", null])", R"(["a", null, null])"}, {R"(["a"])", R"(["a", 1])"}},
    {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})",
     {"5", R"("ab")"}, {R"("abc")", "true"}},
    {R"({"oneOf": [{"const": 1}, {"const": 2}]})", {"1", "2"}, {"3"}},
    {R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
     {R"({"a": 1, "b": "x"})"}, {R"({"a": 1})", R"({"b": "x"})"}},
    {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("a\"c")", R"("éé")"},
     {R"("a")", R"("abcd")"}},
    {R"({"type": "string", "format": "date"})", {R"("2026-12-03")"},
     {R"("2026-13-01")", R"("26-12-03")"}},
    {R"({"type": "string", "format": "date-time"})",
     {R"("2026-12-03T08:28:24Z")", R"("2026-12-03T08:28:24.123+01:00")"},
     {R"("2026-12-03 08:28:24")", R"("2026-12-03T25:00:00Z")"}},
    {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
     {R"("123e4567e89b12d3a456426614174000")"}},
    {R"({"type": "string", "format": "email"})", {R"("ann.lee@example.org")"},
     {R"("ann.example.org")", R"("ann@")"}},
    {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"},
     {R"("AB-12")", R"("ab-123")", R"("xAB-123")"}},
    {R"({"type": "string", "pattern": "ab+c"})", {R"("abc")", R"("xxabbbcyy")"}, {R"("ac")"}},
    {R"({"type": "string", "pattern": "^(cat|dog)s?$"})", {R"("cat")", R"("dogs")"}, {R"("cow")"}},
    {R"({"type": "string", "pattern": "^[^a]$"})", {R"("b")", R"("\"")", R"("\\")"}, {R"("a")"}},
    {R"({"type": "integer", "minimum": 10, "maximum": 250})", {"10", "99", "100", "250"},
     {"9", "251", "1000", "-10", "010"}},
    {R"({"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 5})", {"-4", "0", "4"},
     {"-5", "5", "-0"}},
    {R"({"type": "integer", "minimum": 7})", {"7", "8", "70", "123456"}, {"6", "0", "-1"}},
    {R"({"type": "integer", "maximum": -3})", {"-3", "-40"}, {"-2", "0", "3"}},
    {R"({"type": "number", "minimum": 0, "maximum": 1})", {"0", "1", "0.5", "0.999"},
     {"1.5", "-0.5", "2", "-1"}},
    {R"({"type": "number", "minimum": -1, "maximum": 2})", {"-1", "-0.5", "0", "1.25", "2"},
     {"-1.5", "2.5", "3"}},
    {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
        "$ref": "#/$defs/node"})",
     {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": null}})"},
     {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"}},
    {R"({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}},
        "required": ["tags", "meta"]})",
     {R"({"tags": ["a", "b"], "meta": {"ok": true}})"}, {R"({"tags": "a", "meta": {"ok": true}})"}},
    {R"({"type": "string", "nullable": true})", {"null", R"("s")"}, {"1"}},
    {R"(true)", {"1", R"({"a": []})", "null"}, {"{"}},
};

TEST(JsonSchema, InstancesMatchExactlyWhenTheSchemaAcceptsThem) {
  auto vocab = byte_vocab();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.schema);
    const std::string gbnf = json_schema_to_gbnf(ojson::parse(c.schema));
    SCOPED_TRACE(gbnf);
    Matcher m(parse_gbnf(gbnf), vocab);
    for (const char* text : c.valid) {
      const Matcher::State s = m.advance_bytes(m.start(), text);
      EXPECT_TRUE(s != Matcher::kDead && m.accepting(s)) << "refused valid " << text;
    }
    for (const char* text : c.invalid) {
      const Matcher::State s = m.advance_bytes(m.start(), text);
      EXPECT_FALSE(s != Matcher::kDead && m.accepting(s)) << "accepted invalid " << text;
    }
  }
}

TEST(JsonSchema, JsonObjectModeIsAnyObject) {
  Matcher m(parse_gbnf(json_object_gbnf()), byte_vocab());
  for (const char* ok : {"{}", R"({"a": {"b": [1, 2.5, "x", null, true]}})"})
    EXPECT_TRUE(m.accepting(m.advance_bytes(m.start(), ok))) << ok;
  for (const char* bad : {"[]", "\"x\"", "{", R"({"a" 1})", "{} {}"}) {
    const auto s = m.advance_bytes(m.start(), bad);
    EXPECT_FALSE(s != Matcher::kDead && m.accepting(s)) << bad;
  }
}

// A pattern's groups nest by recursion in the regex parser: deep ones are refused by keyword, as
// the GBNF parser refuses deep groups, instead of running off the thread's stack.
TEST(JsonSchema, DeeplyNestedPatternGroupsAreRefused) {
  ojson schema = {{"type", "string"}, {"pattern", std::string(50000, '(') + "a" + std::string(50000, ')')}};
  try {
    json_schema_to_gbnf(schema);
    ADD_FAILURE() << "accepted";
  } catch (const SchemaError& e) {
    EXPECT_EQ(e.keyword(), "pattern") << e.what();
    EXPECT_NE(std::string(e.what()).find("nest more than 1024 deep"), std::string::npos) << e.what();
  }
  schema["pattern"] = std::string(200, '(') + "a" + std::string(200, ')');
  EXPECT_NO_THROW(json_schema_to_gbnf(schema));
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedByName) {
  const std::vector<std::pair<const char*, const char*>> refused = {
      {R"({"type": "array", "uniqueItems": true})", "uniqueItems"},
      {R"({"type": "object", "patternProperties": {"^x": {}}})", "patternProperties"},
      {R"({"type": "string", "format": "hostname"})", "format"},
      {R"({"type": "number", "minimum": 0.5})", "minimum"},
      {R"({"$ref": "https://example.org/s.json"})", "$ref"},
      {R"({"$ref": "#/$defs/missing"})", "$ref"},
      {R"({"type": "string", "pattern": "(?=a)b"})", "pattern"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "pattern"},
      {R"({"type": "frobnicate"})", "type"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems"},
      {R"(false)", "false"},
      {R"({"type": "object", "properties": {"a": {"not": {}}}})", "not"},
  };
  for (const auto& [schema, keyword] : refused) {
    try {
      json_schema_to_gbnf(ojson::parse(schema));
      ADD_FAILURE() << "accepted " << schema;
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), keyword) << schema << ": " << e.what();
    }
  }
  try {
    json_schema_to_gbnf(ojson::parse(R"({"properties": {"a": {"properties": {"b": {"not": 1}}}}})"));
  } catch (const SchemaError& e) {
    EXPECT_EQ(e.where(), "#/properties/a/properties/b");
  }
}

TEST(JsonSchema, PropertiesComeInTheSchemasOrder) {
  Matcher m(parse_gbnf(json_schema_to_gbnf(ojson::parse(
                R"({"type": "object", "properties": {"zeta": {"type": "integer"},
                    "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]})"))),
            byte_vocab());
  EXPECT_TRUE(m.accepting(m.advance_bytes(m.start(), R"({"zeta": 1, "alpha": 2})")));
  EXPECT_EQ(m.advance_bytes(m.start(), R"({"alpha")"), Matcher::kDead);
}

}  // namespace
}  // namespace jitllm::constrain
