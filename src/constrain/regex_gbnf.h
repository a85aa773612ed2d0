// A regular expression (JSON Schema's `pattern`, ECMA-262 syntax) as a GBNF expression over
// the characters of a JSON string's body, escapes included: a '"' the pattern allows is
// generated as \", a backslash as \\, a newline or tab as \n / \t (other control characters
// are left out). Supported: literals, escapes (\d \w \s \D \W \S, \n \t \r, \xHH, \uHHHH,
// escaped punctuation), classes with ranges and negation, '.', groups (capturing and (?:...)),
// alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms match the same strings), and '^' /
// '$' at the ends. An unanchored end matches any characters there, as JSON Schema's search
// semantics say. Anything else (backreferences, lookaround, anchors inside) throws SchemaError
// with keyword "pattern".
#pragma once

#include <string>

namespace jitllm::constrain {

// `json_char` is the rule name of one JSON string character (for the unanchored ends).
std::string regex_to_gbnf(const std::string& pattern, const std::string& where,
                          const std::string& json_char);

}  // namespace jitllm::constrain
