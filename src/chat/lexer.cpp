// Tokenizer of the Jinja subset (see lexer.h). Mirrors jinja2's lexer rules where they change
// output: the whitespace-control decisions use the same "line_starting" notion (did the previous
// match end with a newline), and tag ends are only recognised while brackets are balanced, so
// `{{ {'a': {'b': 1}} }}` is one expression.
#include "chat/lexer.h"

#include <algorithm>
#include <cctype>

#include "chat/text.h"
#include "core/error.h"

namespace jitllm::chat {
namespace {

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t at = find_tag(pos);
      if (at == std::string::npos) {
        emit(TokenType::Text, src_.substr(pos), pos);
        break;
      }
      char kind = src_[at + 1];
      char sign = at + 2 < n && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      std::string text = src_.substr(pos, at - pos);
      if (sign == '-') {
        text = py_strip(text, nullptr, false, true);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && all_space(text, l_pos)) text.resize(l_pos);
      }
      if (!text.empty()) emit(TokenType::Text, std::move(text), pos);
      size_t p = at + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(at, p);
      } else if (kind == '%' && is_raw_begin(p)) {
        pos = lex_raw(at, p);
      } else {
        pos = lex_tag(at, p, kind == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    emit(TokenType::End, "", n);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    auto [line, col] = line_col(offset);
    throw_error("template:{}:{}: {}", line, col, message);
  }

  std::pair<int, int> line_col(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = size_t(it - line_starts_.begin());
    return {int(line), int(offset - line_starts_[line - 1] + 1)};
  }

  void emit(TokenType type, std::string value, size_t offset) {
    auto [line, col] = line_col(offset);
    tokens_.push_back(Token{type, std::move(value), line, col});
  }

  size_t find_tag(size_t pos) const {
    while (true) {
      size_t at = src_.find('{', pos);
      if (at == std::string::npos || at + 1 >= src_.size()) return std::string::npos;
      char c = src_[at + 1];
      if (c == '{' || c == '%' || c == '#') return at;
      pos = at + 1;
    }
  }

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

  bool all_space(const std::string& text, size_t from) const {
    std::string rest = text.substr(from);
    return py_strip(rest, nullptr, true, false).empty();
  }

  size_t skip_space(size_t p) const {
    while (p < src_.size() && is_space(src_[p])) ++p;
    return p;
  }

  // After a tag end: `-` strips all following whitespace, trim_blocks drops one newline.
  size_t after_end(size_t p, bool strip, bool trim) const {
    if (strip) return skip_space(p);
    if (trim && p < src_.size() && src_[p] == '\n') return p + 1;
    return p;
  }

  size_t lex_comment(size_t at, size_t p) {
    size_t end = src_.find("#}", p);
    if (end == std::string::npos) fail(at, "unterminated comment (missing '#}')");
    bool strip = end > p && src_[end - 1] == '-';
    bool keep = end > p && src_[end - 1] == '+';
    return after_end(end + 2, strip, opt_.trim_blocks && !keep);
  }

  bool is_raw_begin(size_t p) const {
    p = skip_space(p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    size_t q = skip_space(p + 3);
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
    return src_.compare(q, 2, "%}") == 0;
  }

  size_t lex_raw(size_t at, size_t p) {
    p = skip_space(p) + 3;
    p = skip_space(p);
    bool strip_after_begin = src_[p] == '-';
    if (src_[p] == '-' || src_[p] == '+') ++p;
    p += 2;
    if (strip_after_begin) p = skip_space(p);
    // Find {%[-+]? endraw [-+]?%}.
    size_t search = p;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail(at, "unterminated raw block (missing '{% endraw %}')");
      size_t q = open + 2;
      char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign) ++q;
      q = skip_space(q);
      if (src_.compare(q, 6, "endraw") == 0) {
        size_t r = skip_space(q + 6);
        char end_sign = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r] : 0;
        if (end_sign) ++r;
        if (src_.compare(r, 2, "%}") == 0) {
          std::string body = src_.substr(p, open - p);
          if (sign == '-') body = py_strip(body, nullptr, false, true);
          if (!body.empty()) emit(TokenType::Text, std::move(body), p);
          return after_end(r + 2, end_sign == '-', opt_.trim_blocks && end_sign != '+');
        }
      }
      search = open + 2;
    }
  }

  size_t lex_tag(size_t at, size_t p, bool block) {
    emit(block ? TokenType::BlockBegin : TokenType::VariableBegin, "", at);
    std::vector<char> balance;
    const size_t n = src_.size();
    while (true) {
      p = skip_space(p);
      if (p >= n) fail(at, block ? "unterminated block tag (missing '%}')" : "unterminated variable tag (missing '}}')");
      if (balance.empty()) {
        if (block) {
          if (src_.compare(p, 3, "-%}") == 0) return end_tag(TokenType::BlockEnd, p, p + 3, true, false);
          if (src_.compare(p, 3, "+%}") == 0) return end_tag(TokenType::BlockEnd, p, p + 3, false, false);
          if (src_.compare(p, 2, "%}") == 0) return end_tag(TokenType::BlockEnd, p, p + 2, false, opt_.trim_blocks);
        } else {
          if (src_.compare(p, 3, "-}}") == 0) return end_tag(TokenType::VariableEnd, p, p + 3, true, false);
          if (src_.compare(p, 2, "}}") == 0) return end_tag(TokenType::VariableEnd, p, p + 2, false, false);
        }
      }
      char c = src_[p];
      if (c >= '0' && c <= '9') {
        p = lex_number(p);
      } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || uint8_t(c) >= 0x80) {
        size_t start = p;
        while (p < n && (src_[p] == '_' || std::isalnum(uint8_t(src_[p])) || uint8_t(src_[p]) >= 0x80)) ++p;
        emit(TokenType::Name, src_.substr(start, p - start), start);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two)
          if (src_.compare(p, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|;").find(c) == std::string_view::npos)
            fail(p, fmt::format("unexpected character '{}'", c));
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") {
          if (balance.size() >= 256) fail(p, "brackets nested deeper than 256");
          balance.push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (balance.empty()) fail(p, fmt::format("unexpected '{}'", op));
          if (balance.back() != op[0]) fail(p, fmt::format("unexpected '{}', expected '{}'", op, balance.back()));
          balance.pop_back();
        }
        emit(TokenType::Operator, op, p);
        p += op.size();
      }
    }
  }

  size_t end_tag(TokenType type, size_t at, size_t p, bool strip, bool trim) {
    emit(type, "", at);
    return after_end(p, strip, trim);
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // Digits with single underscores between them ("1_000").
  size_t digits(size_t p) const {
    while (p < src_.size() && (digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && digit(src_[p + 1])))) ++p;
    return p;
  }

  size_t lex_number(size_t start) {
    bool after_dot = start > 0 && src_[start - 1] == '.';  // `a.0.1` is item 0 then item 1
    size_t p = digits(start);
    bool is_float = false;
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && digit(src_[p + 1])) {
      p = digits(p + 1);
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && digit(src_[q])) {
        p = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < p; ++i)
      if (src_[i] != '_') text += src_[i];
    emit(is_float ? TokenType::Float : TokenType::Integer, text, start);
    return p;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python string literal with unicode-escape decoding (what jinja2 applies to literals).
  size_t lex_string(size_t start) {
    char quote = src_[start];
    size_t p = start + 1;
    std::string out;
    const size_t n = src_.size();
    while (true) {
      if (p >= n) fail(start, "unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= n) fail(start, "unterminated string literal");
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          int count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < count; ++k) {
            int h = p < n ? hex_value(src_[p]) : -1;
            if (h < 0) fail(p - 2, fmt::format("truncated \\{} escape in string literal", e));
            cp = cp * 16 + uint32_t(h);
            ++p;
          }
          if (cp > 0x10FFFF) fail(p, "escape beyond U+10FFFF in string literal");
          utf8_append(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int k = 0; k < 2 && p < n && src_[p] >= '0' && src_[p] <= '7'; ++k) cp = cp * 8 + uint32_t(src_[p++] - '0');
            utf8_append(out, cp);
          } else {
            out += '\\';  // unknown escapes keep their backslash, as in Python
            out += e;
          }
      }
    }
    emit(TokenType::String, std::move(out), start);
    return p + 1;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

// jinja2 splits on \r\n, \r and \n, joins with \n and drops one trailing newline.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexerOptions& options) {
  return Lexer(normalize_newlines(source), options).run();
}

}  // namespace jitllm::chat
