// GBNF, llama.cpp's grammar notation, parsed into a byte-level Grammar (grammar.h):
//   rule ::= alternative | alternative      one rule per line (continued inside parentheses,
//                                            after '|', or on a next line that starts with '|')
//   "literal" with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes; [a-z0-9_] [^"\\] classes;
//   . (any character); name (a rule); ( ... ) groups; postfix * + ? {m} {m,} {m,n}; # comments.
// No Debian package parses GBNF for C++ (llama.cpp's parser lives inside libllama): written here.
#pragma once

#include <string>
#include <string_view>

#include "constrain/grammar.h"

namespace jitllm::constrain {

// Throws jitllm::Error naming the line and column of what is wrong.
Grammar parse_gbnf(std::string_view text, const std::string& root = "root");

// The largest m or n a {m,n} repetition may name (each repetition is written out).
constexpr int kMaxRepetition = 10000;

}  // namespace jitllm::constrain
