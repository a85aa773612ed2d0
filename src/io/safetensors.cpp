// safetensors parsing (parse_safetensors: header length, JSON header, per-tensor dtype / shape /
// data_offsets checks) and SafetensorsModel (single file or sharded via the index JSON), plus the
// FP8 E4M3 decode. The JSON header is untrusted (json_text.h bounds its nesting and refuses
// duplicate tensor names); every number in it is range-checked before use.
#include "io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/fp16.h"
#include "io/json_text.h"
#include "quant/types.h"

namespace jitllm {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the safetensors format's own limit
constexpr size_t kMaxRank = 4;                    // GGUF's ne has at most 4 dimensions

struct DtypeInfo {
  const char* name;
  SafetensorsDtype dtype;
  QuantType type;
  size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"F32", SafetensorsDtype::F32, QuantType::F32, 4},
    {"F16", SafetensorsDtype::F16, QuantType::F16, 2},
    {"BF16", SafetensorsDtype::BF16, QuantType::BF16, 2},
    {"F8_E4M3", SafetensorsDtype::F8_E4M3, QuantType::I8, 1},
    {"U8", SafetensorsDtype::U8, QuantType::I8, 1},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// A JSON value as a non-negative integer that fits in uint64, or an error naming `field`.
uint64_t json_u64(const nlohmann::json& v, const std::string& field) {
  if (!v.is_number_unsigned()) {
    if (v.is_number_integer()) throw_error("{} is negative ({})", field, v.dump());
    throw_error("{} must be a non-negative integer, got {}", field, v.dump());
  }
  return v.get<uint64_t>();
}

std::string metadata_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

SafetensorsTensor read_entry(const std::string& tensor_name, const nlohmann::json& entry,
                             size_t data_bytes) {
  if (!entry.is_object()) throw_error("expected an object, got {}", entry.type_name());
  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) throw_error("'dtype' missing or not a string");
  const std::string dtype = dtype_it->get<std::string>();
  const DtypeInfo* d = find_dtype(dtype);
  if (!d)
    throw_error("dtype {} is not supported (supported: F32, F16, BF16, F8_E4M3, U8)",
                dtype.size() > 32 ? dtype.substr(0, 32) + "..." : dtype);

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) throw_error("'shape' missing or not an array");
  if (shape_it->size() > kMaxRank)
    throw_error("shape has {} dimensions (at most {})", shape_it->size(), kMaxRank);
  SafetensorsTensor t;
  t.dtype = d->dtype;
  t.info.name = tensor_name;
  t.info.type = d->type;
  // The product with zeros counted as 1 must fit in int64, so that every partial product
  // (TensorInfo::elements(), rows()) fits too, even for an empty tensor.
  uint64_t extent = 1, elements = 1;
  // safetensors shapes are row-major (last dimension contiguous); GGUF's ne lists it first.
  for (size_t k = shape_it->size(); k-- > 0;) {
    const uint64_t n = json_u64((*shape_it)[k], fmt::format("shape[{}]", k));
    if (n > uint64_t(std::numeric_limits<int64_t>::max()) ||
        (n != 0 && extent > uint64_t(std::numeric_limits<int64_t>::max()) / n))
      throw_error("shape {} overflows the element count", shape_it->dump());
    extent *= std::max<uint64_t>(n, 1);
    elements *= n;
    t.info.shape.push_back(int64_t(n));
  }
  if (elements > std::numeric_limits<uint64_t>::max() / d->bytes)
    throw_error("shape {} overflows the byte size", shape_it->dump());
  const uint64_t bytes = elements * d->bytes;

  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2)
    throw_error("'data_offsets' must be an array [begin, end]");
  const uint64_t begin = json_u64((*off_it)[0], "data_offsets[0]");
  const uint64_t end = json_u64((*off_it)[1], "data_offsets[1]");
  if (begin > end) throw_error("data_offsets [{}, {}]: begin is after end", begin, end);
  if (end > data_bytes)
    throw_error("data_offsets [{}, {}] run past the end of the data ({} bytes)", begin, end,
                data_bytes);
  if (end - begin != bytes)
    throw_error("data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", begin, end,
                end - begin, dtype, shape_it->dump(), bytes);
  t.info.offset = begin;
  t.info.bytes = size_t(bytes);
  return t;
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

