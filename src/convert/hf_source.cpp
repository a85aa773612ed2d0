// ConvertSource over a Hugging Face folder: config.json -> GGUF metadata through the architecture's
// hf_arch entry, safetensors tensors renamed, q/k rows permuted, Gemma norms shifted by one,
// expert slices stacked, generated tensors added, tokenizer metadata from the injected importer
// and the family's own tokenizer keys (see source.h, hf_arch.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "convert/hf_arch.h"
#include "convert/source.h"
#include "core/error.h"
#include "core/fp16.h"
#include "io/hf_folder.h"

namespace jitllm {

void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t row_bytes,
                       int64_t n_head) {
  if (n_head <= 0 || rows % (2 * n_head) != 0)
    throw_error("cannot permute {} rows into {} rope heads", rows, n_head);
  const int64_t half = rows / n_head / 2;  // head_dim / 2
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t from = h * 2 * half + j * half + i;  // [head][2][half]
        const int64_t to = h * 2 * half + i * 2 + j;       // [head][half][2]
        std::memcpy(dst + size_t(to) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
}

// ---- the source --------------------------------------------------------------------------------

namespace {

QuantType float_type(const SafetensorsTensor& t) {
  switch (t.dtype) {
    case SafetensorsDtype::F32: return QuantType::F32;
    case SafetensorsDtype::F16: return QuantType::F16;
    case SafetensorsDtype::BF16: return QuantType::BF16;
    case SafetensorsDtype::F8_E4M3:
    case SafetensorsDtype::U8: break;
  }
  throw_error("tensor '{}': {} checkpoints are not supported yet (convert to bf16 first)",
              t.info.name, safetensors_dtype_name(t.dtype));
}

// add + w for each value, in float32 (HfTensorMapping::plus_one: Gemma's norms, add 1;
// HfTensorMapping::f32: routers, add 0).
std::span<const uint8_t> load_as_f32(const SafetensorsTensor& t, float add, std::vector<uint8_t>& scratch) {
  const TensorInfo& info = t.info;
  const int64_t n = info.elements();
  scratch.resize(size_t(n) * sizeof(float));
  float* out = reinterpret_cast<float*>(scratch.data());
  for (int64_t i = 0; i < n; ++i) {
    float w;
    switch (t.dtype) {
      case SafetensorsDtype::F32: std::memcpy(&w, info.data + 4 * i, 4); break;
      case SafetensorsDtype::F16: {
        uint16_t h;
        std::memcpy(&h, info.data + 2 * i, 2);
        w = fp16_to_f32(h);
        break;
      }
      case SafetensorsDtype::BF16: {
        uint16_t h;
        std::memcpy(&h, info.data + 2 * i, 2);
        w = bf16_to_f32(h);
        break;
      }
      default: throw_error("tensor '{}': cannot read {} values as float32", info.name,
                           safetensors_dtype_name(t.dtype));
    }
    out[i] = w + add;
  }
  return {scratch.data(), scratch.size()};
}

// One HF tensor's bytes in GGUF layout: copied into scratch when its rows are permuted or its data
// is not aligned for float access, else viewed in place.
std::span<const uint8_t> load_one(const SafetensorsTensor& t, int64_t permute_heads,
                                  std::vector<uint8_t>& scratch) {
  const TensorInfo& info = t.info;
  if (permute_heads > 0) {
    scratch.resize(info.bytes);
    permute_rope_rows(info.data, scratch.data(), info.rows(), info.bytes / size_t(info.rows()),
                      permute_heads);
    return {scratch.data(), scratch.size()};
  }
  if (reinterpret_cast<uintptr_t>(info.data) % 4 != 0) {
    scratch.assign(info.data, info.data + info.bytes);
    return {scratch.data(), scratch.size()};
  }
  return {info.data, info.bytes};
}

// HfTensorMapping's column selection and transpose of a [outer][rows][cols] tensor of `es`-byte
// elements, into scratch; returns the GGUF shape of the result.
std::vector<int64_t> rearranged_shape(const std::vector<int64_t>& shape, const HfTensorMapping& m) {
  std::vector<int64_t> out = shape;
  if (m.heads > 0) out = {shape[0], m.head_rows, m.heads};  // [cols, head_rows, heads]
  if (out.size() < 2) out.push_back(1);
  if (m.columns != HfTensorMapping::Columns::All) out[0] /= 2;
  if (m.transpose) std::swap(out[0], out[1]);
  while (out.size() > shape.size() && out.back() == 1) out.pop_back();
  return out;
}

std::span<const uint8_t> load_rearranged(const SafetensorsTensor& t, const HfTensorMapping& m,
                                         std::vector<uint8_t>& scratch) {
  const TensorInfo& info = t.info;
  const int64_t cols = info.shape[0];
  // A per-head cut reads `rows` of every `per` source rows, from `skip` on.
  const int64_t per = m.heads > 0 ? info.shape[1] / m.heads : (info.shape.size() > 1 ? info.shape[1] : 1);
  const int64_t rows = m.heads > 0 ? m.head_rows : per, skip = m.heads > 0 ? m.head_first : 0;
  const int64_t outer = info.elements() / (cols * per);
  const size_t es = info.bytes / size_t(info.elements());
  const bool pick = m.columns != HfTensorMapping::Columns::All;
  const int64_t first = m.columns == HfTensorMapping::Columns::Odd ? 1 : 0, step = pick ? 2 : 1;
  const int64_t kept = cols / step;
  scratch.resize(size_t(outer * rows * kept) * es);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < kept; ++c) {
        const int64_t from = (o * per + skip + r) * cols + first + c * step;
        const int64_t to = m.transpose ? (o * kept + c) * rows + r : (o * rows + r) * kept + c;
        std::memcpy(scratch.data() + size_t(to) * es, info.data + size_t(from) * es, es);
      }
  return {scratch.data(), scratch.size()};
}

// A rearranged tensor then widened to f32 (gpt-oss's expert biases).
std::span<const uint8_t> load_rearranged_f32(const SafetensorsTensor& t, const HfTensorMapping& m,
                                             std::vector<uint8_t>& scratch) {
  std::vector<uint8_t> moved;
  load_rearranged(t, m, moved);
  SafetensorsTensor view = t;
  view.info.data = moved.data();
  view.info.bytes = moved.size();
  view.info.shape = rearranged_shape(t.info.shape, m);
  return load_as_f32(view, 0.0f, scratch);
}

// One MXFP4 tensor from its HF blocks and scales (HfTensorMapping::Mxfp4).
struct Mxfp4Pair {
  const SafetensorsTensor* blocks = nullptr;
  const SafetensorsTensor* scales = nullptr;
  HfTensorMapping::Columns rows = HfTensorMapping::Columns::All;
};

// ggml's MXFP4 block (quant/types.h): the E8M0 scale byte, then qs[j] holding element j (low
// nibble) and element j + 16 (high nibble). OpenAI's checkpoints keep the same scale byte and the
// same 4-bit codes, packed two consecutive elements a byte, low nibble first.
constexpr size_t kMxfp4BlockBytes = 17;

void repack_mxfp4_block(uint8_t scale, const uint8_t* codes16, uint8_t* out) {
  uint8_t c[32];
  for (int i = 0; i < 16; ++i) {
    c[2 * i] = codes16[i] & 0x0F;
    c[2 * i + 1] = codes16[i] >> 4;
  }
  out[0] = scale;
  for (int j = 0; j < 16; ++j) out[1 + j] = uint8_t(c[j] | (c[j + 16] << 4));
}

// The GGUF shape ([in, rows kept, n_expert]) of a pair, after checking the two tensors agree.
std::vector<int64_t> mxfp4_shape(const std::string& name, const Mxfp4Pair& p) {
  if (!p.blocks || !p.scales)
    throw_error("MXFP4 tensor '{}': its {} are missing from the checkpoint", name,
                p.blocks ? "scales" : "blocks");
  const std::vector<int64_t>& b = p.blocks->info.shape;  // ne: [16, in / 32, rows, n_expert]
  const std::vector<int64_t>& s = p.scales->info.shape;  // ne: [in / 32, rows, n_expert]
  if (p.blocks->dtype != SafetensorsDtype::U8 || p.scales->dtype != SafetensorsDtype::U8 ||
      b.size() < 3 || b[0] != 16 || s.size() + 1 != b.size() ||
      !std::equal(s.begin(), s.end(), b.begin() + 1))
    throw_error("MXFP4 tensor '{}': blocks '{}' and scales '{}' are not U8 [.., rows, in / 32, 16] "
                "and [.., rows, in / 32]",
                name, p.blocks->info.name, p.scales->info.name);
  std::vector<int64_t> out(s.begin(), s.end());
  out[0] *= 32;
  if (p.rows != HfTensorMapping::Columns::All) {
    if (out[1] % 2 != 0) throw_error("MXFP4 tensor '{}': {} rows do not split in two", name, out[1]);
    out[1] /= 2;
  }
  return out;
}

std::span<const uint8_t> load_mxfp4(const Mxfp4Pair& p, std::vector<uint8_t>& scratch) {
  const std::vector<int64_t>& s = p.scales->info.shape;
  const int64_t nb = s[0], rows = s[1], outer = p.scales->info.elements() / (nb * rows);
  const bool pick = p.rows != HfTensorMapping::Columns::All;
  const int64_t first = p.rows == HfTensorMapping::Columns::Odd ? 1 : 0, step = pick ? 2 : 1;
  const int64_t kept = rows / step;
  scratch.resize(size_t(outer * kept * nb) * kMxfp4BlockBytes);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < kept; ++r) {
      const int64_t from = o * rows + first + r * step, to = o * kept + r;
      for (int64_t b = 0; b < nb; ++b)
        repack_mxfp4_block(p.scales->info.data[size_t(from * nb + b)],
                           p.blocks->info.data + size_t(from * nb + b) * 16,
                           scratch.data() + size_t(to * nb + b) * kMxfp4BlockBytes);
    }
  return {scratch.data(), scratch.size()};
}

