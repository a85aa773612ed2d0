// KvPagePool: fixed-size KV pages (KvLayout::page_bytes(): page_tokens positions of one sequence,
// every layer, K and V) handed to sessions as their context grows and returned when they are
// cleared or destroyed. Pages are recycled through a free list; an optional cap bounds memory.
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"
#include "model/ops.h"

namespace jitllm {

class KvPagePool {
 public:
  // max_pages == 0: no cap.
  explicit KvPagePool(KvLayout layout, size_t max_pages = 0);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvLayout& layout() const { return layout_; }
  // A page (contents undefined); throws jitllm::Error when the cap is reached.
  uint8_t* acquire();
  void release(uint8_t* page);
  size_t pages_in_use() const { return owned_.size() - free_.size(); }
  size_t max_pages() const { return max_pages_; }  // 0: no cap
  size_t bytes_allocated() const { return owned_.size() * layout_.page_bytes(); }

 private:
  KvLayout layout_;
  size_t max_pages_;
  std::vector<AlignedPtr<uint8_t>> owned_;
  std::vector<uint8_t*> free_;
};

}  // namespace jitllm
