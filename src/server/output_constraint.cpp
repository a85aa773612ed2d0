// Output constraints of a request (see output_constraint.h).
#include "server/output_constraint.h"

#include <fmt/format.h>

#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "server/api_error.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

const json* present(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// The ordered twin of body[path...], or a sorted-key copy when there is none.
ojson ordered_at(const json& body, const ojson* ordered, std::initializer_list<const char*> path) {
  if (ordered) {
    const ojson* at = ordered;
    for (const char* key : path) at = &(*at)[key];
    return *at;
  }
  const json* at = &body;
  for (const char* key : path) at = &(*at)[key];
  return ojson::parse(at->dump());
}

}  // namespace

bool needs_ordered_body(const json& body) {
  return body.is_object() &&
         (body.contains("response_format") || body.contains("json_schema") || body.contains("tools"));
}

std::string schema_gbnf_or_400(const ojson& schema, const std::string& param) {
  try {
    return constrain::json_schema_to_gbnf(schema);
  } catch (const constrain::SchemaError& e) {
    throw invalid_request(param, fmt::format("'{}': {}", param, e.what()));
  }
}

std::shared_ptr<const constrain::Grammar> grammar_or_400(const std::string& gbnf,
                                                         const std::string& param,
                                                         const std::string& root) {
  try {
    return std::make_shared<const constrain::Grammar>(constrain::parse_gbnf(gbnf, root));
  } catch (const Error& e) {
    throw invalid_request(param, fmt::format("'{}': {}", param, e.what()));
  }
}

namespace {

// A JSON shape's GBNF, kept for the caller (json_gbnf), and its grammar.
std::shared_ptr<const constrain::Grammar> json_shape(const std::string& gbnf, const std::string& param,
                                                    std::string* json_gbnf) {
  if (json_gbnf) *json_gbnf = gbnf;
  return grammar_or_400(gbnf, param);
}

}  // namespace

std::shared_ptr<const constrain::Grammar> parse_output_constraint(const json& body,
                                                                  const ojson* ordered,
                                                                  std::string* json_gbnf) {
  const json* grammar = present(body, "grammar");
  const json* schema = present(body, "json_schema");
  const json* format = present(body, "response_format");
  std::string type = "text";
  if (format) {
    if (!format->is_object())
      throw invalid_request("response_format", "'response_format' must be an object");
    const json* t = present(*format, "type");
    if (!t || !t->is_string())
      throw invalid_request("response_format.type", "'response_format.type' is required");
    type = t->get<std::string>();
    if (type != "text" && type != "json_object" && type != "json_schema")
      throw invalid_request("response_format.type",
                            fmt::format("'response_format.type' must be text, json_object or "
                                        "json_schema, got '{}'", type));
  }
  const int given = (grammar != nullptr) + (schema != nullptr) + (type != "text");
  if (given > 1)
    throw invalid_request(grammar ? "grammar" : "json_schema",
                          "give at most one of 'grammar', 'json_schema' and 'response_format'");
  if (grammar) {
    if (!grammar->is_string()) throw invalid_request("grammar", "'grammar' must be a GBNF string");
    return grammar_or_400(grammar->get<std::string>(), "grammar");
  }
  if (schema) {
    if (!schema->is_object() && !schema->is_boolean())
      throw invalid_request("json_schema", "'json_schema' must be a JSON Schema (an object)");
    return json_shape(schema_gbnf_or_400(ordered_at(body, ordered, {"json_schema"}), "json_schema"),
                      "json_schema", json_gbnf);
  }
  if (type == "json_object") {
    // llama-server's extension: a schema beside json_object.
    if (present(*format, "schema"))
      return json_shape(schema_gbnf_or_400(ordered_at(body, ordered, {"response_format", "schema"}),
                                           "response_format.schema"),
                        "response_format.schema", json_gbnf);
    return json_shape(constrain::json_object_gbnf(), "response_format", json_gbnf);
  }
  if (type == "json_schema") {
    const json* js = present(*format, "json_schema");
    if (!js || !js->is_object())
      throw invalid_request("response_format.json_schema",
                            "'response_format.json_schema' must be an object with a 'schema'");
    const json* s = present(*js, "schema");
    if (!s || (!s->is_object() && !s->is_boolean()))
      throw invalid_request("response_format.json_schema.schema",
                            "'response_format.json_schema.schema' is required (a JSON Schema)");
    if (const json* strict = present(*js, "strict"); strict && !strict->is_boolean())
      throw invalid_request("response_format.json_schema.strict",
                            "'response_format.json_schema.strict' must be a boolean");
    return json_shape(
        schema_gbnf_or_400(ordered_at(body, ordered, {"response_format", "json_schema", "schema"}),
                           "response_format.json_schema.schema"),
        "response_format.json_schema.schema", json_gbnf);
  }
  return nullptr;
}

}  // namespace jitllm::server
