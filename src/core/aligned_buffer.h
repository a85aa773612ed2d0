// Heap buffers aligned for SIMD loads and O_DIRECT reads (default 4 KiB, the container's page).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <new>

namespace jitllm {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
using AlignedPtr = std::unique_ptr<T[], AlignedFree>;

// Allocates `count` elements of T aligned to `alignment` bytes (zero-filled). Throws std::bad_alloc.
template <typename T>
AlignedPtr<T> make_aligned(size_t count, size_t alignment = 4096) {
  size_t bytes = count * sizeof(T);
  bytes = (bytes + alignment - 1) / alignment * alignment;
  if (bytes == 0) bytes = alignment;
  void* p = std::aligned_alloc(alignment, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return AlignedPtr<T>(static_cast<T*>(p));
}

}  // namespace jitllm
