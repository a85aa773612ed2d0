// Parsing untrusted JSON (safetensors headers, HF config files): nesting depth bounded before
// nlohmann parses, duplicate top-level keys refused, errors naming the file and byte offset.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace jitllm {

// `at` is the file offset of text[0]; `what` names the part of the file ("header").
nlohmann::json parse_untrusted_json(std::string_view text, const std::string& name, size_t at,
                                    const char* what);
// The whole file parsed as above.
nlohmann::json read_json_file(const std::string& path);

}  // namespace jitllm
