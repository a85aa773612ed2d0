// Statement execution and expression evaluation over the syntax tree (see interpreter.h). Every
// statement and expression costs one step; every nested evaluation counts toward max_depth, which
// bounds both hostile nesting and macro recursion before the C++ stack could overflow.
#include "chat/interpreter.h"

#include "chat/builtins.h"

namespace jitllm::chat {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

struct Interpreter::DepthGuard {
  Interpreter& in;
  explicit DepthGuard(Interpreter& interp) : in(interp) {
    if (++in.depth_ > in.limits_.max_depth) {
      --in.depth_;
      throw_error("template recursion/nesting limit of {} exceeded", in.limits_.max_depth);
    }
  }
  ~DepthGuard() { --in.depth_; }
};

void Interpreter::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) throw_error("template step limit of {} exceeded", limits_.max_steps);
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    throw_error("template string of {} bytes exceeds the limit of {} bytes", bytes, limits_.max_string_bytes);
}

std::string Interpreter::render(const TemplateAst& ast, const std::map<std::string, Value>& globals) {
  auto builtin_scope = std::make_shared<Scope>();
  std::map<std::string, Value> builtins;
  add_builtin_globals(builtins);
  for (auto& [k, v] : builtins) builtin_scope->vars[k] = v;
  for (auto& [k, v] : globals) builtin_scope->vars[k] = v;
  auto root = std::make_shared<Scope>();
  root->parent = builtin_scope;
  std::string output;
  out_ = &output;
  steps_ = 0;
  depth_ = 0;
  try {
    exec_body(ast.body, root);
  } catch (const TemplateRaised&) {
    throw;
  } catch (const Error& e) {
    throw Error(fmt::format("template line {}: {}", line_, e.what()));
  }
  out_ = nullptr;
  return output;
}

