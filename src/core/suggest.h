// "Did you mean" for the command lines: the known name closest to a mistyped one (edit distance
// with swaps of neighbours, at most a third of the name's length and at least 1, so "prallel"
// finds "parallel", "prot" finds "port" and "xyz" finds nothing).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jitllm {

// The candidate nearest to `typed`, or "" when none is near enough.
std::string closest_name(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace jitllm
