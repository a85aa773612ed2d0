// Untrusted JSON text -> nlohmann::json, with the checks nlohmann does not do itself: a bound on
// nesting (its recursive destructor and our walkers must not run out of stack) and refusal of
// duplicate top-level keys (nlohmann would keep the last one silently).
#include "io/json_text.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/mapped_file.h"

namespace jitllm {

namespace {

constexpr size_t kMaxJsonDepth = 32;  // a safetensors header needs 3, HF configs rarely exceed 6

}  // namespace

nlohmann::json parse_untrusted_json(std::string_view text, const std::string& name, size_t at,
                                    const char* what) {
  if (json_depth_exceeded_at(text, kMaxJsonDepth) != std::string_view::npos)
    throw_error("{}: offset {}: {}: JSON nested deeper than {} levels", name, at, what,
                kMaxJsonDepth);
  std::set<std::string> keys;
  std::string duplicate;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 &&
        !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& e) {
    throw_error("{}: offset {}: {}: invalid JSON: {}", name, at + (e.byte > 0 ? e.byte - 1 : 0),
                what, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw_error("{}: offset {}: {}: invalid JSON: {}", name, at, what, e.what());
  }
  if (!duplicate.empty())
    throw_error("{}: offset {}: {}: key '{}' appears twice", name, at, what, duplicate);
  return j;
}

nlohmann::json read_json_file(const std::string& path) {
  MappedFile file(path);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  return parse_untrusted_json(text, path, 0, "JSON");
}

}  // namespace jitllm