void Interpreter::emit(const std::string& text) {
  check_size(out_->size() + text.size());
  out_->append(text);
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& s : body) {
    Flow f = exec(*s, scope);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string captured;
  std::string* saved = out_;
  out_ = &captured;
  try {
    exec_body(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return captured;
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value subject,
                                 const std::shared_ptr<Scope>& scope) {
  for (const auto& f : filters) {
    CallArgs args = eval_args(f->call_args, scope);
    subject = apply_filter(*this, f->name, subject, args);
  }
  return subject;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  charge(1);
  line_ = s.line;
  DepthGuard guard(*this);
  switch (s.kind) {
    case StmtKind::Text: emit(s.text); break;
    case StmtKind::Output: {
      Value v = eval(*s.expr, scope);
      emit(v.str());
      break;
    }
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches) {
        if (!cond || eval(*cond, scope).truthy()) return exec_body(body, scope);
      }
      break;
    case StmtKind::For: return exec_for(s, scope);
    case StmtKind::Set: exec_set(s, scope); break;
    case StmtKind::SetBlock: {
      Value v = Value::string(capture(s.body, scope));
      scope->vars[s.targets[0]] = apply_filters(s.filters, std::move(v), scope);
      break;
    }
    case StmtKind::Macro: scope->vars[s.name] = make_macro(s, scope); break;
    case StmtKind::CallBlock: {
      // The body becomes `caller`, a macro taking the call block's parameters.
      Value caller = make_macro(s, scope);
      const Expr& call_expr = *s.expr;
      Value callee = eval(*call_expr.args[0], scope);
      CallArgs args = eval_args(call_expr.call_args, scope);
      args.keyword.emplace_back("caller", caller);
      emit(call(callee, args).str());
      break;
    }
    case StmtKind::FilterBlock: {
      Value v = Value::string(capture(s.body, scope));
      emit(apply_filters(s.filters, std::move(v), scope).str());
      break;
    }
    case StmtKind::With: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& [name, expr] : s.params) inner->vars[name] = eval(*expr, scope);
      return exec_body(s.body, inner);
    }
    case StmtKind::Generation: return exec_body(s.body, scope);
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

static void assign_targets(Scope& scope, const Stmt& s, const Value& v) {
  if (!s.tuple_target) {
    scope.vars[s.targets[0]] = v;
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != s.targets.size())
    throw_error("cannot unpack {} values into {} names", items.size(), s.targets.size());
  for (size_t i = 0; i < items.size(); ++i) scope.vars[s.targets[i]] = items[i];
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Value iterable = eval(*s.expr, scope);
  if (!iterable.is_undefined() && !iterable.is_list() && !iterable.is_dict() && !iterable.is_string())
    throw_error("'{}' is not iterable", iterable.type_name());
  std::vector<Value> items = iterate(iterable);
  charge(int64_t(items.size()));
  if (s.condition) {  // `for x in xs if cond`: filtered before loop.index/length are known
    std::vector<Value> kept;
    for (const auto& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      assign_targets(*probe, s, item);
      if (eval(*s.condition, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return s.else_body.empty() ? Flow::Normal : exec_body(s.else_body, scope);
  const int64_t n = int64_t(items.size());
  for (int64_t i = 0; i < n; ++i) {
    auto iter_scope = std::make_shared<Scope>();
    iter_scope->parent = scope;
    assign_targets(*iter_scope, s, items[size_t(i)]);
    charge(1);
    Value loop = Value::dict(DictFlavor::Loop);
    auto& d = loop.dict_ref().items;
    d.reserve(12);
    auto field = [&d](const char* name, Value v) { d.emplace_back(Value::string(name), std::move(v)); };
    field("index", Value::integer(i + 1));
    field("index0", Value::integer(i));
    field("revindex", Value::integer(n - i));
    field("revindex0", Value::integer(n - i - 1));
    field("first", Value::boolean(i == 0));
    field("last", Value::boolean(i == n - 1));
    field("length", Value::integer(n));
    field("depth", Value::integer(1));
    field("depth0", Value::integer(0));
    field("previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("there is no previous item"));
    field("nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined("there is no next item"));
    field("cycle", Value::callable("cycle", [i](Interpreter&, CallArgs& args) {
            if (args.positional.empty()) throw_error("no items for cycling given");
            return args.positional[size_t(i) % args.positional.size()];
          }));
    iter_scope->vars["loop"] = loop;
    Flow f = exec_body(s.body, iter_scope);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Value v = eval(*s.expr, scope);
  if (!s.target_attr.first.empty()) {
    const Value* ns = scope->find(s.target_attr.first);
    if (!ns || !ns->is_dict() || ns->dict_ref().flavor != DictFlavor::Namespace)
      throw_error("cannot assign attribute '{}' on '{}': not a namespace object", s.target_attr.second,
                  s.target_attr.first);
    check_no_cycle(*this, *ns, v);
    ns->dict_ref().set(Value::string(s.target_attr.second), std::move(v));
    return;
  }
  assign_targets(*scope, s, v);
}

Value Interpreter::make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  const Stmt* def = &s;
  std::weak_ptr<Scope> weak_closure = scope;  // a macro stored in its own scope must not keep it alive
  std::string name = s.kind == StmtKind::Macro ? s.name : "caller";
  return Value::callable(
      name,
      [def, weak_closure, name](Interpreter& in, CallArgs& args) -> Value {
        auto closure = weak_closure.lock();
        if (!closure) throw_error("macro '{}' called after its template finished", name);
        auto local = std::make_shared<Scope>();
        local->parent = closure;
        std::vector<Value> varargs;
        for (size_t i = 0; i < args.positional.size(); ++i) {
          if (i < def->params.size()) local->vars[def->params[i].first] = args.positional[i];
          else varargs.push_back(args.positional[i]);
        }
        Value kwargs = Value::dict();
        for (auto& [key, value] : args.keyword) {
          bool is_param = false;
          for (const auto& p : def->params) is_param |= p.first == key;
          if (is_param) {
            local->vars[key] = value;
          } else if (key == "caller") {
            local->vars["caller"] = value;
          } else {
            kwargs.dict_ref().set(Value::string(key), value);
          }
        }
        for (const auto& [pname, def_expr] : def->params) {
          if (local->vars.count(pname)) continue;
          local->vars[pname] = def_expr ? in.eval(*def_expr, local) : Value::undefined("'" + pname + "' is undefined");
        }
        local->vars["varargs"] = Value::list(std::move(varargs), true);
        local->vars["kwargs"] = kwargs;
        return Value::string(in.capture(def->body, local));
      },
      true);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (!callee.is_callable()) throw_error("'{}' is not callable", callee.type_name());
  DepthGuard guard(*this);
  return callee.callable_ref().fn(*this, args);
}

CallArgs Interpreter::eval_args(const CallArgExprs& a, const std::shared_ptr<Scope>& scope) {
  CallArgs args;
  for (const auto& p : a.positional) args.positional.push_back(eval(*p, scope));
  if (a.star_args)
    for (auto& v : iterate(eval(*a.star_args, scope))) args.positional.push_back(v);
  for (const auto& [k, v] : a.keyword) args.keyword.emplace_back(k, eval(*v, scope));
  if (a.star_kwargs) {
    Value d = eval(*a.star_kwargs, scope);
    if (!d.is_dict()) throw_error("argument after ** must be a mapping, not {}", d.type_name());
    for (auto& [k, v] : d.dict_ref().items) args.keyword.emplace_back(k.str(), v);
  }
  return args;
}

Value Interpreter::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value left = eval(*e.args[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], scope);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = left.equals(right);
    else if (op == "!=") ok = !left.equals(right);
    else if (op == "in") ok = contains(right, left);
    else if (op == "not in") ok = !contains(right, left);
    else {
      if (left.is_undefined()) undefined_error(left);
      if (right.is_undefined()) undefined_error(right);
      if (op == "<") ok = python_less(left, right);
      else if (op == ">") ok = python_less(right, left);
      else if (op == "<=") ok = !python_less(right, left);
      else ok = !python_less(left, right);
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  charge(1);
  DepthGuard guard(*this);
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        if (key.is_list() && !key.is_tuple()) throw_error("unhashable type: 'list'");
        if (key.is_dict()) throw_error("unhashable type: 'dict'");
        d.dict_ref().set(std::move(key), eval(*e.args[i + 1], scope));
      }
      return d;
    }
    case ExprKind::Unary: {
      Value v = eval(*e.args[0], scope);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (e.name == "-") return unary_minus(v);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) throw_error("bad operand type for unary +: '{}'", v.type_name());
      return v.is_bool() ? Value::integer(v.as_int()) : v;
    }
    case ExprKind::Binary: {
      Value a = eval(*e.args[0], scope);
      Value b = eval(*e.args[1], scope);
      return binary_op(*this, e.name, a, b);
    }
    case ExprKind::And: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? eval(*e.args[1], scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? a : eval(*e.args[1], scope);
    }
    case ExprKind::Compare: return eval_compare(e, scope);
    case ExprKind::Condition: {
      if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::GetAttr: {
      Value obj = eval(*e.args[0], scope);
      if (obj.is_undefined()) undefined_error(obj);
      return get_attr(obj, e.name);
    }
    case ExprKind::GetItem: {
      Value obj = eval(*e.args[0], scope);
      if (obj.is_undefined()) undefined_error(obj);
      return get_item(obj, eval(*e.args[1], scope));
    }
    case ExprKind::Slice: {
      Value obj = eval(*e.args[0], scope);
      if (obj.is_undefined()) undefined_error(obj);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.args[size_t(i) + 1] ? eval(*e.args[size_t(i) + 1], scope) : Value::none();
      return slice(*this, obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call: {
      Value callee = eval(*e.args[0], scope);
      CallArgs args = eval_args(e.call_args, scope);
      return call(callee, args);
    }
    case ExprKind::Filter: {
      Value subject = eval(*e.args[0], scope);
      CallArgs args = eval_args(e.call_args, scope);
      return apply_filter(*this, e.name, subject, args);
    }
    case ExprKind::Test: {
      if (!has_test(e.name)) throw_error("no test named '{}'", e.name);
      Value subject = eval(*e.args[0], scope);
      CallArgs args = eval_args(e.call_args, scope);
      bool result = apply_test(*this, e.name, subject, args);
      return Value::boolean(e.negated ? !result : result);
    }
  }
  return Value::undefined();
}

}  // namespace jitllm::chat
