// JSON Schema -> GBNF (see json_schema.h). Each schema node becomes an expression; objects,
// arrays and $ref targets get rules of their own, named after where they are.
#include "constrain/json_schema.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "constrain/gbnf.h"
#include "constrain/regex_gbnf.h"

namespace jitllm::constrain {
namespace {

using ojson = nlohmann::ordered_json;

const char* kValueRules = R"(ws ::= | " " | "\n" [ \t]{0,40}
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-object ::= "{" ws (json-string ws ":" ws json-value ws ("," ws json-string ws ":" ws json-value ws)*)? "}"
json-array ::= "[" ws (json-value ws ("," ws json-value ws)*)? "]"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
)";

const char* kFormatRules = R"(fmt-hex ::= [0-9a-fA-F]
fmt-date ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])
fmt-time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
fmt-date-time ::= fmt-date "T" fmt-time
fmt-uuid ::= fmt-hex{8} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{12}
fmt-email ::= [a-zA-Z0-9_%+-] [a-zA-Z0-9._%+-]{0,63} "@" [a-zA-Z0-9] [a-zA-Z0-9-]{0,62} ("." [a-zA-Z0-9] [a-zA-Z0-9-]{0,62}){1,8}
)";

const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions"};

const std::set<std::string> kKeywords = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf",
    "allOf", "items", "prefixItems", "minItems", "maxItems", "$ref", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable"};

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '-';
  }
  if (out.size() > 40) out.resize(40);
  return out.empty() ? "x" : out;
}

// Decimal digit strings without leading zeros in [lo, hi] of one length: the usual split at
// the first digit where the bounds differ.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return gbnf_literal(lo);
  if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " " + same_length_range(lo.substr(1), hi.substr(1));
  const size_t rest = lo.size() - 1;
  if (rest == 0) return fmt::format("[{}-{}]", lo[0], hi[0]);
  const std::string nines(rest, '9'), zeros(rest, '0');
  std::vector<std::string> alts;
  const bool lo_full = lo.substr(1) == zeros, hi_full = hi.substr(1) == nines;
  char first = lo[0], last = hi[0];
  if (!lo_full) {
    alts.push_back(gbnf_literal(lo.substr(0, 1)) + " (" + same_length_range(lo.substr(1), nines) + ")");
    ++first;
  }
  if (!hi_full) --last;
  if (first <= last)
    alts.push_back(fmt::format("[{}-{}] [0-9]{{{}}}", first, last, rest));
  if (!hi_full)
    alts.push_back(gbnf_literal(hi.substr(0, 1)) + " (" + same_length_range(zeros, hi.substr(1)) + ")");
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

