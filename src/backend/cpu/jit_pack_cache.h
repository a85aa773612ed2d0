// The last packed activation of one kind on this thread, shared by every matmul dispatcher.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"

namespace jitllm::jit {

// Matmuls that read the same floats (q/k/v share their input, so do gate/up) reuse the packed
// activation instead of quantizing it again: comparing the floats costs less than packing them.
// Each dispatcher keeps its own thread_local PackCache (one per packing family where several
// families alternate within a step).
class PackCache {
 public:
  // The packed bytes of x ([n, k] floats) for `family` (whatever distinguishes one packing from
  // another: format, ISA, ...). pack(dst) fills `bytes` bytes at dst, and is called only when
  // the previous call on this cache had another family, shape or floats.
  template <class Pack>
  const uint8_t* get(int family, const float* x, int64_t k, int64_t n, size_t bytes,
                     Pack&& pack) {
    const size_t floats = size_t(n) * size_t(k);
    if (valid_ && family_ == family && k_ == k && n_ == n &&
        std::memcmp(x_.data(), x, floats * sizeof(float)) == 0)
      return buf_.get();
    if (bytes > cap_) {
      cap_ = std::max(bytes, cap_ * 2);
      buf_ = make_aligned<uint8_t>(cap_, 64);
    }
    valid_ = false;  // until packed (pack may throw)
    pack(buf_.get());
    x_.assign(x, x + floats);
    family_ = family;
    k_ = k;
    n_ = n;
    valid_ = true;
    return buf_.get();
  }

 private:
  bool valid_ = false;
  int family_ = 0;
  int64_t k_ = 0, n_ = 0;
  std::vector<float> x_;  // [n, k] the floats last packed
  AlignedPtr<uint8_t> buf_;
  size_t cap_ = 0;
};

}  // namespace jitllm::jit
