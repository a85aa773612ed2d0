// HugeBuffer: mmap a little more than asked, trim to a 2 MiB-aligned range, advise huge pages.
#include "core/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/tuning.h"

namespace jitllm {

HugeBuffer::HugeBuffer(size_t bytes) {
  if (bytes == 0) return;
  const size_t len = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Map one extra huge page so a 2 MiB-aligned start exists inside, then unmap the slack.
  void* p = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED)
    throw_error("huge buffer: mmap of {} bytes failed: {}", len + kHugePage, std::strerror(errno));
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) munmap(p, start - base);
  const uintptr_t end = start + len, map_end = base + len + kHugePage;
  if (map_end > end) munmap(reinterpret_cast<void*>(end), map_end - end);
  data_ = reinterpret_cast<uint8_t*>(start);
  size_ = bytes;
  mapped_ = len;
#ifdef MADV_HUGEPAGE
  // Advice only: small pages still work.
  if (!tuning::core_knobs().nohuge.on()) madvise(data_, mapped_, MADV_HUGEPAGE);
#endif
}

HugeBuffer::~HugeBuffer() { release(); }

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

void HugeBuffer::release() {
  if (data_) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

int64_t HugeBuffer::huge_bytes() const {
  if (!data_) return 0;
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data_), hi = lo + mapped_;
  char line[512];
  bool inside = false;
  int64_t kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line, "%lx-%lx ", &a, &b) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
      inside = a < hi && b > lo;  // a mapping line: does it overlap this buffer?
      continue;
    }
    long v = 0;
    if (inside && std::sscanf(line, "AnonHugePages: %ld kB", &v) == 1) kb += v;
  }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace jitllm
