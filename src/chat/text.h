// Python str semantics over UTF-8 bytes: templates index, slice, measure, strip, split and
// change the case of strings, and Python does all of that per code point, so "Café"|length is 4
// and "Café"[::-1] is "éfaC". Invalid UTF-8 bytes are treated as one code point each so that no
// input can make these functions read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jitllm::chat {

// Decodes the code point at s[i] and advances i past it.
uint32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, uint32_t cp);
// Byte offsets of every code point start, plus s.size() at the end.
std::vector<size_t> utf8_offsets(std::string_view s);
size_t utf8_length(std::string_view s);

bool is_python_space(uint32_t cp);  // str.isspace()
bool is_printable(uint32_t cp);     // str.isprintable(), approximated outside Latin-1

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

// str.strip/lstrip/rstrip; `chars` null means whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit) / str.rsplit; `sep` null means runs of whitespace.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.replace(old, new, count) (count < 0: all); an empty `old` inserts between code points.
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// str.splitlines() without keepends.
std::vector<std::string> py_splitlines(std::string_view s);

}  // namespace jitllm::chat