using Runs = std::vector<std::pair<int64_t, int64_t>>;  // [first, last] ranges, sorted

// "5..9", "3, 7..8" (the first 8 runs, then "...").
std::string runs_text(const Runs& runs) {
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i == 8) return out + ", ...";
    const auto [a, b] = runs[i];
    out += (out.empty() ? "" : ", ") + (a == b ? std::to_string(a) : fmt::format("{}..{}", a, b));
  }
  return out;
}

// The checkpoint's layers against num_hidden_layers: tensors of layers past it and layers with
// no tensors below it are errors naming a tensor and the key (a config that says 5 layers over a
// 10-layer checkpoint must not load 5 and generate). A tensor missing inside a layer is named
// when the model is bound (model/weights.cpp).
void check_layers(const SafetensorsModel& weights, const nlohmann::json& config) {
  const int64_t n_layer = config_int_in(config, "num_hidden_layers", 1, kMaxHparam);
  std::map<int64_t, std::string> layers;  // index -> the first tensor name seen in it
  for (const SafetensorsTensor& t : weights.tensors()) {
    std::string index, rest;
    if (!split_layer_tensor(t.info.name, index, rest)) continue;
    if (index.size() > 9)
      throw_error("config.json: num_hidden_layers is {} but tensor '{}' has a layer index past it",
                  n_layer, t.info.name);
    layers.emplace(std::stoll(index), t.info.name);
  }
  // Runs of present layers at or past n_layer, and the gaps below it (without walking 2^30 layers).
  Runs past, missing;
  int64_t expect = 0;  // the next layer index that should exist
  for (const auto& [il, name] : layers) {
    if (il >= n_layer) {
      if (!past.empty() && past.back().second + 1 == il) past.back().second = il;
      else past.emplace_back(il, il);
      continue;
    }
    if (il > expect) missing.emplace_back(expect, il - 1);
    expect = il + 1;
  }
  if (expect < n_layer) missing.emplace_back(expect, n_layer - 1);
  auto count = [](const Runs& r) {
    int64_t n = 0;
    for (const auto& [a, b] : r) n += b - a + 1;
    return n;
  };
  if (!past.empty())
    throw_error("config.json: num_hidden_layers is {} but the checkpoint has tensors of layer{} {} "
                "('{}' is one)",
                n_layer, count(past) == 1 ? "" : "s", runs_text(past), layers[past.front().first]);
  if (!missing.empty())
    throw_error("config.json: num_hidden_layers is {} but the checkpoint has no tensors of "
                "layer{} {} (no 'model.layers.{}.*')",
                n_layer, count(missing) == 1 ? "" : "s", runs_text(missing), missing.front().first);
}

