// A read-only memory map of a whole file. Model readers hand out views into it, so tensors are
// never copied at load; the kernel pages them in on first touch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace jitllm {

class MappedFile {
 public:
  // Throws jitllm::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Asks the kernel to take back the resident pages wholly inside [p, p + bytes) (madvise
// MADV_PAGEOUT): a mapped file's pages are read again if touched later, anonymous memory is kept
// or swapped, never lost, so this is safe on any memory. For weights whose decode copy replaced
// them (backend/cpu/cpu_ops.cpp): the process then holds one copy. False when the kernel refused.
bool release_resident_pages(const void* p, size_t bytes);

}  // namespace jitllm
