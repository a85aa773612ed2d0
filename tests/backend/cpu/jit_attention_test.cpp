// Vectorized attention against the reference: bit-identical outputs for both of ggml's paths
// (one_chunk and 64-key tiles), F16 and F32 KV, GQA, head sizes 64 and 128, ragged rows whose
// KV lengths cross page and tile boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "core/fp16.h"

namespace jitllm {
namespace {

void check(QuantType kv, int head_dim, bool tiles, uint32_t seed) {
  const int n_head = 8, n_head_kv = 2;
  const int64_t n_rows = 5, page_rows = 48, max_kv = 200;
  const int kv_dim = n_head_kv * head_dim;
  const size_t esz = kv == QuantType::F16 ? 2 : 4;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // One sequence's K and V pages.
  const int64_t n_pages = (max_kv + page_rows - 1) / page_rows;
  std::vector<std::vector<uint8_t>> kp{static_cast<size_t>(n_pages)}, vp{static_cast<size_t>(n_pages)};
  std::vector<uint8_t*> kptr, vptr;
  for (int64_t p = 0; p < n_pages; ++p) {
    for (auto* pages : {&kp, &vp}) {
      auto& page = (*pages)[size_t(p)];
      page.resize(size_t(page_rows) * kv_dim * esz);
      for (size_t i = 0; i < page.size() / esz; ++i) {
        const float v = nd(rng) * 2.0f;
        if (esz == 2) {
          const uint16_t hv = f32_to_fp16(v);
          std::memcpy(page.data() + 2 * i, &hv, 2);
        } else {
          std::memcpy(page.data() + 4 * i, &v, 4);
        }
      }
    }
    kptr.push_back(kp[size_t(p)].data());
    vptr.push_back(vp[size_t(p)].data());
  }
  PagedRows K{kptr.data(), page_rows, 0, size_t(kv_dim) * esz};
  PagedRows V{vptr.data(), page_rows, 0, size_t(kv_dim) * esz};
  std::vector<float> q(size_t(n_rows) * n_head * head_dim);
  for (float& v : q) v = nd(rng);
  std::vector<int64_t> n_kv = {1, 7, 64, 65, max_kv};
  std::vector<PagedRows> ks(size_t(n_rows), K), vs(size_t(n_rows), V);
  AttentionArgs a;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = head_dim;
  a.scale = 1.0f / std::sqrt(float(head_dim));
  a.kv_type = kv;
  a.n_rows = n_rows;
  a.q = q.data();
  a.n_kv = n_kv.data();
  a.k = ks.data();
  a.v = vs.data();
  a.f32_tiles = tiles;
  std::vector<float> ref(q.size()), got(q.size(), -7.0f);
  a.out = ref.data();
  reference_kernels().attention(a);
  a.out = got.data();
  jit_kernels().attention(a);
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(ref[i], got[i]) << quant_name(kv) << " hd " << head_dim << " tiles " << tiles
                              << " at " << i;
}

TEST(JitAttention, BitIdenticalToReference) {
  for (QuantType kv : {QuantType::F16, QuantType::F32})
    for (int hd : {64, 128})
      for (bool tiles : {false, true}) check(kv, hd, tiles, uint32_t(hd + tiles));
}

}  // namespace
}  // namespace jitllm
