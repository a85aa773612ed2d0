// Python methods that chat templates call on values: str (strip, split, startswith, format, ...),
// list (append, pop, ...) and dict (items, get, ...), plus Python's two string formatting
// mini-languages ("%s" % x and "{}".format(x)). Mutating list/dict methods are allowed (jinja2's
// ImmutableSandboxedEnvironment refuses them; llama.cpp's engine allows them, and templates such
// as Kimi-K2's use them on tool-call paths).
#include <cmath>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/text.h"

namespace jitllm::chat {
namespace {

Value method(const std::string& name, NativeFunction fn) { return Value::callable(name, std::move(fn)); }

std::optional<std::string> opt_string(const ArgReader& r, size_t index, const char* name) {
  auto v = r.get(index, name);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw_error("{}: argument must be str or None, not {}", r.what(), v->type_name());
  return v->as_string();
}

int64_t opt_int(const ArgReader& r, size_t index, const char* name, int64_t fallback) {
  auto v = r.get(index, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) throw_error("{}: expected an integer, got {}", r.what(), v->type_name());
  return v->as_int();
}

Value string_list(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::string(p));
  return Value::list(std::move(items));
}

// startswith/endswith accept a str or a tuple of str.
bool affix_match(const Value& arg, const std::string& s, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw_error("startswith/endswith argument must be str or a tuple of str, not {}", a.type_name());
    const std::string& t = a.as_string();
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (arg.is_list()) {
    for (const auto& a : arg.list_ref().items)
      if (one(a)) return true;
    return false;
  }
  return one(arg);
}

template <typename Pred>
bool all_codepoints(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size())
    if (!pred(utf8_next(s, i))) return false;
  return true;
}

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.as_string();
  auto reader = [name](CallArgs& a) { return ArgReader(a, "str." + name + "()"); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip", right = name != "lstrip";
    return method(name, [s, reader, left, right](Interpreter&, CallArgs& a) {
      ArgReader r = reader(a);
      r.check(1, {});
      auto chars = opt_string(r, 0, nullptr);
      return Value::string(py_strip(s, chars ? &*chars : nullptr, left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool rev = name == "rsplit";
    return method(name, [s, reader, rev](Interpreter& in, CallArgs& a) {
      ArgReader r = reader(a);
      r.check(2, {"sep", "maxsplit"});
      auto sep = opt_string(r, 0, "sep");
      if (sep && sep->empty()) throw_error("str.split(): empty separator");
      int64_t maxsplit = opt_int(r, 1, "maxsplit", -1);
      const std::string* sep_ptr = sep ? &*sep : nullptr;
      auto parts = rev ? py_rsplit(s, sep_ptr, maxsplit) : py_split(s, sep_ptr, maxsplit);
      in.charge(int64_t(parts.size()));
      return string_list(parts);
    });
  }
  if (name == "splitlines")
    return method(name, [s](Interpreter&, CallArgs&) { return string_list(py_splitlines(s)); });
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return method(name, [s, reader, prefix](Interpreter&, CallArgs& a) {
      ArgReader r = reader(a);
      r.check(1, {});
      auto arg = r.get(0, nullptr);
      if (!arg) throw_error("{}: missing argument", r.what());
      return Value::boolean(affix_match(*arg, s, prefix));
    });
  }
  using StrFn = std::string (*)(std::string_view);
  StrFn simple = name == "upper" ? py_upper : name == "lower" ? py_lower : name == "title" ? py_title
               : name == "capitalize" ? py_capitalize : nullptr;
  if (simple) return method(name, [s, simple](Interpreter&, CallArgs&) { return Value::string(simple(s)); });
  if (name == "replace") {
    return method(name, [s, reader](Interpreter& in, CallArgs& a) {
      ArgReader r = reader(a);
      r.check(3, {});
      auto from = r.get(0, nullptr), to = r.get(1, nullptr);
      if (!from || !to || !from->is_string() || !to->is_string())
        throw_error("{}: expected two str arguments", r.what());
      std::string out = py_replace(s, from->as_string(), to->as_string(), opt_int(r, 2, nullptr, -1));
      in.check_size(out.size());
      return Value::string(std::move(out));
    });
  }
  if (name == "format")
    return method(name, [s](Interpreter& in, CallArgs& a) { return Value::string(str_format(in, s, a)); });
  if (name == "join") {
    return method(name, [s](Interpreter& in, CallArgs& a) {
      if (a.positional.size() != 1) throw_error("str.join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const auto& v : iterate(a.positional[0])) {
        if (!v.is_string()) throw_error("str.join(): expected str instance, {} found", v.type_name());
        if (!first) out += s;
        first = false;
        out += v.as_string();
        in.check_size(out.size());
      }
      return Value::string(std::move(out));
    });
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    return method(name, [s, name, reader](Interpreter&, CallArgs& a) {
      ArgReader r = reader(a);
      r.check(1, {});
      auto sub = r.get(0, nullptr);
      if (!sub || !sub->is_string()) throw_error("{}: expected a str argument", r.what());
      const std::string& t = sub->as_string();
      if (name == "count") {
        if (t.empty()) return Value::integer(int64_t(utf8_length(s)) + 1);
        int64_t n = 0;
        for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++n;
        return Value::integer(n);
      }
      size_t p = name == "rfind" ? s.rfind(t) : s.find(t);
      if (p == std::string::npos) {
        if (name == "index") throw_error("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(int64_t(utf8_length(std::string_view(s).substr(0, p))));
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    bool prefix = name == "removeprefix";
    return method(name, [s, prefix](Interpreter&, CallArgs& a) {
      if (a.positional.size() != 1 || !a.positional[0].is_string()) throw_error("expected one str argument");
      const std::string& t = a.positional[0].as_string();
      if (!affix_match(a.positional[0], s, prefix)) return Value::string(s);
      return Value::string(prefix ? s.substr(t.size()) : s.substr(0, s.size() - t.size()));
    });
  }
  using CpPred = bool (*)(uint32_t);
  CpPred pred = nullptr;
  if (name == "isdigit") pred = [](uint32_t c) { return c >= '0' && c <= '9'; };
  else if (name == "isspace") pred = is_python_space;
  else if (name == "isalpha") pred = [](uint32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; };
  else if (name == "isalnum") pred = [](uint32_t c) { return ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9'); };
  if (pred) return method(name, [s, pred](Interpreter&, CallArgs&) { return Value::boolean(all_codepoints(s, pred)); });
  if (name == "isupper" || name == "islower") {
    bool upper = name == "isupper";
    return method(name, [s, upper](Interpreter&, CallArgs&) {
      bool cased = false;
      for (char c : s) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          cased = true;
          if (upper != (c >= 'A' && c <= 'Z')) return Value::boolean(false);
        }
      }
      return Value::boolean(cased);
    });
  }
  return Value::undefined();
}

Value list_method(const Value& obj, const std::string& name) {
  auto list = obj;  // shares the list object
  if (name == "append")
    return method(name, [list](Interpreter& in, CallArgs& a) {
      if (a.positional.size() != 1) throw_error("list.append() takes exactly one argument");
      in.charge(1);
      check_no_cycle(in, list, a.positional[0]);
      list.list_ref().items.push_back(a.positional[0]);
      return Value::none();
    });
  if (name == "extend")
    return method(name, [list](Interpreter& in, CallArgs& a) {
      if (a.positional.size() != 1) throw_error("list.extend() takes exactly one argument");
      auto items = iterate(a.positional[0]);
      in.charge(int64_t(items.size()));
      for (const auto& item : items) check_no_cycle(in, list, item);
      auto& dst = list.list_ref().items;
      dst.insert(dst.end(), items.begin(), items.end());
      return Value::none();
    });
  if (name == "pop")
    return method(name, [list](Interpreter&, CallArgs& a) {
      auto& items = list.list_ref().items;
      if (items.empty()) throw_error("pop from empty list");
      int64_t i = a.positional.empty() ? -1 : a.positional[0].as_int();
      if (i < 0) i += int64_t(items.size());
      if (i < 0 || i >= int64_t(items.size())) throw_error("pop index out of range");
      Value v = items[size_t(i)];
      items.erase(items.begin() + i);
      return v;
    });
  if (name == "insert")
    return method(name, [list](Interpreter& in, CallArgs& a) {
      if (a.positional.size() != 2) throw_error("list.insert() takes exactly two arguments");
      auto& items = list.list_ref().items;
      check_no_cycle(in, list, a.positional[1]);
      int64_t n = int64_t(items.size()), i = a.positional[0].as_int();
      if (i < 0) i = std::max<int64_t>(0, i + n);
      items.insert(items.begin() + std::min(i, n), a.positional[1]);
      return Value::none();
    });
  if (name == "index" || name == "count")
    return method(name, [list, name](Interpreter&, CallArgs& a) {
      if (a.positional.size() != 1) throw_error("list.{}() takes exactly one argument", name);
      const auto& items = list.list_ref().items;
      int64_t count = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].equals(a.positional[0])) continue;
        if (name == "index") return Value::integer(int64_t(i));
        ++count;
      }
      if (name == "index") throw_error("{} is not in list", a.positional[0].repr());
      return Value::integer(count);
    });
  if (name == "copy")
    return method(name, [list](Interpreter&, CallArgs&) { return Value::list(list.list_ref().items, list.is_tuple()); });
  return Value::undefined();
}

Value dict_method(const Value& obj, const std::string& name) {
  auto dict = obj;
  if (name == "items" || name == "keys" || name == "values") {
    return method(name, [dict, name](Interpreter& in, CallArgs&) {
      std::vector<Value> out;
      in.charge(int64_t(dict.dict_ref().items.size()));
      for (const auto& [k, v] : dict.dict_ref().items) {
        if (name == "items") out.push_back(Value::list({k, v}, true));
        else out.push_back(name == "keys" ? k : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get")
    return method(name, [dict](Interpreter&, CallArgs& a) {
      if (a.positional.empty() || a.positional.size() > 2) throw_error("dict.get() takes one or two arguments");
      const Value* v = dict.dict_ref().find(a.positional[0]);
      if (v) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    });
  if (name == "pop")
    return method(name, [dict](Interpreter&, CallArgs& a) {
      if (a.positional.empty() || a.positional.size() > 2) throw_error("dict.pop() takes one or two arguments");
      const Value* v = dict.dict_ref().find(a.positional[0]);
      if (v) {
        Value out = *v;
        dict.dict_ref().erase(a.positional[0]);
        return out;
      }
      if (a.positional.size() > 1) return a.positional[1];
      throw_error("KeyError: {}", a.positional[0].repr());
    });
  if (name == "setdefault")
    return method(name, [dict](Interpreter& in, CallArgs& a) {
      if (a.positional.empty() || a.positional.size() > 2) throw_error("dict.setdefault() takes one or two arguments");
      if (const Value* v = dict.dict_ref().find(a.positional[0])) return *v;
      Value def = a.positional.size() > 1 ? a.positional[1] : Value::none();
      check_no_cycle(in, dict, def);
      dict.dict_ref().set(a.positional[0], def);
      return def;
    });
  if (name == "update")
    return method(name, [dict](Interpreter& in, CallArgs& a) {
      for (const auto& src : a.positional) {
        if (!src.is_dict()) throw_error("dict.update() expects a mapping, got {}", src.type_name());
        for (const auto& [k, v] : src.dict_ref().items) {
          check_no_cycle(in, dict, v);
          dict.dict_ref().set(k, v);
        }
      }
      for (const auto& [k, v] : a.keyword) {
        check_no_cycle(in, dict, v);
        dict.dict_ref().set(Value::string(k), v);
      }
      return Value::none();
    });
  if (name == "copy")
    return method(name, [dict](Interpreter&, CallArgs&) {
      Value out = Value::dict();
      out.dict_ref().items = dict.dict_ref().items;
      return out;
    });
  return Value::undefined();
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_list()) return obj.is_tuple() && name != "index" && name != "count" ? Value::undefined() : list_method(obj, name);
  if (obj.is_dict() && obj.dict_ref().flavor == DictFlavor::Dict) return dict_method(obj, name);
  return Value::undefined();
}

// ---- "%s" % args ----

std::string percent_format(Interpreter& in, const std::string& format, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.list_ref().items : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++i >= format.size()) throw_error("incomplete format");
    std::string flags;
    while (i < format.size() && std::string_view("-+ 0#").find(format[i]) != std::string_view::npos) flags += format[i++];
    int width = 0, precision = -1;
    while (i < format.size() && std::isdigit(uint8_t(format[i]))) width = width * 10 + (format[i++] - '0');
    if (i < format.size() && format[i] == '.') {
      precision = 0;
      ++i;
      while (i < format.size() && std::isdigit(uint8_t(format[i]))) precision = precision * 10 + (format[i++] - '0');
    }
    if (i >= format.size()) throw_error("incomplete format");
    char conv = format[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw_error("not enough arguments for format string");
    const Value& v = values[next++];
    std::string piece;
    switch (conv) {
      case 's': piece = v.str(); break;
      case 'r': piece = v.repr(); break;
      case 'd':
      case 'i':
        if (!v.is_number()) throw_error("%{} format: a real number is required, not {}", conv, v.type_name());
        piece = std::to_string(v.is_float() ? int64_t(std::trunc(v.as_double())) : v.as_int());
        if (flags.find('+') != std::string::npos && piece[0] != '-') piece = "+" + piece;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'g': {
        if (!v.is_number()) throw_error("%{} format: a real number is required, not {}", conv, v.type_name());
        char buf[512];
        std::string spec = "%" + flags + "." + std::to_string(precision < 0 ? 6 : std::min(precision, 100)) + conv;
        std::snprintf(buf, sizeof(buf), spec.c_str(), v.as_double());
        piece = buf;
        break;
      }
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_int() && !v.is_bool()) throw_error("%{} format: an integer is required, not {}", conv, v.type_name());
        char buf[64];
        std::string spec = std::string("%ll") + conv;
        std::snprintf(buf, sizeof(buf), spec.c_str(), (long long)v.as_int());
        piece = buf;
        break;
      }
      default: throw_error("unsupported format character '{}'", conv);
    }
    if ((conv == 's' || conv == 'r') && precision >= 0) {
      std::vector<size_t> off = utf8_offsets(piece);
      if (size_t(precision) + 1 < off.size()) piece.resize(off[size_t(precision)]);
    }
    size_t len = utf8_length(piece);
    if (size_t(width) > len) {
      std::string pad(size_t(width) - len, flags.find('0') != std::string::npos && conv != 's' ? '0' : ' ');
      piece = flags.find('-') != std::string::npos ? piece + pad : pad + piece;
    }
    out += piece;
    in.check_size(out.size());
  }
  if (next < values.size() && args.is_tuple()) throw_error("not all arguments converted during string formatting");
  return out;
}

// ---- "{}".format(...) ----

std::string str_format(Interpreter& in, const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') ++i;
      else throw_error("str.format(): single '}}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) throw_error("str.format(): single '{{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conversion;
    if (auto colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (auto bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    Value v;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) throw_error("str.format(): replacement index {} out of range", auto_index);
      v = args.positional[auto_index++];
    } else if (std::isdigit(uint8_t(field[0]))) {
      size_t idx = std::stoul(field);
      if (idx >= args.positional.size()) throw_error("str.format(): replacement index {} out of range", idx);
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, kv] : args.keyword)
        if (k == field) {
          v = kv;
          found = true;
        }
      if (!found) throw_error("str.format(): missing keyword argument '{}'", field);
    }
    std::string piece = conversion == "r" ? v.repr() : v.str();
    if (!spec.empty()) {
      // Width with optional fill/alignment ("<10", ">5", "^7") is what appears in practice.
      char align = '<', fill = ' ';
      size_t k = 0;
      if (spec.size() >= 2 && std::string_view("<>^").find(spec[1]) != std::string_view::npos) {
        fill = spec[0];
        align = spec[1];
        k = 2;
      } else if (std::string_view("<>^").find(spec[0]) != std::string_view::npos) {
        align = spec[0];
        k = 1;
      } else if (v.is_number()) {
        align = '>';
      }
      size_t width = 0;
      while (k < spec.size() && std::isdigit(uint8_t(spec[k]))) width = width * 10 + size_t(spec[k++] - '0');
      if (k != spec.size()) throw_error("str.format(): unsupported format spec '{}'", spec);
      size_t len = utf8_length(piece);
      if (width > len) {
        size_t padn = width - len;
        size_t left = align == '<' ? 0 : align == '>' ? padn : padn / 2;
        piece = std::string(left, fill) + piece + std::string(padn - left, fill);
      }
    }
    out += piece;
    in.check_size(out.size());
  }
  return out;
}

}  // namespace jitllm::chat