SafetensorsParsed parse_safetensors(const uint8_t* bytes, size_t size, const std::string& name) {
  if (size < 8)
    throw_error("{}: offset 0: header length: file of {} bytes is too short for a safetensors "
                "header", name, size);
  uint64_t header_len;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > size - 8)
    throw_error("{}: offset 0: header length {} runs past the end of the file (size {})", name,
                header_len, size);
  if (header_len > kMaxHeaderBytes)
    throw_error("{}: offset 0: header length {} is over the format's limit of {} bytes", name,
                header_len, kMaxHeaderBytes);
  const std::string_view text(reinterpret_cast<const char*>(bytes + 8), size_t(header_len));
  const nlohmann::json header = parse_untrusted_json(text, name, 8, "header");
  if (!header.is_object())
    throw_error("{}: offset 8: header: expected a JSON object, got {}", name, header.type_name());

  SafetensorsParsed out;
  out.data_offset = 8 + size_t(header_len);
  const size_t data_bytes = size - out.data_offset;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        throw_error("{}: header: '__metadata__' must be an object, got {}", name,
                    value.type_name());
      for (const auto& [k, v] : value.items()) out.metadata[k] = metadata_text(v);
      continue;
    }
    try {
      out.tensors.push_back(read_entry(key, value, data_bytes));
    } catch (const Error& e) {
      throw_error("{}: header: tensor '{}': {}", name, key, e.what());
    }
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) {
    return a.info.offset < b.info.offset;
  });
  const SafetensorsTensor* furthest = nullptr;
  for (auto& t : out.tensors) {
    t.info.data = bytes + out.data_offset + t.info.offset;
    if (t.info.bytes == 0) continue;
    if (furthest && furthest->info.offset + furthest->info.bytes > t.info.offset)
      throw_error("{}: header: tensor '{}': data_offsets [{}, {}] overlap tensor '{}' at [{}, {}]",
                  name, t.info.name, t.info.offset, t.info.offset + t.info.bytes,
                  furthest->info.name, furthest->info.offset,
                  furthest->info.offset + furthest->info.bytes);
    if (!furthest || t.info.offset + t.info.bytes > furthest->info.offset + furthest->info.bytes)
      furthest = &t;
  }
  return out;
}

namespace {

std::vector<std::string> index_shards(const nlohmann::json& index, const std::string& path,
                                      std::map<std::string, std::string>& weight_map) {
  if (!index.is_object()) throw_error("{}: expected a JSON object", path);
  const auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object())
    throw_error("{}: 'weight_map' missing or not an object", path);
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (const auto& [tensor, file] : wm->items()) {
    if (!file.is_string())
      throw_error("{}: weight_map['{}'] must be a file name, got {}", path, tensor, file.dump());
    const std::string f = file.get<std::string>();
    // Shards live next to the index; a path elsewhere is refused rather than followed.
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
        f == "." || f == "..")
      throw_error("{}: weight_map['{}'] = '{}' is not a file name in the same folder", path,
                  tensor, f);
    weight_map[tensor] = f;
    if (seen.insert(f).second) shards.push_back(f);
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

}  // namespace

