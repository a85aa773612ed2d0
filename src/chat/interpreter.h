// Renders a parsed template: statements, expressions, scopes and the limits that make a hostile
// template fail with a jitllm::Error instead of hanging or exhausting memory.
//
// Why an interpreter of our own: chat templates are Jinja2 programs written for Python, Debian
// ships no C++ Jinja implementation (`apt-cache search jinja` lists python3-jinja2 and its
// Python plugins, Emacs/R/Rust packages, nothing for C or C++), and the prompt must be byte-exact
// against what transformers renders, so the semantics here copy jinja2's (default Undefined,
// ImmutableSandboxedEnvironment, trim_blocks + lstrip_blocks, loopcontrols) rather than another
// engine's approximation of them.
//
// Deliberate differences from jinja2 (all more lenient, as llama.cpp's engine is): list/dict
// mutators (append, pop, update) work instead of raising SecurityError; map()/select() return
// lists, not generators (so `|map(...)|tojson` works); the from_json filter exists; integers
// are 64-bit (overflow is an error); `recursive` loops, include/import/extends are refused with a
// syntax error.
//
// Scoping follows jinja2: `if` opens no scope; every for-loop iteration and every macro call
// gets a fresh scope whose parent is the enclosing one, so `set` inside a loop is invisible after
// it (templates use namespace() for that) and a value set in one iteration is gone in the next.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "chat/ast.h"
#include "chat/value.h"
#include "core/error.h"

namespace jitllm::chat {

struct RenderLimits {
  int64_t max_steps = 5'000'000;            // statements + expressions + items built
  int max_depth = 500;                      // nested evaluation (expressions, macro calls)
  size_t max_string_bytes = size_t(64) << 20;  // any one string, the output included
};

// The template called raise_exception(message) (jinja2 raises TemplateError(message)).
class TemplateRaised : public Error {
 public:
  explicit TemplateRaised(const std::string& message)
      : Error("template raised an error: " + message), message_(message) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits = {}) : limits_(limits) {}

  // Renders `ast` with `globals` (builtins such as range/namespace are added underneath them).
  // Errors carry the template line: "template line 12: 'x' is undefined".
  std::string render(const TemplateAst& ast, const std::map<std::string, Value>& globals);

  // ---- used by filters, tests and methods ----
  void charge(int64_t steps);             // counts toward max_steps
  void check_size(size_t bytes) const;    // a string about to be built
  Value call(const Value& callee, CallArgs& args);
  int64_t steps_used() const { return steps_; }

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard;

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value subject, const std::shared_ptr<Scope>& scope);

  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope);
  CallArgs eval_args(const CallArgExprs& a, const std::shared_ptr<Scope>& scope);
  void emit(const std::string& text);

  RenderLimits limits_;
  int64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;  // line of the statement/expression being evaluated, for error context
  std::string* out_ = nullptr;
};

}  // namespace jitllm::chat