// A sentence-transformers folder says how its embeddings pool in 1_Pooling/config.json
// (pooling_mode_mean_tokens, _cls_token, _lasttoken): written as <arch>.pooling_type, as
// llama.cpp's converter does. Other modes (max, weighted mean) are refused: their vectors would
// differ from the model's.
void read_sentence_transformers_pooling(const std::string& dir, const std::string& key, Metadata& m) {
  const std::filesystem::path path = std::filesystem::path(dir) / "1_Pooling" / "config.json";
  std::ifstream in(path);
  if (!in) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw_error("{}: invalid JSON: {}", path.string(), e.what());
  }
  if (!j.is_object()) throw_error("{}: not a JSON object", path.string());
  auto on = [&](const char* mode) { return j.contains(mode) && j[mode].is_boolean() && j[mode].get<bool>(); };
  for (const char* mode : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                           "pooling_mode_weightedmean_tokens"})
    if (on(mode)) throw_error("{}: {} is not supported (mean, cls or last token)", path.string(), mode);
  if (on("pooling_mode_mean_tokens") + on("pooling_mode_cls_token") + on("pooling_mode_lasttoken") > 1)
    throw_error("{}: several pooling modes at once (concatenated vectors) are not supported", path.string());
  // Stages after the pooling (a Dense projection, LaBSE's) would change the vectors.
  if (std::ifstream modules{std::filesystem::path(dir) / "modules.json"}) {
    try {
      for (const nlohmann::json& m : nlohmann::json::parse(modules))
        if (m.is_object() && m.value("type", "").find("Dense") != std::string::npos)
          throw_error("{}/modules.json: a {} stage after pooling is not supported", dir, m.value("type", ""));
    } catch (const nlohmann::json::exception& e) {
      throw_error("{}/modules.json: invalid JSON: {}", dir, e.what());
    }
  }
  if (on("pooling_mode_mean_tokens")) m.set(key, Value::u32(1));
  else if (on("pooling_mode_cls_token")) m.set(key, Value::u32(2));
  else if (on("pooling_mode_lasttoken")) m.set(key, Value::u32(3));
  else throw_error("{}: no pooling mode is on", path.string());
}

}  // namespace

