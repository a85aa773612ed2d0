// KvPagePool implementation.
#include "runtime/kv_pages.h"

#include "core/error.h"

namespace jitllm {

KvPagePool::KvPagePool(KvLayout layout, size_t max_pages)
    : layout_(layout), max_pages_(max_pages), alloc_bytes_(layout.page_bytes()) {
  if (layout_.type != QuantType::F16 && layout_.type != QuantType::F32)
    throw_error("KV cache type {} is not supported (f16 or f32)", quant_name(layout_.type));
  if (layout_.page_tokens <= 0) throw_error("KV page size must be positive");
}

uint8_t* KvPagePool::acquire() {
  // At the cap with none free: whoever holds pages it can give up (a server's cached sessions)
  // frees them.
  while (free_.empty() && max_pages_ && owned_.size() >= max_pages_ && reclaim_ && reclaim_()) {
  }
  if (!free_.empty()) {
    uint8_t* p = free_.back();
    free_.pop_back();
    return p;
  }
  if (max_pages_ && owned_.size() >= max_pages_)
    throw CapacityError(fmt::format("KV cache is full: all {} pages of {} tokens are in use",
                                    max_pages_, layout_.page_tokens));
  owned_.push_back(make_aligned<uint8_t>(alloc_bytes_, 64));
  return owned_.back().get();
}

void KvPagePool::set_page_alloc_bytes(size_t bytes) {
  if (!owned_.empty()) throw_error("KV pool: the page size cannot change once pages exist");
  if (bytes == 0 || bytes > layout_.page_bytes())
    throw_error("KV pool: {} bytes per page (1 to {})", bytes, layout_.page_bytes());
  alloc_bytes_ = bytes;
}

void KvPagePool::release(uint8_t* page) { free_.push_back(page); }

}  // namespace jitllm
