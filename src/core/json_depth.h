// How deep untrusted JSON text nests, found by a scan that does not recurse: the check every
// reader of such text (io's file headers, the server's request bodies) makes before nlohmann's
// recursive dump, copy and destructor get to see the text.
#pragma once

#include <cstddef>
#include <string_view>

namespace jitllm {

// The offset of the [ or { that opens level max_depth + 1, outside strings; npos when the text
// stays within max_depth.
size_t json_depth_exceeded_at(std::string_view text, size_t max_depth);

}  // namespace jitllm
