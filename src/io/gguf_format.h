// Constants of the GGUF binary layout shared by the reader and the writer (internal to io/). The
// metadata KV encoding and its limits (nesting depth, array items) are in kv_codec.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitllm::gguf {

inline constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kWriteVersion = 3;
inline constexpr size_t kDefaultAlignment = 32;
inline constexpr const char* kKeyAlignment = "general.alignment";
inline constexpr uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS
// Smallest tensor info, used to bound the tensor count by the bytes that remain before
// allocating: a name length (8) + n_dims (4) + type (4) + offset (8).
inline constexpr uint64_t kMinTensorInfoBytes = 24;

// Split models ("name-00001-of-00003.gguf"), as written by llama.cpp's gguf-split.
inline constexpr const char* kKeySplitCount = "split.count";
inline constexpr const char* kKeySplitNo = "split.no";
inline constexpr const char* kKeySplitTensorsCount = "split.tensors.count";

}  // namespace jitllm::gguf
