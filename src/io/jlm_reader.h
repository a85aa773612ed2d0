// Reads a .jlm container (layout in jlm_format.h). open() validates the header (magic, endianness,
// version — an older container is refused with a message to reconvert), the header checksum, and
// every table entry against the file (groups page-aligned and inside the data section, each tensor
// slice inside its group, sizes matching type and shape), so later views never leave the file.
// Two ways to the data:
//   - views into a memory map (tensor_infos(), for normal loading: the kernel pages them in), and
//   - read_group(): one page group into a caller's 4096-aligned buffer with O_DIRECT (no page
//     cache; falls back to buffered pread where the filesystem refuses O_DIRECT), for placing or
//     evicting a block or an expert alone.
// Either way tensor data is checked against its XXH64 on its first read: check_data() for the
// map (the engine's load path calls it), read_group() for each group it reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io/jlm_format.h"
#include "io/metadata.h"
#include "io/tensor_info.h"

namespace jitllm {

struct JlmChecksumFailure {
  std::string tensor;
  uint32_t slice = 0;  // expert index for split tensors
  uint64_t expected = 0;
  uint64_t actual = 0;
};

class JlmFile {
 public:
  static JlmFile open(const std::string& path);

  const std::string& path() const;
  uint32_t version() const;
  uint64_t file_bytes() const;
  uint64_t data_offset() const;
  const Metadata& metadata() const;
  // Provenance: "source.path", "source.format", "source.bytes", "source.mtime_ns",
  // "source.fingerprint", "convert.type", "convert.tool".
  const Metadata& source() const;
  const std::vector<JlmGroup>& groups() const;
  const std::vector<JlmTensor>& tensors() const;
  const JlmTensor* find(const std::string& name) const;

  // Mapped bytes of slice `slice` of `tensor` (slice 0 for ordinary tensors).
  const uint8_t* slice_data(const JlmTensor& tensor, uint32_t slice = 0) const;
  // Every tensor as a TensorInfo viewing the map. A split expert tensor has `data` at slice 0 and
  // `slice_stride` set (slice e at data + e * slice_stride). `offset` is the absolute file offset.
  std::vector<TensorInfo> tensor_infos() const;
  // Keeps the mapping alive (for ModelFile::owner).
  std::shared_ptr<const void> owner() const;

  // Recomputes every slice's XXH64 from the map; returns the mismatches (empty = intact), in
  // table order. Hashed on up to `max_threads` threads, one per `min_bytes_per_thread` of data
  // (XXH64 runs at several GB/s a core: the read of the pages, not the hash, sets the time).
  // `which`: every slice, all but the split MoE experts' (checked later, or as each is paged
  // in), or only those.
  enum class Slices { All, Dense, Experts };
  std::vector<JlmChecksumFailure> verify(int max_threads = 8,
                                         uint64_t min_bytes_per_thread = uint64_t(64) << 20,
                                         Slices which = Slices::All) const;
  // verify(), throwing a jitllm::Error that names the first damaged tensor, how many slices are
  // damaged and what to do. The engine's load path calls it (runtime/model_loader.cpp), so
  // damaged data is refused on its first read instead of being computed with.
  void check_data(Slices which = Slices::All) const;

  // Reads group `id` (groups()[id].bytes bytes) into `buffer`, which must be 4096-byte aligned
  // and hold at least that many bytes, and checks the checksums of its slices (verify = false:
  // the bytes as they are, for tools that inspect damage). Throws naming the damaged tensor.
  // Thread-safe.
  void read_group(uint32_t id, uint8_t* buffer, size_t capacity, bool verify = true) const;
  // Checks the checksums of the tensor slices of group `id` inside a buffer read by read_group.
  std::vector<JlmChecksumFailure> verify_group(uint32_t id, const uint8_t* buffer) const;
  // True once a read_group went through O_DIRECT; false before, or after a fallback to pread.
  bool direct_io() const;

 struct State;  // implementation detail (jlm_reader.cpp)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace jitllm
