// KvPagePool: pages recycled through the free list, the cap, and the host page size of an engine
// whose every layer is on a card (set_page_alloc_bytes: the pages are only identities there).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/error.h"
#include "runtime/kv_pages.h"

namespace jitllm {
namespace {

KvLayout layout() {
  KvLayout l;
  l.n_layer = 4;
  l.kv_dim = 64;
  l.page_tokens = 16;
  l.type = QuantType::F16;
  return l;
}

TEST(KvPagePool, RecyclesPagesAndKeepsTheCap) {
  KvPagePool pool(layout(), 2);
  uint8_t* a = pool.acquire();
  uint8_t* b = pool.acquire();
  EXPECT_NE(a, b);
  EXPECT_THROW(pool.acquire(), CapacityError);  // the cap: 2 pages (a server answers 503)
  pool.release(a);
  EXPECT_EQ(pool.acquire(), a);
  EXPECT_EQ(pool.pages_in_use(), 2u);
  EXPECT_EQ(pool.pages_allocated(), 2u);
  EXPECT_EQ(pool.bytes_allocated(), 2 * layout().page_bytes());
}

TEST(KvPagePool, AtTheCapTheReclaimerFreesPagesFirst) {
  KvPagePool pool(layout(), 2);
  std::vector<uint8_t*> held = {pool.acquire(), pool.acquire()};
  int calls = 0;
  pool.set_reclaimer([&] {  // gives one page back per call while it holds any
    ++calls;
    if (held.empty()) return false;
    pool.release(held.back());
    held.pop_back();
    return true;
  });
  uint8_t* c = pool.acquire();
  EXPECT_EQ(calls, 1);
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(pool.pages_allocated(), 2u);
  uint8_t* d = pool.acquire();
  EXPECT_NE(d, c);
  EXPECT_EQ(calls, 2);
  EXPECT_THROW(pool.acquire(), CapacityError);  // nothing left to reclaim
  EXPECT_EQ(calls, 3);
}

TEST(KvPagePool, StubPagesAreDistinctAndSmall) {
  KvPagePool pool(layout());
  pool.set_page_alloc_bytes(64);
  std::set<uint8_t*> seen;
  for (int i = 0; i < 100; ++i) seen.insert(pool.acquire());
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(pool.bytes_allocated(), 100u * 64u);
  EXPECT_EQ(pool.pages_allocated(), 100u);
  EXPECT_THROW(pool.set_page_alloc_bytes(128), Error);  // pages exist already
}

TEST(KvPagePool, BadStubSizesAreRefused) {
  KvPagePool pool(layout());
  EXPECT_THROW(pool.set_page_alloc_bytes(0), Error);
  EXPECT_THROW(pool.set_page_alloc_bytes(layout().page_bytes() + 1), Error);
  pool.set_page_alloc_bytes(layout().page_bytes());  // the full size is allowed
}

}  // namespace
}  // namespace jitllm
