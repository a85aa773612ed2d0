// PrefixCache: longest match wins, the minimum is honoured, a taken session leaves the cache,
// the bound evicts the least recently used.
#include "server/prefix_cache.h"

#include <gtest/gtest.h>

#include "graph/ops.h"

namespace jitllm::server {
namespace {

KvLayout tiny_layout() {
  KvLayout l;
  l.n_layer = 1;
  l.kv_dim = 4;
  l.page_tokens = 4;
  l.type = QuantType::F32;
  return l;
}

std::unique_ptr<Session> session_with(KvPagePool& pool, std::vector<int32_t> tokens) {
  auto s = std::make_unique<Session>(pool, 64);
  s->reserve(int64_t(tokens.size()));
  s->append(tokens.data(), int64_t(tokens.size()));
  return s;
}

TEST(PrefixCache, TakesTheLongestMatch) {
  KvPagePool pool(tiny_layout());
  PrefixCache cache(4);
  cache.put(session_with(pool, {1, 2, 3}));
  cache.put(session_with(pool, {1, 2, 3, 4, 5, 6}));
  cache.put(session_with(pool, {1, 9}));
  const std::vector<int32_t> q = {1, 2, 3, 4, 7};
  auto m = cache.take_longest(q, 2);
  ASSERT_TRUE(m.session);
  EXPECT_EQ(m.common, 4);
  EXPECT_EQ(m.session->position(), 6);
  EXPECT_EQ(cache.size(), 2u);
  // Only the BOS in common: below the minimum, nothing is taken.
  const std::vector<int32_t> other = {1, 5, 5};
  EXPECT_FALSE(cache.take_longest(other, 2).session);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedAndFreesPages) {
  KvPagePool pool(tiny_layout());
  PrefixCache cache(2);
  cache.put(session_with(pool, {1, 2, 3, 4, 5}));  // 2 pages
  cache.put(session_with(pool, {1, 3}));           // 1 page
  EXPECT_EQ(pool.pages_in_use(), 3u);
  cache.put(session_with(pool, {1, 4}));           // evicts {1,2,3,4,5}
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(pool.pages_in_use(), 2u);
  const std::vector<int32_t> q = {1, 2, 3};
  EXPECT_FALSE(cache.take_longest(q, 2).session);
  EXPECT_TRUE(cache.evict_one());
  EXPECT_TRUE(cache.evict_one());
  EXPECT_FALSE(cache.evict_one());
  EXPECT_EQ(pool.pages_in_use(), 0u);
}

}  // namespace
}  // namespace jitllm::server
