// Global functions every template sees: range (sized before it is built, so range(10**9) hits
// the step limit instead of allocating), namespace() (the only object `set ns.x = ...` may
// write to) and dict(). raise_exception and strftime_now belong to the chat facade, which knows
// the clock and how errors should read.
#include "chat/builtins.h"
#include "chat/interpreter.h"

namespace jitllm::chat {
namespace {

Value range_fn(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) throw_error("range() takes no keyword arguments");
  std::vector<int64_t> a;
  for (const auto& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) throw_error("range(): '{}' object cannot be interpreted as an integer", v.type_name());
    a.push_back(v.as_int());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (a.size() == 1) stop = a[0];
  else if (a.size() == 2 || a.size() == 3) {
    start = a[0];
    stop = a[1];
    if (a.size() == 3) step = a[2];
  } else {
    throw_error("range expected 1 to 3 arguments, got {}", a.size());
  }
  if (step == 0) throw_error("range() arg 3 must not be zero");
  // Item count computed in 128 bits so extreme bounds cannot overflow.
  __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
  __int128 abs_step = step > 0 ? __int128(step) : -__int128(step);
  __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  in.charge(count > (__int128(1) << 62) ? (int64_t(1) << 62) : int64_t(count));
  std::vector<Value> items;
  items.reserve(size_t(count));
  for (int64_t i = 0; i < int64_t(count); ++i) items.push_back(Value::integer(start + i * step));
  return Value::list(std::move(items));
}

Value fill_dict(Value d, CallArgs& args, const char* what) {
  if (args.positional.size() > 1) throw_error("{}() takes at most one positional argument", what);
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict_ref().items) d.dict_ref().set(k, v);
    } else {
      for (const auto& pair : iterate(src)) {
        if (!pair.is_list() || pair.list_ref().items.size() != 2)
          throw_error("{}(): sequence elements must be key/value pairs", what);
        d.dict_ref().set(pair.list_ref().items[0], pair.list_ref().items[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) d.dict_ref().set(Value::string(k), v);
  return d;
}

}  // namespace

void add_builtin_globals(std::map<std::string, Value>& globals) {
  globals["range"] = Value::callable("range", range_fn);
  globals["namespace"] = Value::callable("namespace", [](Interpreter&, CallArgs& args) {
    return fill_dict(Value::dict(DictFlavor::Namespace), args, "namespace");
  });
  globals["dict"] = Value::callable("dict", [](Interpreter&, CallArgs& args) {
    return fill_dict(Value::dict(), args, "dict");
  });
}

}  // namespace jitllm::chat
