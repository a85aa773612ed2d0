// HugeBuffer: an anonymous, 2 MiB-aligned allocation asked to live in transparent huge pages
// (madvise(MADV_HUGEPAGE)), for data streamed once per step at memory speed (decode weights):
// with 4 KiB pages every 4 KiB of a 1 GB stream is a TLB miss (what the pages gave on the dev box:
// docs/perf/cpu.md, the repacked decode). The box's THP mode may be `madvise` (then the advice is
// what makes the pages huge) or `always`; the advice is harmless where THP is off. Must not be
// used for small buffers (it rounds up to 2 MiB). JITLLM_NOHUGE=1 skips the advice (a machine
// where huge pages cost more than they give, or to measure what they give).
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitllm {

class HugeBuffer {
 public:
  static constexpr size_t kHugePage = size_t(2) << 20;

  HugeBuffer() = default;
  // `bytes` of zeroed memory, 2 MiB aligned. Throws jitllm::Error when the mapping fails.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // bytes asked for
  // Bytes of this buffer the kernel backs with huge pages now (from /proc/self/smaps; -1 when
  // that cannot be read). For tests and reports.
  int64_t huge_bytes() const;

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // the mapping's length (size_ rounded up to 2 MiB)
};

}  // namespace jitllm
