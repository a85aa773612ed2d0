// jinja2's builtin filters that chat templates use, with jinja2's argument names and defaults
// (`default(value='', boolean=False)`, `indent(width=4, first=False, blank=False)`, ...) and its
// quirks where they show in output: sort/unique/dictsort/min/max compare case-insensitively by
// default, round() rounds half to even and returns a float, title() capitalises after "-", "(",
// "[", "{", "<" and whitespace, tojson is transformers' json.dumps(ensure_ascii=False).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/text.h"

namespace jitllm::chat {
namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, const ArgReader&);

std::string as_text(const Value& v) { return v.str(); }

// Dotted attribute path ("function.name", "0") looked up like jinja2's make_attrgetter.
Value attribute_of(const Value& item, const Value& path) {
  if (!path.is_string()) return get_item(item, path);
  Value cur = item;
  size_t start = 0;
  const std::string& p = path.as_string();
  while (true) {
    size_t dot = p.find('.', start);
    std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_undefined()) return cur;
    cur = numeric ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort/compare key: lower-cased strings unless case_sensitive (jinja2's ignore_case).
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.as_string()));
  return v;
}

bool flag(const ArgReader& r, size_t index, const char* name, bool fallback) {
  auto v = r.get(index, name);
  return v ? v->truthy() : fallback;
}

Value f_abs(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) return v.as_int() < 0 ? unary_minus(v) : Value::integer(v.as_int());
  throw_error("bad operand type for abs(): '{}'", v.type_name());
}

Value f_attr(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(1, {});
  auto name = r.get(0, nullptr);
  if (!name || !name->is_string()) throw_error("attr: expected an attribute name");
  if (v.is_undefined()) undefined_error(v);
  return get_attr(v, name->as_string());
}