// Non-negative integers in [lo, hi] (hi < 0: unbounded), as decimal text without leading zeros
// and at most 19 digits.
std::string digits_range(int64_t lo, int64_t hi) {
  const int64_t kTop = std::numeric_limits<int64_t>::max();
  const int64_t top = hi < 0 ? kTop : hi;
  std::vector<std::string> alts;
  const std::string lo_s = std::to_string(lo), top_s = std::to_string(top);
  for (size_t len = lo_s.size(); len <= top_s.size(); ++len) {
    const std::string first = len == lo_s.size() ? lo_s : "1" + std::string(len - 1, '0');
    const std::string last = len == top_s.size() ? top_s : std::string(len, '9');
    if (hi < 0 && len > lo_s.size()) {
      // Unbounded: every longer length up to 16 digits (as json-int), written at once.
      if (lo_s.size() < 16) alts.push_back(fmt::format("[1-9] [0-9]{{{},15}}", lo_s.size()));
      break;
    }
    alts.push_back(same_length_range(first, last));
  }
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

class Converter {
 public:
  Converter(const ojson& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  // The schema's own rules, its root called `root_name`.
  std::string rules(const std::string& root_name) {
    const std::string top = visit(root_, "#");
    std::string out = root_name + " ::= " + top + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] void refuse(const std::string& keyword, const std::string& where,
                           const std::string& why) const {
    throw SchemaError(keyword, where, fmt::format("schema at '{}': {}", where, why));
  }

  std::string new_rule(const std::string& hint, std::string body) {
    std::string name = prefix_ + "s-" + sanitize(hint);
    for (int i = 1; rules_.count(name); ++i) name = prefix_ + "s-" + sanitize(hint) + "-" + std::to_string(i);
    rules_[name] = std::move(body);
    return name;
  }

  const ojson& resolve(const std::string& ref, const std::string& where) const {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0)
      refuse("$ref", where, fmt::format("only local references ('#/$defs/...') are supported, got '{}'", ref));
    try {
      const ojson& target = root_.at(ojson::json_pointer(ref.substr(1)));
      return target;
    } catch (const ojson::exception&) {
      refuse("$ref", where, fmt::format("'{}' points at nothing in the schema", ref));
    }
  }

  std::string visit_ref(const std::string& ref, const std::string& where) {
    auto it = ref_rules_.find(ref);
    if (it != ref_rules_.end()) return it->second;
    // Named before it is visited, so a recursive reference finds it.
    std::string name = prefix_ + "ref-" + sanitize(ref.size() > 2 ? ref.substr(ref.rfind('/') + 1) : "root");
    for (int i = 1; rules_.count(name); ++i) name += "-" + std::to_string(i);
    ref_rules_[ref] = name;
    rules_[name] = "";
    if (++ref_depth_ > 64) refuse("$ref", where, "references nest more than 64 deep");
    rules_[name] = visit(resolve(ref, where), ref);
    --ref_depth_;
    return name;
  }

  std::string alternatives(const ojson& list, const std::string& keyword, const std::string& where) {
    if (!list.is_array() || list.empty())
      refuse(keyword, where, fmt::format("'{}' must be a non-empty array", keyword));
    std::string out;
    for (size_t i = 0; i < list.size(); ++i)
      out += (i ? " | " : "") + visit(list[i], fmt::format("{}/{}/{}", where, keyword, i));
    return "(" + out + ")";
  }

  std::string visit(const ojson& s, const std::string& where) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "json-value";
      refuse("false", where, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) refuse("", where, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items())
      if (!kKeywords.count(key) && !kAnnotations.count(key))
        refuse(key, where, fmt::format("the keyword '{}' is not supported", key));
    auto constraint_keys = [&](std::initializer_list<const char*> except) {
      std::vector<std::string> keys;
      for (const auto& [key, value] : s.items()) {
        if (kAnnotations.count(key)) continue;
        bool skip = false;
        for (const char* e : except) skip = skip || key == e;
        if (!skip) keys.push_back(key);
      }
      return keys;
    };
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) refuse("nullable", where, "'nullable' must be a boolean");
      ojson rest = s;
      rest.erase("nullable");
      const std::string inner = visit(rest, where);
      return s["nullable"].get<bool>() ? "(" + inner + " | json-null)" : inner;
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) refuse("$ref", where, "'$ref' must be a string");
      const auto others = constraint_keys({"$ref"});
      if (!others.empty())
        refuse(others[0], where, fmt::format("'{}' beside '$ref' is not supported", others[0]));
      return visit_ref(s["$ref"].get<std::string>(), where);
    }
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) {
      const ojson& e = s["enum"];
      if (!e.is_array() || e.empty()) refuse("enum", where, "'enum' must be a non-empty array");
      std::string out;
      for (size_t i = 0; i < e.size(); ++i) out += (i ? " | " : "") + gbnf_literal(e[i].dump());
      return "(" + out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const auto others = constraint_keys({key});
      if (!others.empty())
        refuse(others[0], where, fmt::format("'{}' beside '{}' is not supported", others[0], key));
      return alternatives(s[key], key, where);
    }
    if (s.contains("allOf")) return visit(merge_all_of(s, where), where);

    std::vector<std::string> types;
    if (s.contains("type")) {
      const ojson& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array() && !t.empty())
        for (const auto& x : t) {
          if (!x.is_string()) refuse("type", where, "'type' must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      else refuse("type", where, "'type' must be a string or an array of strings");
    } else {
      // Keywords imply the type they apply to; nothing at all is any value.
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
        types.push_back("object");
      else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
        types.push_back("array");
      else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format"))
        types.push_back("string");
      else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
        types.push_back("number");
      else
        return "json-value";
    }
    std::string out;
    for (size_t i = 0; i < types.size(); ++i) out += (i ? " | " : "") + visit_type(s, types[i], where);
    return types.size() == 1 ? out : "(" + out + ")";
  }

  ojson merge_all_of(const ojson& s, const std::string& where) {
    const ojson& list = s["allOf"];
    if (!list.is_array() || list.empty()) refuse("allOf", where, "'allOf' must be a non-empty array");
    ojson merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = fmt::format("{}/allOf/{}", where, i);
      const ojson* part = &list[i];
      for (int hops = 0; part->is_object() && part->contains("$ref"); ++hops) {
        if (hops > 64) refuse("$ref", at, "references nest more than 64 deep");
        part = &resolve((*part)["$ref"].get<std::string>(), at);
      }
      if (!part->is_object()) refuse("allOf", at, "'allOf' entries must be schemas (objects)");
      for (const auto& [key, value] : part->items()) {
        if (kAnnotations.count(key)) continue;
        if (key == "properties") {
          if (!value.is_object()) refuse("properties", at, "'properties' must be an object");
          for (const auto& [name, prop] : value.items()) merged["properties"][name] = prop;
        } else if (key == "required") {
          for (const auto& r : value) merged["required"].push_back(r);
        } else if (key == "type") {
          if (value != "object") refuse("allOf", at, "'allOf' is supported for object schemas only");
          merged["type"] = "object";
        } else if (key == "additionalProperties") {
          if (!merged.contains("additionalProperties") || value == false) merged[key] = value;
        } else {
          refuse("allOf", at, fmt::format("'allOf' entries may hold object keywords only, got '{}'", key));
        }
      }
    }
    return merged;
  }

  std::string visit_type(const ojson& s, const std::string& type, const std::string& where) {
    if (type == "object") return visit_object(s, where);
    if (type == "array") return visit_array(s, where);
    if (type == "string") return visit_string(s, where);
    if (type == "integer") return visit_number(s, where, true);
    if (type == "number") return visit_number(s, where, false);
    if (type == "boolean") return "json-boolean";
    if (type == "null") return "json-null";
    refuse("type", where, fmt::format("unknown type '{}'", type));
  }

  int64_t count(const ojson& s, const char* key, int64_t fallback, const std::string& where) {
    if (!s.contains(key)) return fallback;
    const ojson& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxRepetition)
      refuse(key, where, fmt::format("'{}' must be an integer between 0 and {}", key, kMaxRepetition));
    return v.get<int64_t>();
  }

  std::string visit_object(const ojson& s, const std::string& where) {
    const bool has_props = s.contains("properties");
    if (has_props && !s["properties"].is_object())
      refuse("properties", where, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) refuse("required", where, "'required' must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) refuse("required", where, "'required' must be an array of names");
        required.insert(r.get<std::string>());
      }
    }
    // Extra properties: allowed by a true or a schema; absent means none once properties are
    // listed (and any object when nothing is said).
    std::string extra;
    if (s.contains("additionalProperties")) {
      const ojson& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) extra = visit(a, where + "/additionalProperties");
    } else if (!has_props) {
      if (required.empty()) return "json-object";
      extra = "json-value";
    }
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> props;
    if (has_props)
      for (const auto& [name, schema] : s["properties"].items()) {
        const std::string value = visit(schema, where + "/properties/" + name);
        props.push_back({gbnf_literal(ojson(name).dump()) + " ws \":\" ws " + value + " ws",
                         required.count(name) > 0});
      }
    for (const auto& r : required) {
      if (!has_props || !s["properties"].contains(r)) {
        if (extra.empty())
          refuse("required", where, fmt::format("'{}' is required but not among the properties", r));
        props.push_back({gbnf_literal(ojson(r).dump()) + " ws \":\" ws " + extra + " ws", true});
      }
    }
    // rest[k][c]: the properties from k on, c = a comma must come before the next one.
    const std::string base = where == "#" ? "root" : where.substr(where.rfind('/') + 1);
    std::string extra_kv;
    if (!extra.empty()) extra_kv = new_rule(base + "-kv", "json-string ws \":\" ws " + extra + " ws");
    std::vector<std::array<std::string, 2>> rest(props.size() + 1);
    for (int c = 0; c < 2; ++c) {
      const std::string comma = c ? "\",\" ws " : "";
      rest[props.size()][size_t(c)] =
          extra.empty() ? "" : new_rule(base + "-more", "(" + comma + extra_kv + " (\",\" ws " + extra_kv + ")*)?");
    }
    for (size_t k = props.size(); k-- > 0;) {
      for (int c = 0; c < 2; ++c) {
        const std::string comma = c ? "\",\" ws " : "";
        const std::string& after = rest[k + 1][1];
        std::string body = comma + props[k].kv + (after.empty() ? "" : " " + after);
        if (!props[k].required) {
          const std::string& skip = rest[k + 1][size_t(c)];
          body = "(" + body + ")" + (skip.empty() ? "?" : " | " + skip);
        }
        rest[k][size_t(c)] = new_rule(base + "-p" + std::to_string(k), body);
      }
    }
    const std::string& first = rest[0][0];
    return new_rule(base, "\"{\" ws " + (first.empty() ? "" : first + " ") + "\"}\"");
  }

  std::string visit_array(const ojson& s, const std::string& where) {
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const ojson& p = s["prefixItems"];
      if (!p.is_array()) refuse("prefixItems", where, "'prefixItems' must be an array of schemas");
      for (size_t i = 0; i < p.size(); ++i)
        prefix.push_back(visit(p[i], fmt::format("{}/prefixItems/{}", where, i)));
    }
    std::string item = "json-value";
    bool more = true;
    if (s.contains("items")) {
      if (s["items"].is_boolean() && !s["items"].get<bool>()) more = false;
      else item = visit(s["items"], where + "/items");
    }
    const int64_t min = count(s, "minItems", 0, where);
    int64_t max = count(s, "maxItems", -1, where);
    if (!more) max = max < 0 ? int64_t(prefix.size()) : std::min<int64_t>(max, int64_t(prefix.size()));
    if (max >= 0 && max < min)
      refuse("minItems", where, "'minItems' is above what 'maxItems' or the items allow");
    const int64_t m = int64_t(prefix.size());
    // The items after the prefix: how many, and each with its comma.
    auto tail = [&]() -> std::string {
      if (!more || (max >= 0 && max <= m)) return "";
      const int64_t lo = std::max<int64_t>(0, min - m);
      const std::string hi = max < 0 ? "" : std::to_string(max - m);
      if (m > 0) return fmt::format("(\",\" ws {} ws){{{},{}}}", item, lo, hi);
      if (lo == 0) {
        const std::string hi1 = max < 0 ? "" : std::to_string(max - 1);
        return fmt::format("({} ws (\",\" ws {} ws){{0,{}}})?", item, item, hi1);
      }
      return fmt::format("{} ws (\",\" ws {} ws){{{},{}}}", item, item, lo - 1,
                         max < 0 ? "" : std::to_string(max - 1));
    };
    std::string body = tail();
    for (int64_t i = m; i-- > 0;) {
      if (max >= 0 && i >= max) continue;
      const std::string elem = (i > 0 ? "\",\" ws " : "") + prefix[size_t(i)] + " ws";
      body = elem + (body.empty() ? "" : " " + body);
      if (i >= min) body = "(" + body + ")?";
    }
    const std::string base = where == "#" ? "root" : where.substr(where.rfind('/') + 1);
    return new_rule(base + "-array", "\"[\" ws " + (body.empty() ? "" : body + " ") + "\"]\"");
  }

  std::string visit_string(const ojson& s, const std::string& where) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (!s["format"].is_string()) refuse("format", where, "'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f != "date" && f != "time" && f != "date-time" && f != "uuid" && f != "email")
        refuse("format", where, fmt::format("the string format '{}' is not supported (date, time, "
                                            "date-time, uuid, email are)", f));
      if (has_len || s.contains("pattern"))
        refuse("format", where, "'format' together with a length or 'pattern' is not supported");
      return "\"\\\"\" fmt-" + f + " \"\\\"\"";
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) refuse("pattern", where, "'pattern' must be a string");
      if (has_len) refuse("pattern", where, "'pattern' together with a length is not supported");
      return "\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>(), where, "json-char") +
             " \"\\\"\"";
    }
    if (!has_len) return "json-string";
    const int64_t min = count(s, "minLength", 0, where);
    const int64_t max = count(s, "maxLength", -1, where);
    if (max >= 0 && max < min) refuse("minLength", where, "'minLength' is above 'maxLength'");
    return fmt::format("\"\\\"\" json-char{{{},{}}} \"\\\"\"", min, max < 0 ? "" : std::to_string(max));
  }

  // A bound as an integer (rounded inwards for integers), or refused when a number's bound is
  // not integral (a grammar over digits cannot cut inside a fraction exactly).
  std::optional<int64_t> bound(const ojson& s, const char* key, bool lower, bool integer,
                               const std::string& where) {
    if (!s.contains(key)) return std::nullopt;
    const ojson& v = s[key];
    if (!v.is_number()) refuse(key, where, fmt::format("'{}' must be a number", key));
    const double x = v.get<double>();
    if (!std::isfinite(x) || std::fabs(x) > 9.0e15)
      refuse(key, where, fmt::format("'{}' must be a number below 9e15 in size", key));
    const bool exclusive = std::string(key).rfind("exclusive", 0) == 0;
    if (integer) {
      double r = lower ? std::ceil(x) : std::floor(x);
      if (exclusive && r == x) r += lower ? 1 : -1;
      return int64_t(r);
    }
    if (x != std::floor(x) || exclusive)
      refuse(key, where, fmt::format("'{}' on a number must be an integral inclusive bound (use "
                                     "'integer' for exclusive ones)", key));
    return int64_t(x);
  }

  std::string visit_number(const ojson& s, const std::string& where, bool integer) {
    std::optional<int64_t> lo = bound(s, "minimum", true, integer, where);
    std::optional<int64_t> hi = bound(s, "maximum", false, integer, where);
    if (auto x = bound(s, "exclusiveMinimum", true, integer, where)) lo = lo ? std::max(*lo, *x) : *x;
    if (auto x = bound(s, "exclusiveMaximum", false, integer, where)) hi = hi ? std::min(*hi, *x) : *x;
    if (!lo && !hi) return integer ? "json-int" : "json-number";
    if (lo && hi && *lo > *hi) refuse("minimum", where, "the bounds leave no number");
    // Non-negative part [a, b] and negative part -[c, d] (b, d < 0: unbounded).
    std::vector<std::string> alts;
    const std::string frac = "\".\" [0-9]{1,16}";
    auto part = [&](int64_t a, int64_t b, const std::string& sign) {
      alts.push_back(sign + digits_range(a, b));
      if (!integer && (b < 0 || b > a)) alts.push_back(sign + digits_range(a, b < 0 ? -1 : b - 1) + " " + frac);
    };
    if (!hi || *hi >= 0) part(lo ? std::max<int64_t>(0, *lo) : 0, hi ? *hi : -1, "");
    if (!lo || *lo < 0) {
      const int64_t c = hi ? std::max<int64_t>(1, -*hi) : 1;  // -0 is written as 0
      const int64_t d = lo ? -*lo : -1;
      if (d < 0 || d >= c) part(c, d, "\"-\" ");
      // -0.x lies in (-1, 0): allowed when the lower bound is below 0 and the upper one at or
      // above 0 (the fraction parts of c = 1 start at -1.x).
      if (!integer && (!hi || *hi >= 0)) alts.push_back("\"-0\" " + frac);
    }
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
  }

  const ojson& root_;
  const std::string prefix_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> ref_rules_;
  int ref_depth_ = 0;
};

}  // namespace

std::string gbnf_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
    else out += char(c);
  }
  return out + "\"";
}

std::string json_value_rules() { return std::string(kValueRules) + kFormatRules; }

std::string json_object_gbnf() { return "root ::= json-object\n" + json_value_rules(); }

std::string json_schema_to_gbnf(const ojson& schema) {
  return Converter(schema, "").rules("root") + json_value_rules();
}

std::string json_schema_rules(const ojson& schema, const std::string& prefix) {
  return Converter(schema, prefix).rules(prefix + "root");
}

}  // namespace jitllm::constrain
