// Regular expression -> GBNF over a JSON string's body (see regex_gbnf.h).
#include "constrain/regex_gbnf.h"

#include <fmt/format.h>

#include "constrain/json_schema.h"
#include "constrain/utf8_ranges.h"

namespace jitllm::constrain {
namespace {

// How one character is written inside a JSON string ("" for control characters we leave out).
std::string json_text(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    default: break;
  }
  if (cp < 0x20) return "";
  std::string out;
  append_utf8(cp, out);
  return out;
}

std::string class_char(uint32_t cp) {
  return cp < 0x10000 ? fmt::format("\\u{:04X}", cp) : fmt::format("\\U{:08X}", cp);
}

constexpr int kMaxGroupDepth = 1024;  // as the GBNF parser's (gbnf.cpp)

class RegexParser {
 public:
  RegexParser(const std::string& p, const std::string& where) : p_(p), where_(where) {}

  std::string parse(const std::string& json_char) {
    size_t begin = 0, end = p_.size();
    const bool start_anchor = !p_.empty() && p_[0] == '^';
    if (start_anchor) begin = 1;
    bool end_anchor = false;
    if (end > begin && p_[end - 1] == '$') {
      // An escaped '$' is a literal: count the backslashes before it.
      size_t slashes = 0;
      for (size_t k = end - 1; k > begin && p_[k - 1] == '\\'; --k) ++slashes;
      end_anchor = slashes % 2 == 0;
      if (end_anchor) --end;
    }
    i_ = begin;
    end_ = end;
    std::string body = alternation();
    if (i_ != end_) fail(fmt::format("unexpected '{}' at {}", p_[i_], i_));
    std::string out;
    if (!start_anchor) out += json_char + "* ";
    out += body;
    if (!end_anchor) out += " " + json_char + "*";
    return "(" + out + ")";
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw SchemaError("pattern", where_, fmt::format("schema at '{}': pattern '{}': {}", where_, p_, why));
  }
  bool more() const { return i_ < end_; }
  char peek() const { return more() ? p_[i_] : '\0'; }

  std::string alternation() {
    std::string out = sequence();
    bool alt = false;
    while (peek() == '|') {
      ++i_;
      out += " | " + sequence();
      alt = true;
    }
    return alt ? "(" + out + ")" : out;
  }

  std::string sequence() {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      std::string a = atom();
      a += quantifier();
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? "\"\"" : "(" + out + ")";
  }

