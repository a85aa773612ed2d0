// GgufFile: maps a GGUF file and parses it; for a split model ("name-00001-of-00003.gguf") it
// finds the sibling parts by name, checks their split.no / split.count, and merges the tensor
// tables (each tensor's `offset` stays relative to its own part's data section; `data` points
// into that part's mapping). The byte-level parsing is gguf.cpp.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"

namespace jitllm {

namespace {

struct SplitName {
  std::string prefix;  // path up to "-00001-of-00003.gguf"
  int number = 0;      // 1-based
  int count = 0;
};

std::optional<SplitName> parse_split_name(const std::string& path) {
  static const std::regex pattern(R"(^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$)");
  std::smatch m;
  if (!std::regex_match(path, m, pattern)) return std::nullopt;
  return SplitName{m[1].str(), std::stoi(m[2].str()), std::stoi(m[3].str())};
}

std::string split_path(const std::string& prefix, int number, int count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, number, count);
}

// split.no / split.count of a part, or {0, 1} when the keys are absent (a single file).
std::pair<int64_t, int64_t> split_position(const Metadata& md, const std::string& path) {
  try {
    const int64_t count = md.get_i64_or(gguf::kKeySplitCount, 1);
    const int64_t no = md.get_i64_or(gguf::kKeySplitNo, 0);
    if (count < 1 || count > 99999)
      throw_error("{} is {}, expected 1..99999", gguf::kKeySplitCount, count);
    if (no < 0 || no >= count)
      throw_error("{} is {}, expected 0..{}", gguf::kKeySplitNo, no, count - 1);
    return {no, count};
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
}

}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  auto first = std::make_shared<MappedFile>(path);
  GgufParsed parsed = parse_gguf(first->data(), first->size(), path);
  f.parts_.push_back(first);
  f.version_ = parsed.version;
  f.alignment_ = parsed.alignment;
  f.metadata_ = std::move(parsed.metadata);
  f.tensors_ = std::move(parsed.tensors);

  const auto [split_no, split_count] = split_position(f.metadata_, path);
  if (split_count > 1) {
    const auto name = parse_split_name(path);
    if (split_no != 0) {
      const std::string hint =
          name ? fmt::format(" ({})", split_path(name->prefix, 1, int(split_count))) : "";
      throw_error("{}: part {} of a {}-part split model; open the first part{}", path,
                  split_no + 1, split_count, hint);
    }
    if (!name || name->number != 1 || name->count != split_count)
      throw_error("{}: split model with {} parts, but the file name does not follow "
                  "'<name>-00001-of-{:05d}.gguf', so the other parts cannot be found",
                  path, split_count, split_count);
    for (int i = 1; i < int(split_count); ++i) {
      const std::string part_path = split_path(name->prefix, i + 1, int(split_count));
      if (!std::filesystem::exists(part_path))
        throw_error("{}: part {} of {} is missing ({})", path, i + 1, split_count, part_path);
      auto part = std::make_shared<MappedFile>(part_path);
      GgufParsed p = parse_gguf(part->data(), part->size(), part_path);
      const auto [no, count] = split_position(p.metadata, part_path);
      if (no != i || count != split_count)
        throw_error("{}: {} = {} and {} = {}, expected {} and {} for this file name", part_path,
                    gguf::kKeySplitNo, no, gguf::kKeySplitCount, count, i, split_count);
      for (auto& t : p.tensors) f.tensors_.push_back(std::move(t));
      f.parts_.push_back(std::move(part));
    }
    if (const Value* n = f.metadata_.find(gguf::kKeySplitTensorsCount)) {
      if (!n->is_integer() || n->as_i64() != int64_t(f.tensors_.size()))
        throw_error("{}: {} says {} tensors, the parts hold {}", path,
                    gguf::kKeySplitTensorsCount, n->to_json().dump(), f.tensors_.size());
    }
  }

  f.by_name_.reserve(f.tensors_.size());
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    if (!f.by_name_.emplace(f.tensors_[i].name, i).second)
      throw_error("{}: tensor '{}' appears in more than one part", path, f.tensors_[i].name);
  }
  return f;
}

const TensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw_error("{}: tensor '{}' not found", path_, name);
  return *t;
}

size_t GgufFile::file_bytes() const {
  size_t total = 0;
  for (const auto& p : parts_) total += p->size();
  return total;
}

}  // namespace jitllm
