// Syntax tree of a parsed chat template. One struct per family (expressions, statements) with a
// kind tag: the interpreter walks it with a switch, and the parser fills only the fields a kind
// uses (listed next to each kind). Nodes keep their line and column for runtime error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace jitllm::chat {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  Literal,    // literal
  Name,       // name
  List,       // args (items)
  Tuple,      // args (items)
  Dict,       // args (key0, value0, key1, value1, ...)
  Unary,      // name ("-", "+", "not"), args[0]
  Binary,     // name ("+", "-", "*", "/", "//", "%", "**", "~"), args[0], args[1]
  And,        // args[0], args[1]
  Or,         // args[0], args[1]
  Compare,    // args[0] then one operand per ops entry; ops ("==", "in", "not in", ...)
  Condition,  // args: [then, condition, else or null]
  GetAttr,    // args[0], name
  GetItem,    // args[0], args[1]
  Slice,      // args: [object, start, stop, step] (null where omitted)
  Call,       // args[0] is the callee, call_args
  Filter,     // args[0] the subject (null inside a filter block), name, call_args
  Test,       // args[0] the subject, name, call_args, negated ("is not")
};

struct CallArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0, column = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  CallArgExprs call_args;
  bool negated = false;
};

enum class StmtKind {
  Text,         // text
  Output,       // expr
  If,           // branches (condition null for else)
  For,          // targets, expr (iterable), condition (filter, may be null), body, else_body
  Set,          // targets (or target_attr), expr
  SetBlock,     // targets[0], filters (may be empty), body
  Macro,        // name, params, body
  CallBlock,    // params (caller's), expr (the call), body
  FilterBlock,  // filters, body
  With,         // targets + values (params), body
  Generation,   // body, rendered unchanged
  Break,
  Continue,
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 0, column = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  bool tuple_target = false;                        // `for a, b in` / `set a, b =`
  std::pair<std::string, std::string> target_attr;  // `set ns.attr =` (both non-empty)
  std::vector<std::pair<std::string, ExprPtr>> params;  // name, default (may be null)
  std::vector<ExprPtr> filters;  // Filter exprs with a null subject, applied in order
  Body body, else_body;
};

// A parsed template: the top-level statements.
struct TemplateAst {
  Body body;
};

}  // namespace jitllm::chat
