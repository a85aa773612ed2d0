// The on-disk layout of the .jlm container, shared by its writer and reader (docs/container.md
// describes it for humans). Everything is little-endian. A file is:
//
//   [0, 128)                      header (JlmHeader, fixed size)
//   [metadata_offset, +bytes)     model metadata: u64 count + GGUF key/value pairs (kv_codec.h)
//   [source_offset, +bytes)       provenance record: same encoding, keys "source.*", "convert.*"
//   [groups_offset, ...)          page group table: group_count fixed-size entries
//   [tensors_offset, ...)         tensor table: tensor_count variable-size entries
//   [data_offset, file_bytes)     page groups, each starting on a 4096-byte boundary and padded
//                                 to a multiple of 4096, so any group can be read with O_DIRECT
//
// header_checksum is XXH64 of [0, data_offset) with the checksum field itself zeroed, so a damaged
// header, table or metadata is refused at open. Tensor data has one XXH64 per tensor (per expert
// slice for split expert tensors), checked by JlmFile::verify().
//
// Bump kJlmVersion whenever anything here or the meaning of a stored layout changes; readers
// refuse older versions with a message to reconvert.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "quant/types.h"

namespace jitllm {

inline constexpr uint8_t kJlmMagic[4] = {'J', 'L', 'M', 0};
inline constexpr uint32_t kJlmVersion = 1;
inline constexpr uint32_t kJlmEndianMark = 0x01020304;  // reads as 0x04030201 on the wrong endian
inline constexpr uint64_t kJlmPageBytes = 4096;         // group alignment (O_DIRECT granularity)
inline constexpr uint64_t kJlmTensorAlignment = 64;     // tensors inside a group (a cache line)
inline constexpr size_t kJlmHeaderBytes = 128;

// Byte offsets of the header fields (JlmHeader is (de)serialized field by field, never memcpy'd
// as a struct, so padding can never leak into the format).
namespace jlm_header {
inline constexpr size_t kMagic = 0, kVersion = 4, kEndian = 8, kAlignment = 12,
                        kChecksum = 16, kFileBytes = 24, kMetadataOffset = 32,
                        kMetadataBytes = 40, kSourceOffset = 48, kSourceBytes = 56,
                        kGroupsOffset = 64, kGroupCount = 72, kTensorsOffset = 80,
                        kTensorCount = 88, kDataOffset = 96, kTensorAlignment = 104;
}  // namespace jlm_header

struct JlmHeader {
  uint32_t version = kJlmVersion;
  uint32_t alignment = uint32_t(kJlmPageBytes);
  uint64_t checksum = 0;
  uint64_t file_bytes = 0;
  uint64_t metadata_offset = 0, metadata_bytes = 0;
  uint64_t source_offset = 0, source_bytes = 0;
  uint64_t groups_offset = 0, group_count = 0;
  uint64_t tensors_offset = 0, tensor_count = 0;
  uint64_t data_offset = 0;
  uint64_t tensor_alignment = kJlmTensorAlignment;
};

// What a page group holds. Stored as u32; do not renumber.
enum class JlmGroupKind : uint32_t {
  Global = 0,     // tensors outside blocks that are not embedding or head (e.g. rope_freqs)
  Embedding = 1,  // token_embd.*, position/type embeddings
  Block = 2,      // blk.N.* except per-expert slices
  Expert = 3,     // slice E of every blk.N.*_exps.* tensor
  Head = 4,       // output_norm.*, output.*
};
const char* jlm_group_kind_name(JlmGroupKind kind);

// Group table entry: 32 bytes on disk (u32 kind, i32 block, i32 expert, u32 zero, u64 offset,
// u64 bytes).
struct JlmGroup {
  JlmGroupKind kind = JlmGroupKind::Global;
  int32_t block = -1;   // blk index for Block/Expert groups
  int32_t expert = -1;  // expert index for Expert groups
  uint64_t offset = 0;  // absolute file offset, multiple of 4096
  uint64_t bytes = 0;   // multiple of 4096 (includes padding)
};
inline constexpr size_t kJlmGroupEntryBytes = 32;

// Tensor table entry. A tensor is stored as `slice_count` equal slices along its last dimension:
// 1 for ordinary tensors, n_expert for split expert tensors, whose slice e lives in group
// `group + e` at `offset + e * slice_stride` (expert groups of a block have equal sizes, so the
// stride is constant and the stacked tensor stays viewable). On disk: string name, u32 type,
// u32 n_dims, i64 ne[n_dims], u32 group, u32 slice_count, u64 offset, u64 slice_bytes,
// u64 slice_stride, u64 checksum[slice_count].
struct JlmTensor {
  std::string name;
  QuantType type = QuantType::F32;
  std::vector<int64_t> shape;  // GGUF ne order
  uint32_t group = 0;
  uint32_t slice_count = 1;
  uint64_t offset = 0;        // absolute file offset of slice 0
  uint64_t slice_bytes = 0;   // bytes of one slice (the whole tensor when slice_count == 1)
  uint64_t slice_stride = 0;  // bytes between slices (0 when slice_count == 1)
  std::vector<uint64_t> checksums;  // XXH64 per slice

  uint64_t bytes() const { return slice_bytes * slice_count; }
};

// Where a tensor goes, by its GGUF name: "blk.N.*" -> Block N, "blk.N.*_exps.*" -> split per
// expert, "token_embd.*"/"position_embd.*"/"token_types.*" -> Embedding, "output.*" /
// "output_norm.*" -> Head, anything else -> Global. `block` is set for blk.N names.
struct JlmPlacement {
  JlmGroupKind kind = JlmGroupKind::Global;
  int32_t block = -1;
  bool split_experts = false;
};
JlmPlacement jlm_place_tensor(const std::string& name, size_t n_dims);

inline uint64_t jlm_align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace jitllm