Value f_batch(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(2, {"linecount", "fill_with"});
  int64_t n = r.get_or(0, "linecount", Value::integer(0)).as_int();
  if (n <= 0) throw_error("batch: linecount must be positive");
  auto fill = r.get(1, "fill_with");
  std::vector<Value> out, cur;
  for (auto& item : iterate(v)) {
    cur.push_back(item);
    if (int64_t(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (int64_t(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  in.charge(int64_t(out.size()));
  return Value::list(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::string(py_capitalize(as_text(v)));
}

Value f_center(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(1, {"width"});
  int64_t width = r.get_or(0, "width", Value::integer(80)).as_int();
  std::string s = as_text(v);
  int64_t len = int64_t(utf8_length(s));
  if (width <= len) return Value::string(s);
  in.check_size(size_t(width));
  int64_t pad = width - len;
  int64_t left = pad / 2 + (pad & width & 1);  // CPython's str.center
  return Value::string(std::string(size_t(left), ' ') + s + std::string(size_t(pad - left), ' '));
}

Value f_default(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(2, {"default_value", "boolean"});
  Value fallback = r.get_or(0, "default_value", Value::string(""));
  bool boolean = flag(r, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(3, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = flag(r, 0, "case_sensitive", false);
  std::string by = r.get_or(1, "by", Value::string("key")).str();
  bool reverse = flag(r, 2, "reverse", false);
  if (!v.is_dict()) throw_error("dictsort: expected a mapping, got {}", v.type_name());
  if (by != "key" && by != "value") throw_error("dictsort: 'by' must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> items = v.dict_ref().items;
  size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
    const Value& x = pos == 0 ? a.first : a.second;
    const Value& y = pos == 0 ? b.first : b.second;
    return reverse ? python_less(sort_key(y, case_sensitive), sort_key(x, case_sensitive))
                   : python_less(sort_key(x, case_sensitive), sort_key(y, case_sensitive));
  });
  std::vector<Value> out;
  for (auto& [k, val] : items) out.push_back(Value::list({k, val}, true));
  return Value::list(std::move(out));
}

Value f_escape(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  if (v.is_markup()) return v;
  return Value::markup(html_escape(as_text(v)));
}

Value f_first(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  auto items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  auto items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

bool parse_double(const std::string& text, double& out) {
  std::string s = py_strip(text, nullptr, true, true);
  if (s.empty()) return false;
  std::string lower = py_lower(s);
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") return out = INFINITY, true;
  if (lower == "-inf" || lower == "-infinity") return out = -INFINITY, true;
  if (lower == "nan" || lower == "+nan" || lower == "-nan") return out = NAN, true;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && lower.find('x') == std::string::npos;
}

Value f_float(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(1, {"default"});
  Value fallback = r.get_or(0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  double d;
  if (v.is_string() && parse_double(v.as_string(), d)) return Value::number(d);
  return fallback;
}

Value f_int(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(2, {"default", "base"});
  Value fallback = r.get_or(0, "default", Value::integer(0));
  int base = int(r.get_or(1, "base", Value::integer(10)).as_int());
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(int64_t(std::trunc(d)));
  }
  if (!v.is_string()) return fallback;
  std::string s = py_strip(v.as_string(), nullptr, true, true);
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  if (!digits.empty()) {
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(digits.c_str(), &end, base);
    if (errno == 0 && end == digits.c_str() + digits.size()) return Value::integer(i);
  }
  double d;
  if (base == 10 && parse_double(s, d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(int64_t(std::trunc(d)));
  return fallback;
}

Value f_format(Interpreter& in, const Value& v, const ArgReader& r) {
  // "%s-%d"|format(a, b) == "%s-%d" % (a, b)
  std::vector<Value> args;
  for (size_t i = 0; r.get(i, nullptr); ++i) args.push_back(*r.get(i, nullptr));
  return Value::string(percent_format(in, as_text(v), Value::list(std::move(args), true)));
}

Value f_from_json(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  if (!v.is_string()) throw_error("from_json: expected a string, got {}", v.type_name());
  return json_loads(v.as_string());
}

Value f_indent(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(3, {"width", "first", "blank"});
  Value width = r.get_or(0, "width", Value::integer(4));
  std::string pad = width.is_string() ? width.as_string() : std::string(size_t(std::max<int64_t>(0, width.as_int())), ' ');
  bool first = flag(r, 1, "first", false), blank = flag(r, 2, "blank", false);
  std::vector<std::string> lines = py_splitlines(as_text(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
    in.check_size(out.size());
  }
  if (first) out = pad + out;
  return Value::string(std::move(out));
}

Value f_items(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(0, {});
  if (v.is_undefined()) return Value::list();
  if (!v.is_dict()) throw_error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict_ref().items) out.push_back(Value::list({k, val}, true));
  in.charge(int64_t(out.size()));
  return Value::list(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(2, {"d", "attribute"});
  std::string sep = r.get_or(0, "d", Value::string("")).str();
  auto attribute = r.get(1, "attribute");
  std::string out;
  bool first = true;
  for (auto& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += (attribute ? attribute_of(item, *attribute) : item).str();
    in.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_length(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::integer(py_length(v));
}

Value f_list(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::list(iterate(v));
}

Value f_lower(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::string(py_lower(as_text(v)));
}

Value f_upper(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::string(py_upper(as_text(v)));
}

// Remaining positional/keyword arguments after `skip` positionals, for map/select(test, ...).
CallArgs rest_args(const ArgReader& r, size_t skip, const CallArgs& all) {
  CallArgs rest;
  for (size_t i = skip; i < all.positional.size(); ++i) rest.positional.push_back(all.positional[i]);
  rest.keyword = all.keyword;
  return rest;
}

Value f_map(Interpreter& in, const Value& v, const ArgReader& r, const CallArgs& all) {
  if (!v.truthy()) return Value::list();  // jinja2: `if value: for item in value`, so none maps to []
  auto attribute = r.get(size_t(-1), "attribute");
  std::vector<Value> out;
  if (attribute) {
    auto def = r.get(size_t(-1), "default");
    for (auto& item : iterate(v)) {
      Value got = attribute_of(item, *attribute);
      out.push_back(got.is_undefined() && def ? *def : got);
    }
  } else {
    if (all.positional.empty() || !all.positional[0].is_string()) throw_error("map: expected a filter name or attribute=");
    std::string filter = all.positional[0].as_string();
    for (auto& item : iterate(v)) {
      CallArgs rest = rest_args(r, 1, all);
      out.push_back(apply_filter(in, filter, item, rest));
    }
  }
  in.charge(int64_t(out.size()));
  return Value::list(std::move(out));
}

Value select_impl(Interpreter& in, const Value& v, const CallArgs& all, bool by_attribute, bool keep) {
  size_t skip = by_attribute ? 1 : 0;
  if (by_attribute && (all.positional.empty())) throw_error("selectattr/rejectattr: missing attribute name");
  if (!v.truthy()) return Value::list();  // jinja2 iterates only a truthy subject (none selects nothing)
  std::optional<std::string> test;
  if (all.positional.size() > skip) test = all.positional[skip].str();
  std::vector<Value> out;
  for (auto& item : iterate(v)) {
    Value subject = by_attribute ? attribute_of(item, all.positional[0]) : item;
    bool pass;
    if (test) {
      CallArgs targs;
      for (size_t i = skip + 1; i < all.positional.size(); ++i) targs.positional.push_back(all.positional[i]);
      targs.keyword = all.keyword;
      if (!has_test(*test)) throw_error("no test named '{}'", *test);
      pass = apply_test(in, *test, subject, targs);
    } else {
      pass = subject.truthy();
    }
    if (pass == keep) out.push_back(item);
  }
  in.charge(int64_t(out.size()));
  return Value::list(std::move(out));
}

Value f_minmax(const Value& v, const ArgReader& r, bool want_max) {
  r.check(2, {"case_sensitive", "attribute"});
  bool case_sensitive = flag(r, 0, "case_sensitive", false);
  auto attribute = r.get(1, "attribute");
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  auto key = [&](size_t i) { return sort_key(attribute ? attribute_of(items[i], *attribute) : items[i], case_sensitive); };
  for (size_t i = 1; i < items.size(); ++i) {
    bool better = want_max ? python_less(key(best), key(i)) : python_less(key(i), key(best));
    if (better) best = i;
  }
  return items[best];
}

Value f_replace(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(3, {"old", "new", "count"});
  auto from = r.get(0, "old"), to = r.get(1, "new");
  if (!from || !to) throw_error("replace: expected old and new strings");
  auto count = r.get(2, "count");
  std::string out = py_replace(as_text(v), from->str(), to->str(), count && !count->is_none() ? count->as_int() : -1);
  in.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_reverse(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.is_string()) {
    std::string out;
    for (auto& c : items) out += c.as_string();
    return Value::string(std::move(out));
  }
  return Value::list(std::move(items));
}

Value f_round(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(2, {"precision", "method"});
  int64_t precision = r.get_or(0, "precision", Value::integer(0)).as_int();
  std::string method = r.get_or(1, "method", Value::string("common")).str();
  if (!v.is_number()) throw_error("round: expected a number, got {}", v.type_name());
  double d = v.as_double();
  if (precision < 0 || precision > 300) throw_error("round: precision {} out of range", precision);
  if (method == "floor" || method == "ceil") {
    double scale = std::pow(10.0, double(precision));
    double x = method == "floor" ? std::floor(d * scale) : std::ceil(d * scale);
    return Value::number(x / scale);
  }
  if (method != "common") throw_error("round: method must be 'common', 'ceil' or 'floor'");
  if (!std::isfinite(d)) return Value::number(d);
  if (!v.is_float()) return Value::integer(v.as_int());  // Python's round(int, n) stays an int
  // Python's round(x, n): correctly rounded, ties to even, from the exact binary value, which
  // is what printf's %.nf does.
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", int(precision), d);
  return Value::number(std::strtod(buf, nullptr));
}

Value f_safe(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::markup(as_text(v));
}

Value f_sort(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(3, {"reverse", "case_sensitive", "attribute"});
  bool reverse = flag(r, 0, "reverse", false), case_sensitive = flag(r, 1, "case_sensitive", false);
  auto attribute = r.get(2, "attribute");
  auto items = iterate(v);
  in.charge(int64_t(items.size()));
  auto key = [&](const Value& x) { return sort_key(attribute ? attribute_of(x, *attribute) : x, case_sensitive); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? python_less(key(b), key(a)) : python_less(key(a), key(b));
  });
  return Value::list(std::move(items));
}

Value f_string(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  return Value::string(as_text(v));
}

Value f_sum(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(2, {"attribute", "start"});
  auto attribute = r.get(0, "attribute");
  Value total = r.get_or(1, "start", Value::integer(0));
  for (auto& item : iterate(v)) total = binary_op(in, "+", total, attribute ? attribute_of(item, *attribute) : item);
  return total;
}

Value f_title(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  // jinja2: split on runs of [-\s({\[<], upper-case the first character of each piece.
  std::string s = as_text(v), out;
  bool word_start = true;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t cp = utf8_next(s, i);
    bool sep = is_python_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    std::string ch = s.substr(start, i - start);
    if (sep) {
      out += ch;
      word_start = true;
    } else {
      out += word_start ? py_upper(ch) : py_lower(ch);
      word_start = false;
    }
  }
  return Value::string(std::move(out));
}

Value f_tojson(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  auto indent_v = r.get(1, "indent");
  int indent = -1;
  if (indent_v && !indent_v->is_none()) {
    if (!indent_v->is_int()) throw_error("tojson: indent must be an integer");
    indent = int(std::clamp<int64_t>(indent_v->as_int(), 0, 64));
  }
  std::optional<std::string> item_sep, key_sep;
  if (auto seps = r.get(2, "separators"); seps && !seps->is_none()) {
    if (!seps->is_list() || seps->list_ref().items.size() != 2) throw_error("tojson: separators must be a pair of strings");
    item_sep = seps->list_ref().items[0].str();
    key_sep = seps->list_ref().items[1].str();
  }
  std::string out = json_dumps(v, indent, item_sep, key_sep, flag(r, 3, "sort_keys", false), flag(r, 0, "ensure_ascii", false));
  in.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(1, {"chars"});
  auto chars = r.get(0, "chars");
  std::string set = chars && !chars->is_none() ? chars->str() : std::string();
  return Value::string(py_strip(as_text(v), chars && !chars->is_none() ? &set : nullptr, true, true));
}

Value f_unique(Interpreter& in, const Value& v, const ArgReader& r) {
  r.check(2, {"case_sensitive", "attribute"});
  bool case_sensitive = flag(r, 0, "case_sensitive", false);
  auto attribute = r.get(1, "attribute");
  std::vector<Value> out, seen;
  for (auto& item : iterate(v)) {
    Value key = sort_key(attribute ? attribute_of(item, *attribute) : item, case_sensitive);
    bool dup = false;
    for (auto& s : seen) dup = dup || s.equals(key);
    in.charge(int64_t(seen.size()) / 16 + 1);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, const ArgReader& r) {
  r.check(0, {});
  std::string s = as_text(v);
  int64_t words = 0;
  bool in_word = false;
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = utf8_next(s, i);
    bool word = cp == '_' || (cp < 0x80 ? std::isalnum(int(cp)) != 0 : !is_python_space(cp));
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::integer(words);
}

const std::unordered_map<std::string, FilterFn>& filter_table() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize},
      {"center", f_center}, {"count", f_length}, {"d", f_default}, {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"first", f_first},
      {"float", f_float}, {"format", f_format}, {"from_json", f_from_json}, {"indent", f_indent},
      {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
      {"list", f_list}, {"lower", f_lower}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round}, {"safe", f_safe}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum},
      {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique},
      {"upper", f_upper}, {"wordcount", f_wordcount},
      {"max", [](Interpreter&, const Value& v, const ArgReader& r) { return f_minmax(v, r, true); }},
      {"min", [](Interpreter&, const Value& v, const ArgReader& r) { return f_minmax(v, r, false); }},
  };
  return table;
}

}  // namespace

Value apply_filter(Interpreter& in, const std::string& name, const Value& subject, CallArgs& args) {
  ArgReader reader(args, "filter '" + name + "'");
  in.charge(1);
  if (name == "map") return f_map(in, subject, reader, args);
  if (name == "select" || name == "reject") return select_impl(in, subject, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select_impl(in, subject, args, true, name == "selectattr");
  auto& table = filter_table();
  auto it = table.find(name);
  if (it == table.end()) throw_error("no filter named '{}'", name);
  // Filters that read their subject's value fail on undefined, as jinja2's do; the ones that
  // treat undefined as empty (length, list, join, default, ...) handle it themselves.
  static const char* undefined_ok[] = {"default", "d", "length", "count", "list", "join", "first", "last",
                                       "string", "trim", "upper", "lower", "safe", "items", "capitalize",
                                       "title", "reverse", "unique", "sort", "wordcount", "escape", "e",
                                       "replace", "center", "indent", "batch", "sum", "min", "max"};
  if (subject.is_undefined()) {
    bool ok = false;
    for (const char* n : undefined_ok) ok |= name == n;
    if (!ok) undefined_error(subject);
  }
  return it->second(in, subject, reader);
}

}  // namespace jitllm::chat