  std::string quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      q = std::string(1, c);
    } else if (c == '{') {
      const size_t close = p_.find('}', i_);
      if (close == std::string::npos || close >= end_) fail("unterminated '{'");
      const std::string inside = p_.substr(i_ + 1, close - i_ - 1);
      for (char k : inside)
        if (!(k >= '0' && k <= '9') && k != ',') fail(fmt::format("bad repetition '{{{}}}'", inside));
      if (inside.empty() || inside[0] == ',') fail(fmt::format("bad repetition '{{{}}}'", inside));
      q = "{" + inside + "}";
      i_ = close + 1;
    } else {
      return "";
    }
    if (peek() == '?') ++i_;  // lazy: matches the same strings
    if (peek() == '*' || peek() == '+' || peek() == '{') fail("a quantifier follows a quantifier");
    return q;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail("bad hex escape");
      v = v * 16 + uint32_t(d);
      ++i_;
    }
    return v;
  }

  // A UTF-8 character of the pattern.
  uint32_t utf8_char() {
    const unsigned char c = uint8_t(p_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + size_t(n) > end_) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(p_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    return cp;
  }

  // After a backslash: a class escape fills `ranges` and returns true; a character escape
  // sets `cp`.
  bool escape(CodePointRanges& ranges, uint32_t& cp) {
    if (!more()) fail("a trailing backslash");
    const char e = p_[i_++];
    const CodePointRanges digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        space{{'\t', '\r'}, {' ', ' '}};
    switch (e) {
      case 'd': ranges = digit; return true;
      case 'D': ranges = complement_ranges(digit); return true;
      case 'w': ranges = word; return true;
      case 'W': ranges = complement_ranges(word); return true;
      case 's': ranges = space; return true;
      case 'S': ranges = complement_ranges(space); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': cp = hex(2); return false;
      case 'u': cp = hex(4); return false;
      default: break;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
      fail(fmt::format("the escape '\\{}' is not supported", e));
    cp = uint8_t(e);
    return false;
  }

  // One character of `ranges` as JSON string text: a class of the plain characters, and the
  // characters JSON escapes as literal alternatives.
  std::string ranges_expr(const CodePointRanges& input) {
    const CodePointRanges ranges = normalize_ranges(input);
    auto has = [&](uint32_t cp) {
      for (const auto& [lo, hi] : ranges) if (cp >= lo && cp <= hi) return true;
      return false;
    };
    CodePointRanges plain;
    for (const auto& [lo, hi] : ranges) {
      // Cut out 0x00-0x1F, '"' and '\\'.
      uint32_t a = std::max<uint32_t>(lo, 0x20);
      for (uint32_t cut : {uint32_t('"'), uint32_t('\\')}) {
        if (a <= cut && cut <= hi) {
          if (a < cut) plain.emplace_back(a, cut - 1);
          a = cut + 1;
        }
      }
      if (a <= hi) plain.emplace_back(a, hi);
    }
    std::vector<std::string> alts;
    if (!plain.empty()) {
      std::string cls = "[";
      for (const auto& [lo, hi] : plain) cls += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
      alts.push_back(cls + "]");
    }
    for (uint32_t cp : {uint32_t('"'), uint32_t('\\'), uint32_t('\n'), uint32_t('\t'), uint32_t('\r')})
      if (has(cp)) alts.push_back(gbnf_literal(json_text(cp)));
    if (alts.empty()) fail("a character class that matches no character a JSON string can hold");
    if (alts.size() == 1) return alts[0];
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
  }

  std::string char_class() {
    ++i_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++i_;
    CodePointRanges ranges;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++i_;
        CodePointRanges cls;
        if (escape(cls, lo)) {
          ranges.insert(ranges.end(), cls.begin(), cls.end());
          continue;
        }
      } else {
        lo = utf8_char();
      }
      uint32_t hi = lo;
      if (peek() == '-' && i_ + 1 < end_ && p_[i_ + 1] != ']') {
        ++i_;
        if (peek() == '\\') {
          ++i_;
          CodePointRanges cls;
          if (escape(cls, hi)) fail("a class escape ends a range");
        } else {
          hi = utf8_char();
        }
        if (hi < lo) fail("a reversed range in a class");
      }
      ranges.emplace_back(lo, hi);
    }
    if (peek() != ']') fail("unterminated '['");
    ++i_;
    return ranges_expr(negated ? complement_ranges(ranges) : ranges);
  }

  std::string atom() {
    const char c = peek();
    if (c == '(') {
      // Groups are parsed recursively: a bound keeps a hostile pattern off the stack's end.
      if (group_depth_ == kMaxGroupDepth)
        fail(fmt::format("groups nest more than {} deep", kMaxGroupDepth));
      ++i_;
      if (peek() == '?') {
        if (i_ + 1 < end_ && p_[i_ + 1] == ':') i_ += 2;
        else fail("lookaround and named groups are not supported");
      }
      ++group_depth_;
      std::string inner = alternation();
      --group_depth_;
      if (peek() != ')') fail("unterminated '('");
      ++i_;
      return "(" + inner + ")";
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return ranges_expr(complement_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '^' || c == '$') fail("anchors are supported only at the start and the end");
    if (c == '*' || c == '+' || c == '?' || c == '{') fail(fmt::format("'{}' follows nothing", c));
    if (c == '\\') {
      ++i_;
      CodePointRanges cls;
      uint32_t cp = 0;
      if (escape(cls, cp)) return ranges_expr(cls);
      return ranges_expr({{cp, cp}});
    }
    const uint32_t cp = utf8_char();
    return ranges_expr({{cp, cp}});
  }

  const std::string& p_;
  const std::string& where_;
  size_t i_ = 0, end_ = 0;
  int group_depth_ = 0;  // open '(' around the current position
};

}  // namespace

std::string regex_to_gbnf(const std::string& pattern, const std::string& where,
                          const std::string& json_char) {
  return RegexParser(pattern, where).parse(json_char);
}

}  // namespace jitllm::constrain
