// Recursive-descent parser of the Jinja subset (see parser.h). The function names follow
// jinja2's parser (parse_condexpr, parse_or, ... parse_unary, parse_postfix, parse_filter_expr)
// so that precedence questions can be checked against it line by line.
#include "chat/parser.h"

#include <charconv>
#include <set>

#include "core/error.h"

namespace jitllm::chat {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseOptions& options)
      : tokens_(std::move(tokens)), options_(options) {}

  TemplateAst run() {
    TemplateAst ast;
    std::string stopped_at;
    ast.body = parse_body({}, stopped_at);
    return ast;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().value == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().value == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Text: return "template text";
      case TokenType::VariableBegin: return "'{{'";
      case TokenType::VariableEnd: return "'}}'";
      case TokenType::BlockBegin: return "'{%'";
      case TokenType::BlockEnd: return "'%}'";
      case TokenType::Name: return "'" + t.value + "'";
      case TokenType::String: return "string literal";
      case TokenType::Integer:
      case TokenType::Float: return "number " + t.value;
      case TokenType::Operator: return "'" + t.value + "'";
      case TokenType::End: return "end of template";
    }
    return "token";
  }

  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    throw_error("template:{}:{}: {}", t.line, t.column, message);
  }
  [[noreturn]] void fail_expected(const std::string& what) const {
    fail(cur(), fmt::format("expected {}, got {}", what, describe(cur())));
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail_expected(fmt::format("'{}'", op));
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail_expected("a name");
    std::string name = cur().value;
    advance();
    return name;
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) fail_expected("'%}'");
    advance();
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.options_.max_depth)
        p.fail(p.cur(), fmt::format("template nested deeper than {} levels", p.options_.max_depth));
    }
    ~DepthGuard() { --p.depth_; }
  };

  // A left-deep chain (a + b + c ..., x.a.b.c ..., x|f|g ...) nests the tree one level per link.
  void chain_link(int& links) {
    if (++links + depth_ > options_.max_depth)
      fail(cur(), fmt::format("expression nested deeper than {} levels", options_.max_depth));
  }

  ExprPtr make(ExprKind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  StmtPtr make_stmt(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  // ---- statements ----

  // Parses until `{% <one of end_tags>` (left unconsumed after the tag name, in stopped_at) or
  // the end of the template (only allowed when end_tags is empty).
  Body parse_body(const std::set<std::string>& end_tags, std::string& stopped_at) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case TokenType::End:
          if (!end_tags.empty()) {
            std::string expected;
            for (const auto& tag : end_tags) expected += (expected.empty() ? "'" : " or '") + tag + "'";
            fail(t, fmt::format("unexpected end of template, expected {}", expected));
          }
          return body;
        case TokenType::Text: {
          auto s = make_stmt(StmtKind::Text, t);
          s->text = t.value;
          body.push_back(std::move(s));
          advance();
          break;
        }
        case TokenType::VariableBegin: {
          auto s = make_stmt(StmtKind::Output, t);
          advance();
          s->expr = parse_tuple(false, true);
          if (cur().type != TokenType::VariableEnd) fail_expected("'}}'");
          advance();
          body.push_back(std::move(s));
          break;
        }
        case TokenType::BlockBegin: {
          const Token& tag = peek();
          if (tag.type != TokenType::Name) fail(tag, "expected a tag name after '{%'");
          if (end_tags.count(tag.value)) {
            advance();
            advance();
            stopped_at = tag.value;
            return body;
          }
          advance();
          body.push_back(parse_statement());
          break;
        }
        default: fail(t, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  StmtPtr parse_statement() {
    const Token& tag = cur();
    std::string name = tag.value;
    advance();
    if (name == "if") return parse_if(tag);
    if (name == "for") return parse_for(tag);
    if (name == "set") return parse_set(tag);
    if (name == "macro") return parse_macro(tag);
    if (name == "call") return parse_call_block(tag);
    if (name == "filter") return parse_filter_block(tag);
    if (name == "with") return parse_with(tag);
    if (name == "generation") {
      auto s = make_stmt(StmtKind::Generation, tag);
      expect_block_end();
      s->body = parse_until(tag, {"endgeneration"});
      return s;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(tag, fmt::format("'{}' outside of a for loop", name));
      auto s = make_stmt(name == "break" ? StmtKind::Break : StmtKind::Continue, tag);
      expect_block_end();
      return s;
    }
    fail(tag, fmt::format("unknown tag '{}'", name));
  }

  // Body up to one of `end_tags` followed by '%}'.
  Body parse_until(const Token& opener, const std::set<std::string>& end_tags) {
    std::string stopped;
    Body body = parse_body(end_tags, stopped);
    expect_block_end();
    return body;
  }

  StmtPtr parse_if(const Token& tag) {
    auto s = make_stmt(StmtKind::If, tag);
    ExprPtr cond = parse_tuple(false, true);
    expect_block_end();
    while (true) {
      std::string stopped;
      Body body = parse_body({"elif", "else", "endif"}, stopped);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (stopped == "elif") {
        cond = parse_tuple(false, true);
        expect_block_end();
      } else if (stopped == "else") {
        expect_block_end();
        s->branches.emplace_back(nullptr, parse_until(tag, {"endif"}));
        break;
      } else {
        expect_block_end();
        break;
      }
    }
    return s;
  }

  // Assignment targets: `a`, `a, b`, `(a, b)`.
  void parse_targets(Stmt& s) {
    bool paren = skip_op("(");
    s.targets.push_back(expect_name());
    while (skip_op(",")) {
      s.tuple_target = true;
      if (cur().type != TokenType::Name) break;
      s.targets.push_back(expect_name());
    }
    if (paren) {
      s.tuple_target = true;
      expect_op(")");
    }
  }

  StmtPtr parse_for(const Token& tag) {
    auto s = make_stmt(StmtKind::For, tag);
    parse_targets(*s);
    if (!skip_name("in")) fail_expected("'in'");
    s->expr = parse_tuple(false, false);
    if (skip_name("if")) s->condition = parse_expression(true);
    if (skip_name("recursive")) fail(tag, "recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    std::string stopped;
    s->body = parse_body({"else", "endfor"}, stopped);
    --loop_depth_;
    expect_block_end();
    if (stopped == "else") s->else_body = parse_until(tag, {"endfor"});
    return s;
  }

  StmtPtr parse_set(const Token& tag) {
    auto s = make_stmt(StmtKind::Set, tag);
    if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().value == ".") {
      s->target_attr.first = expect_name();
      advance();
      s->target_attr.second = expect_name();
    } else {
      parse_targets(*s);
    }
    if (skip_op("=")) {
      s->expr = parse_tuple(false, true);
      expect_block_end();
      return s;
    }
    if (s->tuple_target || !s->target_attr.first.empty()) fail_expected("'='");
    s->kind = StmtKind::SetBlock;
    while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    s->body = parse_until(tag, {"endset"});
    return s;
  }

  // `(a, b=default, ...)` of a macro or call block.
  void parse_params(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression(true);
      s.params.emplace_back(std::move(name), std::move(def));
    }
    expect_op(")");
  }

  StmtPtr parse_macro(const Token& tag) {
    auto s = make_stmt(StmtKind::Macro, tag);
    s->name = expect_name();
    parse_params(*s);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_until(tag, {"endmacro"});
    loop_depth_ = saved;
    return s;
  }

  StmtPtr parse_call_block(const Token& tag) {
    auto s = make_stmt(StmtKind::CallBlock, tag);
    if (is_op("(")) parse_params(*s);
    const Token& at = cur();
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) fail(at, "expected a macro call after 'call'");
    expect_block_end();
    s->body = parse_until(tag, {"endcall"});
    return s;
  }

  StmtPtr parse_filter_block(const Token& tag) {
    auto s = make_stmt(StmtKind::FilterBlock, tag);
    s->filters.push_back(parse_filter(nullptr));
    while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    s->body = parse_until(tag, {"endfilter"});
    return s;
  }

  StmtPtr parse_with(const Token& tag) {
    auto s = make_stmt(StmtKind::With, tag);
    while (cur().type != TokenType::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->params.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end();
    s->body = parse_until(tag, {"endwith"});
    return s;
  }

  // ---- expressions ----

  // Comma-separated expressions: a tuple when a comma appears, else the single expression.
  ExprPtr parse_tuple(bool allow_empty, bool with_condexpr, bool explicit_parens = false) {
    const Token& at = cur();
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        saw_comma = true;
      }
      if (tuple_ends()) {
        if (items.empty() && !explicit_parens) fail_expected("an expression");
        break;
      }
      items.push_back(parse_expression(with_condexpr));
    }
    if (!saw_comma && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens && !allow_empty) fail_expected("an expression");
    auto e = make(ExprKind::Tuple, at);
    e->args = std::move(items);
    return e;
  }

  bool tuple_ends() const {
    const Token& t = cur();
    if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || t.type == TokenType::End) return true;
    if (t.type == TokenType::Operator && (t.value == ")" || t.value == "=")) return true;
    return t.type == TokenType::Name && t.value == "recursive";
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    const Token& at = cur();
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr cond = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_condexpr();
      auto e = make(ExprKind::Condition, at);
      e->args.push_back(std::move(expr1));
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(otherwise));
      expr1 = std::move(e);
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, const Token& at, ExprPtr left, ExprPtr right, std::string op = {}) {
    auto e = make(kind, at);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    int links = 0;
    while (is_name("or")) {
      chain_link(links);
      const Token& at = cur();
      advance();
      left = binary(ExprKind::Or, at, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    int links = 0;
    while (is_name("and")) {
      chain_link(links);
      const Token& at = cur();
      advance();
      left = binary(ExprKind::And, at, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token& at = cur();
      advance();
      auto e = make(ExprKind::Unary, at);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    ExprPtr node;
    int links = 0;
    while (true) {
      chain_link(links);
      std::string op;
      if (cur().type == TokenType::Operator &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = cur().value;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().value == "in") {
        op = "not in";
        advance();
        advance();
      } else {
        break;
      }
      if (!node) {
        node = make(ExprKind::Compare, at);
        node->args.push_back(std::move(first));
      }
      node->ops.push_back(op);
      node->args.push_back(parse_math1());
    }
    return node ? std::move(node) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    int links = 0;
    while (is_op("+") || is_op("-")) {
      chain_link(links);
      const Token& at = cur();
      std::string op = at.value;
      advance();
      left = binary(ExprKind::Binary, at, std::move(left), parse_concat(), op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    int links = 0;
    while (is_op("~")) {
      chain_link(links);
      const Token& at = cur();
      advance();
      left = binary(ExprKind::Binary, at, std::move(left), parse_math2(), "~");
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    int links = 0;
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain_link(links);
      const Token& at = cur();
      std::string op = at.value;
      advance();
      left = binary(ExprKind::Binary, at, std::move(left), parse_pow(), op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    int links = 0;
    while (is_op("**")) {
      chain_link(links);
      const Token& at = cur();
      advance();
      left = binary(ExprKind::Binary, at, std::move(left), parse_unary(true), "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const Token& at = cur();
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      std::string op = at.value;
      advance();
      node = make(ExprKind::Unary, at);
      node->name = op;
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr literal(const Token& at, Value v) {
    auto e = make(ExprKind::Literal, at);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::Name: {
        advance();
        if (t.value == "true" || t.value == "True") return literal(t, Value::boolean(true));
        if (t.value == "false" || t.value == "False") return literal(t, Value::boolean(false));
        if (t.value == "none" || t.value == "None") return literal(t, Value::none());
        auto e = make(ExprKind::Name, t);
        e->name = t.value;
        return e;
      }
      case TokenType::String: {
        std::string s;
        while (cur().type == TokenType::String) {  // adjacent literals concatenate
          s += cur().value;
          advance();
        }
        return literal(t, Value::string(std::move(s)));
      }
      case TokenType::Integer: {
        advance();
        int64_t v = 0;
        auto [ptr, ec] = std::from_chars(t.value.data(), t.value.data() + t.value.size(), v);
        if (ec != std::errc()) fail(t, fmt::format("integer literal {} is out of range", t.value));
        return literal(t, Value::integer(v));
      }
      case TokenType::Float: {
        advance();
        return literal(t, Value::number(std::strtod(t.value.c_str(), nullptr)));
      }
      case TokenType::Operator:
        if (t.value == "(") {
          advance();
          ExprPtr e = parse_tuple(true, true, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") {
          advance();
          auto e = make(ExprKind::List, t);
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          advance();
          return e;
        }
        if (t.value == "{") {
          advance();
          auto e = make(ExprKind::Dict, t);
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          advance();
          return e;
        }
        break;
      default: break;
    }
    fail_expected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    int links = 0;
    while (true) {
      chain_link(links);
      const Token& at = cur();
      if (is_op(".")) {
        advance();
        if (cur().type == TokenType::Name) {
          auto e = make(ExprKind::GetAttr, at);
          e->name = cur().value;
          advance();
          e->args.push_back(std::move(node));
          node = std::move(e);
        } else if (cur().type == TokenType::Integer) {
          auto e = make(ExprKind::GetItem, at);
          e->args.push_back(std::move(node));
          e->args.push_back(parse_primary());
          node = std::move(e);
        } else {
          fail_expected("an attribute name after '.'");
        }
      } else if (is_op("[")) {
        advance();
        node = parse_subscript(at, std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(const Token& at, ExprPtr object) {
    std::vector<ExprPtr> slice(3);
    bool is_slice = false;
    if (!is_op(":")) slice[0] = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) slice[1] = parse_expression(true);
      if (skip_op(":") && !is_op("]")) slice[2] = parse_expression(true);
    }
    if (!is_slice && is_op(",")) {  // x[a, b] indexes with a tuple
      auto tuple = make(ExprKind::Tuple, at);
      tuple->args.push_back(std::move(slice[0]));
      while (skip_op(",") && !is_op("]")) tuple->args.push_back(parse_expression(true));
      slice[0] = std::move(tuple);
    }
    expect_op("]");
    auto e = make(is_slice ? ExprKind::Slice : ExprKind::GetItem, at);
    e->args.push_back(std::move(object));
    if (is_slice) {
      for (auto& part : slice) e->args.push_back(std::move(part));
    } else {
      e->args.push_back(std::move(slice[0]));
    }
    return e;
  }

  void parse_call_args(CallArgExprs& args) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (skip_op("**")) {
        args.star_kwargs = parse_expression(true);
      } else if (skip_op("*")) {
        args.star_args = parse_expression(true);
      } else if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().value == "=") {
        std::string key = cur().value;
        advance();
        advance();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!args.keyword.empty()) fail(cur(), "positional argument follows keyword argument");
        args.positional.push_back(parse_expression(true));
      }
    }
    advance();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(ExprKind::Call, cur());
    e->args.push_back(std::move(callee));
    parse_call_args(e->call_args);
    return e;
  }

  // Filter name (dotted names allowed) and optional arguments; `subject` may be null (blocks).
  ExprPtr parse_filter(ExprPtr subject) {
    auto e = make(ExprKind::Filter, cur());
    e->name = expect_name();
    while (is_op(".") && peek().type == TokenType::Name) {
      advance();
      e->name += "." + expect_name();
    }
    e->args.push_back(std::move(subject));
    if (is_op("(")) parse_call_args(e->call_args);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    int links = 0;
    while (true) {
      chain_link(links);
      if (skip_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        advance();
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr subject) {
    auto e = make(ExprKind::Test, cur());
    e->negated = skip_name("not");
    e->name = expect_name();
    while (is_op(".") && peek().type == TokenType::Name) {
      advance();
      e->name += "." + expect_name();
    }
    e->args.push_back(std::move(subject));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(e->call_args);
    } else if ((t.type == TokenType::Name && t.value != "else" && t.value != "or" && t.value != "and") ||
               t.type == TokenType::String || t.type == TokenType::Integer || t.type == TokenType::Float ||
               is_op("[") || is_op("{")) {
      // `x is divisibleby 3`: one argument without parentheses.
      e->call_args.positional.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  std::vector<Token> tokens_;
  ParseOptions options_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

TemplateAst parse_template(const std::string& source, const ParseOptions& options) {
  return Parser(tokenize(source, options.lexer), options).run();
}

}  // namespace jitllm::chat
