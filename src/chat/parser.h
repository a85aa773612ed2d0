// Tokens -> syntax tree, with jinja2's operator precedence (or < and < not < comparisons < +,- <
// ~ < *,/,//,% < ** < unary -, + < postfix, filters, tests) and its statement forms. Errors
// name the line and column of the offending token ("template:12:5: expected 'endif'"), and
// nesting deeper than `max_depth` is an error instead of a stack overflow.
#pragma once

#include <string>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace jitllm::chat {

struct ParseOptions {
  LexerOptions lexer;
  int max_depth = 200;  // nested expressions + nested blocks
};

TemplateAst parse_template(const std::string& source, const ParseOptions& options = {});

}  // namespace jitllm::chat
