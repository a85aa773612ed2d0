// Python str operations per code point (see text.h). Case mapping uses the C library's wide
// character tables of the C.UTF-8 locale (one code point to one code point, so "ß".upper() stays
// "ß" where Python gives "SS"; chat templates only change the case of ASCII role names).
#include "chat/text.h"

#include <clocale>
#include <cwctype>
#include <locale.h>

namespace jitllm::chat {

uint32_t utf8_next(std::string_view s, size_t& i) {
  uint8_t b0 = uint8_t(s[i]);
  size_t need = b0 < 0x80 ? 0 : (b0 >> 5) == 6 ? 1 : (b0 >> 4) == 14 ? 2 : (b0 >> 3) == 30 ? 3 : 99;
  // ASCII, a stray continuation byte, or a sequence cut off by the end: one byte.
  if (need == 0 || need == 99 || i + need >= s.size()) {
    ++i;
    return b0;
  }
  uint32_t cp = b0 & (0x3F >> need);
  for (size_t k = 1; k <= need; ++k) {
    uint8_t b = uint8_t(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += need + 1;
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    offsets.push_back(i);
    utf8_next(s, i);
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0, i = 0;
  while (i < s.size()) {
    utf8_next(s, i);
    ++n;
  }
  return n;
}

bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp >= 0x80 && cp <= 0xA0) return false;
  if (cp == 0xAD) return false;  // soft hyphen (format character)
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF) return false;
  if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xE000 && cp <= 0xF8FF)) return false;
  if (cp == 0xFFFE || cp == 0xFFFF || cp > 0x10FFFF) return false;
  return true;
}

static locale_t utf8_locale() {
  static locale_t loc = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
    if (!l) l = newlocale(LC_CTYPE_MASK, "C", locale_t(0));
    return l;
  }();
  return loc;
}

static uint32_t cp_upper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  return uint32_t(towupper_l(wint_t(cp), utf8_locale()));
}
static uint32_t cp_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  return uint32_t(towlower_l(wint_t(cp), utf8_locale()));
}
static bool cp_cased(uint32_t cp) { return cp_upper(cp) != cp || cp_lower(cp) != cp; }

template <typename F>
static std::string map_codepoints(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) utf8_append(out, f(utf8_next(s, i)));
  return out;
}

std::string py_upper(std::string_view s) { return map_codepoints(s, cp_upper); }
std::string py_lower(std::string_view s) { return map_codepoints(s, cp_lower); }

std::string py_title(std::string_view s) {
  bool previous_cased = false;
  return map_codepoints(s, [&](uint32_t cp) {
    uint32_t mapped = previous_cased ? cp_lower(cp) : cp_upper(cp);
    previous_cased = cp_cased(cp);
    return mapped;
  });
}

std::string py_capitalize(std::string_view s) {
  bool first = true;
  return map_codepoints(s, [&](uint32_t cp) {
    uint32_t mapped = first ? cp_upper(cp) : cp_lower(cp);
    first = false;
    return mapped;
  });
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars) {
    size_t k = 0;
    while (k < chars->size()) set.push_back(utf8_next(*chars, k));
  }
  auto strip_it = [&](uint32_t cp) {
    if (!chars) return is_python_space(cp);
    for (uint32_t c : set)
      if (c == cp) return true;
    return false;
  };
  std::vector<size_t> off = utf8_offsets(s);
  size_t n = off.size() - 1, begin = 0, end = n;
  auto cp_at = [&](size_t idx) {
    size_t p = off[idx];
    return utf8_next(s, p);
  };
  if (left)
    while (begin < end && strip_it(cp_at(begin))) ++begin;
  if (right)
    while (end > begin && strip_it(cp_at(end - 1))) --end;
  return std::string(s.substr(off[begin], off[end] - off[begin]));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    parts.emplace_back(s.substr(pos));
    return parts;
  }
  size_t i = 0;
  while (true) {
    // Skip whitespace; the rest of the string is one part once maxsplit parts exist.
    size_t k = i;
    while (k < s.size()) {
      size_t next = k;
      if (!is_python_space(utf8_next(s, next))) break;
      k = next;
    }
    i = k;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && int64_t(parts.size()) >= maxsplit) {
      parts.emplace_back(s.substr(i));  // Python keeps the remainder as is, trailing spaces too
      break;
    }
    size_t start = i;
    while (i < s.size()) {
      size_t next = i;
      if (is_python_space(utf8_next(s, next))) break;
      i = next;
    }
    parts.emplace_back(s.substr(start, i - start));
  }
  return parts;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> parts;
  if (sep) {
    size_t end = s.size();
    while (int64_t(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
  } else {
    std::vector<size_t> off = utf8_offsets(s);
    auto space_at = [&](size_t idx) {
      size_t p = off[idx];
      return is_python_space(utf8_next(s, p));
    };
    size_t end = off.size() - 1;
    while (true) {
      while (end > 0 && space_at(end - 1)) --end;
      if (end == 0) break;
      if (int64_t(parts.size()) >= maxsplit) {
        parts.emplace_back(s.substr(0, off[end]));
        break;
      }
      size_t start = end;
      while (start > 0 && !space_at(start - 1)) --start;
      parts.emplace_back(s.substr(off[start], off[end] - off[start]));
      end = start;
    }
  }
  return {parts.rbegin(), parts.rend()};
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    std::vector<size_t> off = utf8_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < off.size() + 1; ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (k + 1 < off.size()) out += s.substr(off[k], off[k + 1] - off[k]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  size_t i = 0, start = 0;
  while (i < s.size()) {
    size_t at = i;
    uint32_t cp = utf8_next(s, i);
    bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
               cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    lines.emplace_back(s.substr(start, at - start));
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    start = i;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

}  // namespace jitllm::chat
