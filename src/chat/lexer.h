// Template source -> tokens, with Jinja2's whitespace rules applied to the text between tags:
// `{%-`/`-%}` strip all whitespace on that side, trim_blocks drops the first newline after a
// block or comment tag, lstrip_blocks drops the indentation before a block or comment tag that
// starts its line, `{%+`/`+%}` turn those two off for one tag. Newlines are normalised to "\n"
// and one trailing newline of the template is dropped (keep_trailing_newline=False), as jinja2
// does. Errors name the line and column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitllm::chat {

enum class TokenType {
  Text,           // template data between tags (already whitespace-controlled)
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,  // value decoded (Python escapes applied)
  Integer,
  Float,
  Operator,  // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  End,
};

struct Token {
  TokenType type = TokenType::End;
  std::string value;
  int line = 1;
  int column = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws jitllm::Error "template:LINE:COL: ..." for an unterminated tag, string or comment, or
// a character that cannot start a token.
std::vector<Token> tokenize(const std::string& source, const LexerOptions& options = {});

}  // namespace jitllm::chat