SafetensorsModel SafetensorsModel::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = path;
  if (fs::is_directory(path)) {
    const fs::path dir(path);
    if (fs::exists(dir / "model.safetensors.index.json"))
      file = (dir / "model.safetensors.index.json").string();
    else if (fs::exists(dir / "model.safetensors"))
      file = (dir / "model.safetensors").string();
    else
      throw_error("{}: no model.safetensors or model.safetensors.index.json in this folder", path);
  }

  SafetensorsModel m;
  std::map<std::string, std::string> weight_map;  // empty for a single file
  const bool sharded = file.ends_with(".index.json");
  if (sharded) {
    const nlohmann::json index = read_json_file(file);
    for (const auto& shard : index_shards(index, file, weight_map))
      m.files_.push_back((fs::path(file).parent_path() / shard).string());
    if (const auto md = index.find("metadata"); md != index.end() && md->is_object())
      for (const auto& [k, v] : md->items()) m.metadata_[k] = metadata_text(v);
    if (m.files_.empty()) throw_error("{}: weight_map is empty", file);
  } else {
    m.files_.push_back(file);
  }

  for (const auto& shard_path : m.files_)
    if (sharded && !fs::exists(shard_path))
      throw_error("{}: shard '{}' named in the weight_map is missing", file, shard_path);
  for (size_t s = 0; s < m.files_.size(); ++s) {
    const std::string& shard_path = m.files_[s];
    auto map = std::make_shared<MappedFile>(shard_path);
    SafetensorsParsed p = parse_safetensors(map->data(), map->size(), shard_path);
    if (!sharded) m.metadata_ = std::move(p.metadata);
    const std::string shard_name = fs::path(shard_path).filename().string();
    for (auto& t : p.tensors) {
      if (m.by_name_.count(t.info.name))
        throw_error("{}: tensor '{}' appears in more than one shard", shard_path, t.info.name);
      if (sharded) {
        auto it = weight_map.find(t.info.name);
        if (it != weight_map.end() && it->second != shard_name)
          throw_error("{}: tensor '{}' is in shard '{}', but the index's weight_map says '{}'",
                      file, t.info.name, shard_name, it->second);
      }
      t.shard = s;
      m.by_name_.emplace(t.info.name, m.tensors_.size());
      m.tensors_.push_back(std::move(t));
    }
    m.maps_.push_back(std::move(map));
  }
  for (const auto& [tensor, shard] : weight_map)
    if (!m.by_name_.count(tensor))
      throw_error("{}: tensor '{}' is listed in the weight_map but missing from shard '{}'", file,
                  tensor, shard);
  return m;
}

const SafetensorsTensor* SafetensorsModel::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsModel::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw_error("{}: tensor '{}' not found", files_.empty() ? "" : files_[0], name);
  return *t;
}

size_t SafetensorsModel::file_bytes() const {
  size_t total = 0;
  for (const auto& m : maps_) total += m->size();
  return total;
}

std::vector<float> SafetensorsModel::to_f32(const SafetensorsTensor& t) const {
  const size_t n = size_t(t.info.elements());
  std::vector<float> out(n);  // [rows, row_length]
  const uint8_t* src = t.info.data;
  switch (t.dtype) {
    case SafetensorsDtype::F32:
      std::memcpy(out.data(), src, n * 4);
      break;
    case SafetensorsDtype::F16:
    case SafetensorsDtype::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);  // data may be unaligned
        out[i] = t.dtype == SafetensorsDtype::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
      }
      break;
    case SafetensorsDtype::F8_E4M3:
      f8_e4m3_to_f32(src, out.data(), n);
      break;
    case SafetensorsDtype::U8:
      throw_error("tensor '{}': U8 holds packed bytes (MXFP4 blocks or scales), not numbers",
                  t.info.name);
  }
  return out;
}

float f8_e4m3_to_f32(uint8_t v) {
  const bool negative = v & 0x80;
  const int exponent = (v >> 3) & 0xF;
  const int mantissa = v & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0)
    magnitude = std::ldexp(float(mantissa), -9);  // subnormal: m/8 * 2^(1-7)
  else
    magnitude = std::ldexp(float(8 + mantissa), exponent - 7 - 3);
  return negative ? -magnitude : magnitude;
}

void f8_e4m3_to_f32(const uint8_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f8_e4m3_to_f32(src[i]);
}

}  // namespace jitllm