ConvertSource open_hf_source(const std::string& dir, const SourceOptions& options) {
  auto folder = std::make_shared<HfFolder>(HfFolder::open(dir));
  const nlohmann::json& config = folder->config();
  const std::string hf_arch = folder->architecture();
  const HfArchitecture* arch = find_hf_architecture(hf_arch);
  if (!arch) {
    std::string known;
    for (const auto& a : supported_hf_architectures()) known += (known.empty() ? "" : ", ") + a;
    throw_error("{}: architecture '{}' is not supported for conversion (supported: {})", dir,
                hf_arch, known);
  }

  ConvertSource s;
  s.path = dir;
  s.format = "hf";
  Metadata& m = s.metadata;
  m.set("general.architecture", Value::string(arch->gguf_arch));
  m.set("general.name", Value::string(std::filesystem::path(dir).lexically_normal().filename().string()));
  m.set("general.quantization_version", Value::u32(2));
  try {
    arch->metadata(config, m);
    read_sentence_transformers_pooling(dir, std::string(arch->gguf_arch) + ".pooling_type", m);
  } catch (const Error& e) {
    rethrow_with_context(e, dir);
  }

  // Map every stored tensor; expert slices are grouped under their stacked GGUF name.
  struct Stack {
    std::vector<const SafetensorsTensor*> experts;
  };
  std::map<std::string, Stack> stacks;
  std::vector<std::string> stack_order;
  const SafetensorsModel& weights = folder->weights();
  try {
    check_layers(weights, config);
  } catch (const Error& e) {
    rethrow_with_context(e, dir);
  }
  QuantType matrix_type = QuantType::F32;
  bool seen_matrix = false;
  std::map<std::string, Mxfp4Pair> mxfp4;
  std::vector<std::string> mxfp4_order;
  for (const SafetensorsTensor& t : weights.tensors()) {
    std::optional<HfTensorMapping> map;
    try {
      map = arch->map_tensor(t.info.name, config);
    } catch (const Error& e) {
      rethrow_with_context(e, dir);
    }
    if (!map) continue;
    if (map->mxfp4 != HfTensorMapping::Mxfp4::None) {  // joined with its other half below
      std::vector<HfTensorMapping> parts{*map};
      parts.insert(parts.end(), map->also.begin(), map->also.end());
      for (const HfTensorMapping& part : parts) {
        auto [it, added] = mxfp4.try_emplace(part.gguf_name);
        if (added) mxfp4_order.push_back(part.gguf_name);
        (part.mxfp4 == HfTensorMapping::Mxfp4::Blocks ? it->second.blocks : it->second.scales) = &t;
        it->second.rows = part.rows;
      }
      continue;
    }
    const QuantType type = float_type(t);
    if (map->columns != HfTensorMapping::Columns::All || map->transpose || map->heads > 0) {
      // gpt-oss's stacked experts and their biases, MLA's kv_b halves: each mapping its own part
      // of the tensor.
      std::vector<HfTensorMapping> parts{*map};
      parts.insert(parts.end(), map->also.begin(), map->also.end());
      for (const HfTensorMapping& part : parts) {
        if (part.columns != HfTensorMapping::Columns::All && t.info.shape[0] % 2 != 0)
          throw_error("{}: tensor '{}' has {} columns, not an even number to split", dir,
                      t.info.name, t.info.shape[0]);
        if (part.heads > 0 && (t.info.shape.size() != 2 || t.info.shape[1] % part.heads != 0 ||
                               part.head_first < 0 || part.head_rows <= 0 ||
                               part.head_first + part.head_rows > t.info.shape[1] / part.heads))
          throw_error("{}: tensor '{}' of {} rows cannot give rows [{}, {}) of each of {} heads",
                      dir, t.info.name, t.info.shape.size() > 1 ? t.info.shape[1] : 1,
                      part.head_first, part.head_first + part.head_rows, part.heads);
        SourceTensor out;
        out.name = part.gguf_name;
        out.type = part.f32 ? QuantType::F32 : type;
        out.shape = rearranged_shape(t.info.shape, part);
        if (out.shape.size() >= 2 && !part.f32 && !seen_matrix) {
          matrix_type = type;
          seen_matrix = true;
        }
        const HfTensorMapping how = part;
        if (part.f32)
          out.load = [&t, how](std::vector<uint8_t>& scratch) { return load_rearranged_f32(t, how, scratch); };
        else
          out.load = [&t, how](std::vector<uint8_t>& scratch) { return load_rearranged(t, how, scratch); };
        out.release = [&t] { drop_mapped_pages(t.info.data, t.info.bytes); };
        s.tensors.push_back(std::move(out));
      }
      continue;
    }
    if (!map->also.empty())
      throw_error("{}: tensor '{}' maps to several tensors without a rearrangement", dir, t.info.name);
    if (t.info.shape.size() >= 2 && !seen_matrix) {
      matrix_type = type;
      seen_matrix = true;
    }
    if (map->expert >= 0) {
      Stack& st = stacks[map->gguf_name];
      if (st.experts.empty()) stack_order.push_back(map->gguf_name);
      if (st.experts.size() <= size_t(map->expert)) st.experts.resize(size_t(map->expert) + 1);
      st.experts[size_t(map->expert)] = &t;
      continue;
    }
    SourceTensor out;
    out.name = map->gguf_name;
    out.type = type;
    out.shape = t.info.shape;
    if (map->squeeze) std::erase(out.shape, int64_t(1));
    if (map->plus_one || map->f32) {
      out.type = QuantType::F32;
      const float add = map->plus_one ? 1.0f : 0.0f;
      out.load = [&t, add](std::vector<uint8_t>& scratch) { return load_as_f32(t, add, scratch); };
      out.release = [&t] { drop_mapped_pages(t.info.data, t.info.bytes); };
      s.tensors.push_back(std::move(out));
      continue;
    }
    const int64_t heads = map->permute_heads;
    if (heads > 0 && (t.info.rows() % (2 * heads) != 0))
      throw_error("{}: tensor '{}' has {} rows, not a multiple of 2 x {} heads", dir, t.info.name,
                  t.info.rows(), heads);
    out.load = [&t, heads](std::vector<uint8_t>& scratch) { return load_one(t, heads, scratch); };
    out.release = [&t] { drop_mapped_pages(t.info.data, t.info.bytes); };
    s.tensors.push_back(std::move(out));
  }

  for (const std::string& name : stack_order) {
    const Stack& st = stacks[name];
    for (size_t e = 0; e < st.experts.size(); ++e) {
      if (!st.experts[e])
        throw_error("{}: expert {} of '{}' is missing from the checkpoint", dir, e, name);
      if (st.experts[e]->info.shape != st.experts[0]->info.shape ||
          st.experts[e]->dtype != st.experts[0]->dtype)
        throw_error("{}: expert {} of '{}' differs in shape or dtype from expert 0", dir, e, name);
    }
    SourceTensor out;
    out.name = name;
    out.type = float_type(*st.experts[0]);
    out.shape = st.experts[0]->info.shape;
    out.shape.push_back(int64_t(st.experts.size()));  // [.., n_expert]
    std::vector<const SafetensorsTensor*> experts = st.experts;
    out.load = [experts](std::vector<uint8_t>& scratch) {
      const size_t slice = experts[0]->info.bytes;
      scratch.resize(slice * experts.size());
      for (size_t e = 0; e < experts.size(); ++e)
        std::memcpy(scratch.data() + e * slice, experts[e]->info.data, slice);
      return std::span<const uint8_t>(scratch.data(), scratch.size());
    };
    out.release = [experts] {
      for (const auto* t : experts) drop_mapped_pages(t->info.data, t->info.bytes);
    };
    s.tensors.push_back(std::move(out));
  }

  for (const std::string& name : mxfp4_order) {
    const Mxfp4Pair pair = mxfp4[name];
    SourceTensor out;
    out.name = name;
    out.type = QuantType::MXFP4;
    try {
      out.shape = mxfp4_shape(name, pair);
    } catch (const Error& e) {
      rethrow_with_context(e, dir);
    }
    out.load = [pair](std::vector<uint8_t>& scratch) { return load_mxfp4(pair, scratch); };
    out.release = [pair] {
      drop_mapped_pages(pair.blocks->info.data, pair.blocks->info.bytes);
      drop_mapped_pages(pair.scales->info.data, pair.scales->info.bytes);
    };
    s.tensors.push_back(std::move(out));
  }

  std::vector<HfGeneratedTensor> generated;
  if (arch->generated) generated = arch->generated(config);
  for (HfGeneratedTensor& g : generated) {
    SourceTensor out;
    out.name = g.gguf_name;
    out.type = QuantType::F32;
    out.shape = {int64_t(g.values.size())};
    auto values = std::make_shared<std::vector<float>>(std::move(g.values));
    out.load = [values](std::vector<uint8_t>&) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values->data()),
                                      values->size() * sizeof(float));
    };
    s.tensors.push_back(std::move(out));
  }

  // GGUF's general.file_type for an unquantized checkpoint: the type of its matrices.
  m.set("general.file_type",
        Value::u32(matrix_type == QuantType::F16 ? 1 : matrix_type == QuantType::BF16 ? 32 : 0));

  if (!options.skip_hf_tokenizer) {
    if (!options.hf_tokenizer)
      throw_error("{}: HF tokenizer import not available in this build (the converter needs "
                  "tokenizer/hf_tokenizer.h to turn tokenizer.json / tokenizer.model into "
                  "tokenizer.ggml.* metadata)",
                  dir);
    try {
      options.hf_tokenizer(*folder, m);
      if (arch->tokenizer) arch->tokenizer(config, m);
    } catch (const Error& e) {
      rethrow_with_context(e, dir + ": tokenizer");
    }
  }

  // Chat template: tokenizer_config.json "chat_template" (a string, or a list of named templates
  // of which "default" is the one llama.cpp stores), or a chat_template.jinja file beside it.
  if (const auto& tc = folder->tokenizer_config()) {
    auto it = tc->find("chat_template");
    if (it != tc->end() && it->is_string()) {
      m.set("tokenizer.chat_template", Value::string(it->get<std::string>()));
    } else if (it != tc->end() && it->is_array()) {
      for (const auto& entry : *it)
        if (entry.is_object() && entry.value("name", "") == "default" &&
            entry.contains("template") && entry["template"].is_string())
          m.set("tokenizer.chat_template", Value::string(entry["template"].get<std::string>()));
    }
  }
  if (!m.has("tokenizer.chat_template")) {
    const auto jinja = std::filesystem::path(dir) / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) {
      std::ifstream in(jinja, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), {});
      m.set("tokenizer.chat_template", Value::string(std::move(text)));
    }
  }

  std::vector<std::string> files = weights.files();
  files.push_back((std::filesystem::path(dir) / "config.json").string());
  s.provenance = make_provenance(dir, "hf", files);
  s.source_bytes = s.provenance.get_u64("source.bytes");
  s.owner = folder;
  return s;
}

}  // namespace jitllm
