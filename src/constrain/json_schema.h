// JSON Schema -> GBNF (gbnf.h): the grammar of the JSON texts a schema accepts, for
// response_format json_schema and tool-call arguments.
//
// Supported: type (one or a list), properties / required / additionalProperties (absent with
// properties listed = no other properties: a generator should not invent keys), enum, const,
// anyOf / oneOf (both as "one of the alternatives"; oneOf's exclusivity is not enforced),
// allOf of object schemas (merged), items / prefixItems / minItems / maxItems, nested objects,
// $ref to "#", "#/$defs/..." and "#/definitions/..." (recursion allowed), strings with
// minLength / maxLength / pattern (a regular expression subset, regex_gbnf.h) / format (date,
// time, date-time, uuid, email), integers with minimum / maximum / exclusive bounds (exact),
// numbers with integral bounds, nullable (OpenAPI). Annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored. Any other
// keyword, and any other value of one of the above, is refused: SchemaError names it and
// where it is, so a server can answer 400 instead of generating what the schema does not hold.
//
// Whitespace between tokens is bounded (at most a newline and 40 spaces or tabs) and numbers
// have at most 16 digits in each part, so a small model cannot loop forever inside them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"

namespace jitllm::constrain {

class SchemaError : public Error {
 public:
  SchemaError(std::string keyword, std::string where, const std::string& message)
      : Error(message), keyword_(std::move(keyword)), where_(std::move(where)) {}
  const std::string& keyword() const { return keyword_; }
  const std::string& where() const { return where_; }  // a JSON pointer into the schema

 private:
  std::string keyword_;
  std::string where_;
};

// The grammar (root rule "root") of JSON texts valid under `schema` (ordered: properties are
// generated in the order the schema lists them). Throws SchemaError.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// The grammar of any JSON object (response_format json_object).
std::string json_object_gbnf();

// Shared pieces for grammars built around JSON (tool calls): the rules `ws`, `json-value`,
// `json-string`, `json-object`, the string formats and what they use, with no root rule.
std::string json_value_rules();

// The rules of `schema` alone, every name starting with `prefix` and its root called
// prefix + "root"; with json_value_rules() beside them, several schemas share one grammar
// (a tool call's alternatives). Throws SchemaError.
std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix);

// s as a GBNF string literal (quotes included).
std::string gbnf_literal(const std::string& s);

}  // namespace jitllm::constrain
