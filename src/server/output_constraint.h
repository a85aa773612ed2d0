// What a request says its output must look like, as a grammar (constrain/): `response_format`
// (OpenAI: json_object, json_schema), and llama-server's `json_schema` and `grammar` (GBNF)
// fields. Every refusal is a 400 naming the parameter: a schema keyword we cannot enforce, a
// GBNF syntax error, two constraints at once.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>

#include "constrain/grammar.h"

namespace jitllm::server {

// True when the body holds a field whose key order matters (a JSON Schema's properties are
// generated in the order the client wrote them): parse the body once more as ordered_json.
bool needs_ordered_body(const nlohmann::json& body);

// The grammar the output must match, or null for free text. `ordered`: the same body as
// ordered_json (needs_ordered_body), or null to take the keys in sorted order. `json_gbnf`,
// when given, receives the GBNF of a JSON shape (response_format, json_schema; empty for a
// GBNF `grammar`), which a model's own answer format may wrap (gpt-oss's final channel).
std::shared_ptr<const constrain::Grammar> parse_output_constraint(
    const nlohmann::json& body, const nlohmann::ordered_json* ordered,
    std::string* json_gbnf = nullptr);

// A JSON Schema's grammar, or a 400 naming `param` (shared with tool definitions).
std::string schema_gbnf_or_400(const nlohmann::ordered_json& schema, const std::string& param);
// GBNF text parsed (from the rule `root`), or a 400 naming `param`.
std::shared_ptr<const constrain::Grammar> grammar_or_400(const std::string& gbnf,
                                                         const std::string& param,
                                                         const std::string& root = "root");

}  // namespace jitllm::server
