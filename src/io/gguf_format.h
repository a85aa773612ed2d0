// Constants of the GGUF binary layout shared by the reader and the writer (internal to io/).
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/metadata.h"

namespace jitllm::gguf {

inline constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kWriteVersion = 3;
inline constexpr size_t kDefaultAlignment = 32;
inline constexpr const char* kKeyAlignment = "general.alignment";
inline constexpr uint32_t kMaxDims = 4;      // ggml's GGML_MAX_DIMS
inline constexpr int kMaxArrayDepth = 8;     // nested arrays deeper than this are refused
// Metadata array items per file, all arrays together. A 262k-token vocabulary with scores, types
// and merges is ~1M; the cap keeps a hostile file's u8 array from becoming 48 bytes per byte.
inline constexpr uint64_t kMaxArrayItems = uint64_t(1) << 24;
// Smallest encodings, used to bound counts by the bytes that remain before allocating:
// a KV is a key length (8) + type (4) + at least one value byte; a tensor info is a name length
// (8) + n_dims (4) + type (4) + offset (8).
inline constexpr uint64_t kMinKvBytes = 13;
inline constexpr uint64_t kMinTensorInfoBytes = 24;

// Split models ("name-00001-of-00003.gguf"), as written by llama.cpp's gguf-split.
inline constexpr const char* kKeySplitCount = "split.count";
inline constexpr const char* kKeySplitNo = "split.no";
inline constexpr const char* kKeySplitTensorsCount = "split.tensors.count";

// Bytes a single value of `type` takes at the least (its exact size for fixed-size types).
inline size_t min_encoded_bytes(ValueType type) {
  switch (type) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: return 8;   // length
    case ValueType::Array: return 12;   // element type + length
  }
  return 1;
}

}  // namespace jitllm::gguf
