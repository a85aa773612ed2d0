// KvPagePool: fixed-size KV pages (KvLayout::page_bytes(): page_tokens positions of one sequence,
// every layer, K and V) handed to sessions as their context grows and returned when they are
// cleared or destroyed. Pages are recycled through a free list; an optional cap bounds memory.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/aligned_buffer.h"
#include "graph/ops.h"

namespace jitllm {

class KvPagePool {
 public:
  // max_pages == 0: no cap.
  explicit KvPagePool(KvLayout layout, size_t max_pages = 0);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvLayout& layout() const { return layout_; }
  // Bytes each page takes in host memory from now on, before the first acquire(): a host that
  // keeps no layer's KV (every layer on a card, whose copies of the pages hold the KV) needs the
  // pages only as distinct addresses, not layout().page_bytes() of memory each.
  void set_page_alloc_bytes(size_t bytes);
  size_t page_alloc_bytes() const { return alloc_bytes_; }
  // A page (contents undefined); throws jitllm::CapacityError when the cap is reached and the
  // reclaimer frees nothing.
  uint8_t* acquire();
  // Called at the cap before acquire() gives up, until it returns false: frees pages held by
  // someone who can do without them (a server's cached sessions). Empty: none.
  void set_reclaimer(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }
  void release(uint8_t* page);
  size_t pages_in_use() const { return owned_.size() - free_.size(); }
  size_t max_pages() const { return max_pages_; }  // 0: no cap
  size_t bytes_allocated() const { return owned_.size() * alloc_bytes_; }  // host memory
  size_t pages_allocated() const { return owned_.size(); }

 private:
  KvLayout layout_;
  size_t max_pages_;
  size_t alloc_bytes_;
  std::vector<AlignedPtr<uint8_t>> owned_;
  std::vector<uint8_t*> free_;
  std::function<bool()> reclaim_;
};

}  // namespace jitllm
