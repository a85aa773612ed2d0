// The tojson filter as transformers defines it: Python's json.dumps(x, ensure_ascii=False,
// indent=..., separators=..., sort_keys=...). Written out here rather than through nlohmann's
// dump() because the bytes differ: Python separates with ", " and ": ", prints floats with
// repr() (1e-05, 1e+16), keeps non-ASCII text raw, and turns int/bool/None keys into strings.
#include <algorithm>

#include "chat/builtins.h"
#include "chat/text.h"
#include "core/error.h"

namespace jitllm::chat {
namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    char ch = s[i];
    auto c = uint8_t(ch);
    if (ensure_ascii && c >= 0x80) {  // \uXXXX, astral code points as surrogate pairs
      uint32_t cp = utf8_next(s, i);
      --i;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return python_float_repr(d);
}

std::string key_string(const Value& k) {
  switch (k.kind()) {
    case Kind::String: return k.as_string();
    case Kind::Bool: return k.as_bool() ? "true" : "false";
    case Kind::None: return "null";
    case Kind::Int: return std::to_string(k.as_int());
    case Kind::Float: return float_json(k.as_double());
    default: throw_error("keys must be str, int, float, bool or None, not {}", k.type_name());
  }
}

struct Dumper {
  int indent;
  std::string item_sep, key_sep;
  bool sort_keys;
  bool ensure_ascii;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(size_t(indent) * size_t(level), ' ');
  }

  void dump(const Value& v, int level) {
    NestingGuard guard;
    switch (v.kind()) {
      case Kind::None: out += "null"; return;
      case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::Int: out += std::to_string(v.as_int()); return;
      case Kind::Float: out += float_json(v.as_double()); return;
      case Kind::String: dump_string(out, v.as_string(), ensure_ascii); return;
      case Kind::List: {
        const auto& items = v.list_ref().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(level + 1);
          dump(items[i], level + 1);
        }
        if (indent >= 0) newline(level);
        out += ']';
        return;
      }
      case Kind::Dict: {
        if (v.dict_ref().flavor != DictFlavor::Dict) break;
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, val] : v.dict_ref().items) entries.emplace_back(key_string(k), &val);
        if (sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
        if (entries.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(level + 1);
          dump_string(out, entries[i].first, ensure_ascii);
          out += key_sep;
          dump(*entries[i].second, level + 1);
        }
        if (indent >= 0) newline(level);
        out += '}';
        return;
      }
      default: break;
    }
    std::string type = v.type_name();
    if (auto sp = type.find(' '); sp != std::string::npos) type.resize(sp);
    throw_error("Object of type {} is not JSON serializable", type);
  }
};

}  // namespace

std::string json_dumps(const Value& v, int indent, const std::optional<std::string>& item_separator,
                       const std::optional<std::string>& key_separator, bool sort_keys, bool ensure_ascii) {
  Dumper d{indent, item_separator.value_or(indent >= 0 ? "," : ", "), key_separator.value_or(": "), sort_keys,
           ensure_ascii, {}};
  d.dump(v, 0);
  return std::move(d.out);
}

Value json_loads(const std::string& text) {
  try {
    return Value::from_json(nlohmann::ordered_json::parse(text));
  } catch (const nlohmann::json::exception& e) {
    throw_error("from_json: invalid JSON: {}", e.what());
  }
}

}  // namespace jitllm::chat
