// GBNF parser (see gbnf.h): recursive descent straight into a GrammarBuilder.
#include "constrain/gbnf.h"

#include <map>

#include "constrain/utf8_ranges.h"
#include "core/error.h"

namespace jitllm::constrain {
namespace {

using Sequence = GrammarBuilder::Sequence;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Deeper than any grammar written by hand or converted from a schema (JSON bodies nest at most
// 128 deep), shallow enough for a thread's stack.
constexpr int kMaxGroupDepth = 1024;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar parse(const std::string& root) {
    skip_space(true);
    while (pos_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    return b_.finish(root);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw_error("grammar: line {} column {}: {}", line, col, what);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  // Spaces, tabs and comments; newlines too when `newlines` (inside groups, after '|' or '::=').
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  void parse_rule() {
    const std::string name = parse_name();
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") fail(fmt::format("expected '::=' after '{}'", name));
    pos_ += 3;
    skip_space(true);
    const uint32_t rule = b_.rule(name);
    if (b_.defined(rule)) fail(fmt::format("rule '{}' is defined twice", name));
    b_.define(rule, parse_alternatives(name, false));
    skip_space(false);
    if (!at_end() && peek() != '\n' && peek() != '\r')
      fail(fmt::format("unexpected '{}' in rule '{}'", peek(), name));
  }

  std::vector<Sequence> parse_alternatives(const std::string& rule, bool nested) {
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(rule, nested));
    for (;;) {
      if (!nested) {
        // A next line that starts with '|' continues the rule.
        size_t look = pos_;
        while (look < s_.size() && (s_[look] == ' ' || s_[look] == '\t' || s_[look] == '\n' ||
                                    s_[look] == '\r'))
          ++look;
        if (look < s_.size() && s_[look] == '|') pos_ = look;
      }
      if (peek() != '|') break;
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
  }

  // One character of a literal or class: UTF-8 passes through as its code point.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of the grammar");
    const unsigned char c = uint8_t(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (at_end()) fail("unfinished escape");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': case '.':
          return uint8_t(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: --pos_; fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    int length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || pos_ + size_t(length) > s_.size()) fail("invalid UTF-8 in the grammar");
    uint32_t cp = length == 1 ? c : length == 2 ? (c & 0x1F) : length == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < length; ++i) {
      const unsigned char k = uint8_t(s_[pos_ + size_t(i)]);
      if ((k & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (k & 0x3F);
    }
    pos_ += size_t(length);
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail(fmt::format("expected {} hex digits", digits));
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail("escape is not a Unicode scalar value");
    return v;
  }

  // Elements matching one character of `ranges`: a byte set when it is all ASCII, else a rule
  // with one alternative per UTF-8 byte-range product (shared by equal classes).
  void push_class(const CodePointRanges& ranges, Sequence& seq) {
    const auto seqs = utf8_sequences(ranges);
    if (seqs.empty()) fail("the character class matches nothing");
    if (seqs.size() == 1 && seqs[0].size() == 1) {
      seq.push_back(b_.set_element(seqs[0][0]));
      return;
    }
    std::string key;
    for (const auto& [lo, hi] : normalize_ranges(ranges)) key += fmt::format("{}-{},", lo, hi);
    auto it = class_rules_.find(key);
    if (it == class_rules_.end()) {
      const uint32_t rule = b_.fresh_rule("char");
      std::vector<Sequence> alts;
      for (const auto& bytes : seqs) {
        Sequence alt;
        for (const ByteSet& set : bytes) alt.push_back(b_.set_element(set));
        alts.push_back(std::move(alt));
      }
      b_.define(rule, std::move(alts));
      it = class_rules_.emplace(key, rule).first;
    }
    seq.push_back(GrammarBuilder::rule_element(it->second));
  }

  void parse_class(Sequence& seq) {
    ++pos_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointRanges ranges;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range is reversed");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;  // ']'
    push_class(negated ? complement_ranges(ranges) : ranges, seq);
  }

  // The elements from `start` on as one element (a rule when they are several).
  uint32_t as_one(Sequence& seq, size_t start, const std::string& rule) {
    if (seq.size() - start == 1) return seq[start];
    const uint32_t group = b_.fresh_rule(rule);
    b_.define(group, {Sequence(seq.begin() + std::ptrdiff_t(start), seq.end())});
    return GrammarBuilder::rule_element(group);
  }

  int parse_count() {
    const size_t start = pos_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepetition) fail(fmt::format("a repetition count above {}", kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in the repetition");
    return int(v);
  }

  void apply_repetition(Sequence& seq, size_t start, int min, int max, const std::string& rule) {
    const uint32_t item = as_one(seq, start, rule);
    seq.resize(start);
    for (int i = 0; i < min; ++i) seq.push_back(item);
    if (max < 0) {
      // item*: star ::= item star | (empty), right-recursive so the matcher's stacks stay flat.
      const uint32_t star = b_.fresh_rule(rule + "-star");
      b_.define(star, {{item, GrammarBuilder::rule_element(star)}, {}});
      seq.push_back(GrammarBuilder::rule_element(star));
      return;
    }
    // (max - min) optional items, nested: opt_k ::= item opt_{k-1} | (empty).
    uint32_t tail = 0;
    bool have_tail = false;
    for (int k = 0; k < max - min; ++k) {
      const uint32_t opt = b_.fresh_rule(rule + "-opt");
      Sequence more{item};
      if (have_tail) more.push_back(GrammarBuilder::rule_element(tail));
      b_.define(opt, {more, {}});
      tail = opt;
      have_tail = true;
    }
    if (have_tail) seq.push_back(GrammarBuilder::rule_element(tail));
  }

  Sequence parse_sequence(const std::string& rule, bool nested) {
    Sequence seq;
    size_t last = 0;  // where the last element (the one a postfix applies to) starts
    bool have_last = false;
    for (;;) {
      const char c = peek();
      const size_t start = seq.size();
      if (c == '"') {
        ++pos_;
        while (peek() != '"') {
          if (at_end() || peek() == '\n') fail("unterminated string literal");
          std::string bytes;
          append_utf8(parse_char(), bytes);
          for (char byte : bytes) {
            ByteSet one;
            one.set(uint8_t(byte));
            seq.push_back(b_.set_element(one));
          }
        }
        ++pos_;
        if (seq.size() == start) {  // "" matches the empty string
          skip_space(nested);
          continue;
        }
      } else if (c == '[') {
        parse_class(seq);
      } else if (c == '.') {
        ++pos_;
        push_class({{0, 0x10FFFF}}, seq);
      } else if (c == '(') {
        // Groups are parsed recursively: a bound keeps a hostile grammar off the stack's end.
        if (group_depth_ == kMaxGroupDepth)
          fail(fmt::format("groups nest more than {} deep", kMaxGroupDepth));
        ++pos_;
        skip_space(true);
        const uint32_t group = b_.fresh_rule(rule);
        ++group_depth_;
        b_.define(group, parse_alternatives(rule, true));
        --group_depth_;
        skip_space(true);
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        seq.push_back(GrammarBuilder::rule_element(group));
      } else if (is_name_char(c)) {
        seq.push_back(GrammarBuilder::rule_element(b_.rule(parse_name())));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) fail(fmt::format("'{}' follows nothing it could repeat", c));
        ++pos_;
        if (c == '*') apply_repetition(seq, last, 0, -1, rule);
        else if (c == '+') apply_repetition(seq, last, 1, -1, rule);
        else if (c == '?') apply_repetition(seq, last, 0, 1, rule);
        else {
          skip_space(false);
          const int min = parse_count();
          int max = min;
          skip_space(false);
          if (peek() == ',') {
            ++pos_;
            skip_space(false);
            max = peek() == '}' ? -1 : parse_count();
            if (max >= 0 && max < min) fail("repetition {m,n} with n < m");
          }
          skip_space(false);
          if (peek() != '}') fail("expected '}'");
          ++pos_;
          apply_repetition(seq, last, min, max, rule);
        }
        have_last = false;  // x** is an error, as in llama.cpp
        skip_space(nested);
        continue;
      } else {
        break;
      }
      last = start;
      have_last = true;
      skip_space(nested);
    }
    return seq;
  }

  std::string_view s_;
  size_t pos_ = 0;
  GrammarBuilder b_;
  std::map<std::string, uint32_t> class_rules_;
  int group_depth_ = 0;  // open '(' around the current position
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& root) {
  return Parser(text).parse(root);
}

}  // namespace jitllm::constrain
