// Vectorized attention against the reference: bit-identical outputs for both of ggml's paths
// (one_chunk and 64-key tiles), F16 and F32 KV, GQA, head sizes 64 and 128, ragged rows whose
// KV lengths cross page and tile boundaries; the 1B model's heads (32 query, 8 KV, 64 dims) on a
// prefill batch mixing two sequences (tiles shared by blocks of rows), scores large enough for
// the softmax exponentials to underflow into subnormals, decode over 4096 positions, and two
// calls into one output buffer; sliding windows, soft-capping and attention sinks.
#include <gtest/gtest.h>

#include <algorithm>
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

// MLA's absorbed decode (DeepSeek-V2-Lite's widths): 16 query heads on one KV head of 576 whose
// first 512 values are V (v_in_k: K's rows are all there is), and V heads of their own width in a
// plane beside K (GQA, 128 / 64). Rows of several lengths, both paths, F16 and F32: bit-identical.
TEST(JitAttention, VHeadsOfTheirOwnWidthBitIdentical) {
  struct Shape {
    int n_head, n_kv, hd, hv;
    bool v_in_k;
  };
  for (const Shape sh : {Shape{16, 1, 576, 512, true}, Shape{8, 2, 128, 64, false}})
    for (QuantType kv : {QuantType::F16, QuantType::F32})
      for (bool tiles : {false, true}) {
      const int64_t n_rows = 4, page_rows = 32, max_kv = 150;
      const int k_dim = sh.n_kv * sh.hd, v_dim = sh.n_kv * sh.hv;
      const size_t esz = kv == QuantType::F16 ? 2 : 4;
      std::mt19937 rng(uint32_t(sh.hd + esz));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const int64_t n_pages = (max_kv + page_rows - 1) / page_rows;
      std::vector<std::vector<uint8_t>> pages(static_cast<size_t>(n_pages));
      std::vector<uint8_t*> ptr;
      for (auto& page : pages) {
        page.resize(size_t(page_rows) * size_t(k_dim + v_dim) * esz);
        for (size_t i = 0; i < page.size() / esz; ++i) {
          const float v = nd(rng);
          if (esz == 2) {
            const uint16_t h = f32_to_fp16(v);
            std::memcpy(page.data() + 2 * i, &h, 2);
          } else {
            std::memcpy(page.data() + 4 * i, &v, 4);
          }
        }
        ptr.push_back(page.data());
      }
      const PagedRows K{ptr.data(), page_rows, 0, size_t(k_dim) * esz};
      const PagedRows V = sh.v_in_k ? K : PagedRows{ptr.data(), page_rows, size_t(page_rows * k_dim) * esz, size_t(v_dim) * esz};
      std::vector<float> q(size_t(n_rows * sh.n_head * sh.hd));
      for (float& v : q) v = nd(rng) * 0.3f;
      std::vector<int64_t> n_kv = {1, 33, 64, max_kv};
      std::vector<PagedRows> ks(size_t(n_rows), K), vs(size_t(n_rows), V);
      AttentionArgs a;
      a.n_head = sh.n_head;
      a.n_head_kv = sh.n_kv;
      a.head_dim = sh.hd;
      a.head_dim_v = sh.hv;
      a.v_in_k = sh.v_in_k;
      a.scale = 0.07f;
      a.kv_type = kv;
      a.n_rows = n_rows;
      a.q = q.data();
      a.n_kv = n_kv.data();
      a.k = ks.data();
      a.v = vs.data();
      a.f32_tiles = tiles;
      std::vector<float> ref(size_t(n_rows * sh.n_head * sh.hv)), got(ref.size(), -7.0f);
      a.out = ref.data();
      reference_kernels().attention(a);
      a.out = got.data();
      jit_kernels().attention(a);
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_EQ(ref[i], got[i]) << quant_name(kv) << " " << sh.hd << "/" << sh.hv
                                  << (tiles ? " tiles" : " one_chunk") << " at " << i;
    }
}

TEST(JitAttention, BitIdenticalToReference) {
  for (QuantType kv : {QuantType::F16, QuantType::F32})
    for (int hd : {64, 128})
      for (bool tiles : {false, true}) check(kv, hd, tiles, uint32_t(hd + tiles));
}

// One sequence's K and V, `n` positions of kv_dim values each, in pages of `page_rows`.
struct SeqKv {
  std::vector<std::vector<uint8_t>> kp, vp;
  std::vector<uint8_t*> kptr, vptr;
  PagedRows K, V;
  SeqKv(QuantType kv, int64_t n, int64_t page_rows, int kv_dim, std::mt19937& rng) {
    const size_t esz = kv == QuantType::F16 ? 2 : 4;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t n_pages = (n + page_rows - 1) / page_rows;
    for (int64_t p = 0; p < n_pages; ++p)
      for (auto* pages : {&kp, &vp}) {
        pages->emplace_back(size_t(page_rows) * size_t(kv_dim) * esz);
        auto& page = pages->back();
        for (size_t i = 0; i < page.size() / esz; ++i) {
          const float v = nd(rng);
          if (esz == 2) {
            const uint16_t hv = f32_to_fp16(v);
            std::memcpy(page.data() + 2 * i, &hv, 2);
          } else {
            std::memcpy(page.data() + 4 * i, &v, 4);
          }
        }
      }
    for (auto& p : kp) kptr.push_back(p.data());
    for (auto& p : vp) vptr.push_back(p.data());
    K = PagedRows{kptr.data(), page_rows, 0, size_t(kv_dim) * esz};
    V = PagedRows{vptr.data(), page_rows, 0, size_t(kv_dim) * esz};
  }
};

// Attention of one (row, head) in double over keys [start, n_kv) of F32 K/V: the definition a
// sliding window, soft-capping and a sink (one more logit in the denominator, no value) must
// meet, independent of ggml's arithmetic.
std::vector<double> naive_head(const float* q, const PagedRows& K, const PagedRows& V, int kvh,
                               int hd, int64_t start, int64_t n_kv, double scale, double cap,
                               const float* sink) {
  std::vector<double> s;
  double m = -INFINITY;
  for (int64_t j = start; j < n_kv; ++j) {
    const float* k = reinterpret_cast<const float*>(K.row(j)) + kvh * hd;
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * k[i];
    d *= scale;
    if (cap > 0) d = cap * std::tanh(d / cap);
    s.push_back(d);
    m = std::max(m, d);
  }
  std::vector<double> out(size_t(hd), 0.0);
  double sum = 0;
  for (int64_t j = start; j < n_kv; ++j) {
    const double p = std::exp(s[size_t(j - start)] - m);
    sum += p;
    const float* v = reinterpret_cast<const float*>(V.row(j)) + kvh * hd;
    for (int i = 0; i < hd; ++i) out[size_t(i)] += p * v[i];
  }
  if (sink) sum += std::exp(double(*sink) - m);
  for (double& x : out) x /= sum;
  return out;
}

void check_1b(QuantType kv, bool tiles, const std::vector<std::pair<int, int64_t>>& rows_spec,
              float q_scale, uint32_t seed, int n_head_kv = 8, int64_t window = 0,
              float softcap = 0.0f, bool sinks = false) {
  const int n_head = 32, hd = 64;
  std::mt19937 rng(seed);
  // rows_spec: (sequence 0 or 1, position) per query row; causal: n_kv = position + 1.
  int64_t max_pos[2] = {0, 0};
  for (const auto& [seq, pos] : rows_spec) max_pos[seq] = std::max(max_pos[seq], pos);
  SeqKv s0(kv, max_pos[0] + 1, 256, n_head_kv * hd, rng), s1(kv, max_pos[1] + 1, 100, n_head_kv * hd, rng);
  const int64_t n_rows = int64_t(rows_spec.size());
  std::vector<PagedRows> ks, vs;
  std::vector<int64_t> n_kv, start;
  for (const auto& [seq, pos] : rows_spec) {
    ks.push_back(seq == 0 ? s0.K : s1.K);
    vs.push_back(seq == 0 ? s0.V : s1.V);
    n_kv.push_back(pos + 1);
    start.push_back(window > 0 ? std::max<int64_t>(0, pos + 1 - window) : 0);
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(size_t(n_rows) * n_head * hd);
  for (size_t i = 0; i < q.size(); ++i) q[i] = nd(rng) * ((i / hd) % 4 == 0 ? q_scale : 1.0f);
  AttentionArgs a;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = hd;
  a.scale = 0.125f;
  a.kv_type = kv;
  a.n_rows = n_rows;
  a.q = q.data();
  a.n_kv = n_kv.data();
  a.k = ks.data();
  a.v = vs.data();
  a.f32_tiles = tiles;
  a.kv_start = window > 0 ? start.data() : nullptr;
  a.softcap = softcap;
  // Sinks from well below to well above the scores (the largest ones rescale what came before).
  std::vector<float> sink(static_cast<size_t>(n_head));
  for (int h = 0; h < n_head; ++h) sink[size_t(h)] = float(h % 8) * 1.5f - 3.0f;
  if (sinks) a.sinks = sink.data();
  std::vector<float> ref(q.size()), got(q.size(), -7.0f);
  a.out = ref.data();
  reference_kernels().attention(a);
  if (kv == QuantType::F32 && (window > 0 || softcap > 0.0f || sinks))  // the reference means what it says
    for (int64_t r = 0; r < n_rows; ++r)
      for (int h = 0; h < n_head; ++h) {
        const std::vector<double> want =
            naive_head(q.data() + (r * n_head + h) * hd, ks[size_t(r)], vs[size_t(r)],
                       h / (n_head / n_head_kv), hd, start[size_t(r)], n_kv[size_t(r)], a.scale, softcap,
                       sinks ? &sink[size_t(h)] : nullptr);
        for (int i = 0; i < hd; ++i)
          ASSERT_NEAR(ref[size_t((r * n_head + h) * hd + i)], want[size_t(i)], 2e-5)
              << "window " << window << " cap " << softcap << " row " << r << " head " << h;
      }
  for (int call = 0; call < 2; ++call) {  // the second call writes over the first's output
    a.out = got.data();
    jit_kernels().attention(a);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(std::memcmp(&ref[i], &got[i], 4), 0)
          << quant_name(kv) << " tiles " << tiles << " call " << call << " at " << i
          << " (row " << i / (n_head * hd) << "): ref " << ref[i] << " got " << got[i];
  }
}

// A prefill batch of 150 rows: sequence 0 at positions 0..99 split around 50 rows of sequence 1
// at positions 10..59, so blocks of rows break at every change of sequence; some heads' queries
// scaled up so that exp(score - max) underflows.
TEST(JitAttention, PrefillTwoSequencesBitIdentical) {
  std::vector<std::pair<int, int64_t>> rows;
  for (int64_t p = 0; p < 40; ++p) rows.push_back({0, p});
  for (int64_t p = 10; p < 60; ++p) rows.push_back({1, p});
  for (int64_t p = 40; p < 100; ++p) rows.push_back({0, p});
  for (QuantType kv : {QuantType::F16, QuantType::F32}) {
    check_1b(kv, true, rows, 1.0f, 11);
    check_1b(kv, true, rows, 40.0f, 12);  // scores of several hundred: subnormal exponentials
  }
}

// Decode (one_chunk path) at the end of a 4096-position context and a short one; GQA groups of
// 4, 16 and 32 query heads.
TEST(JitAttention, DecodeLongContextBitIdentical) {
  for (QuantType kv : {QuantType::F16, QuantType::F32}) {
    check_1b(kv, false, {{0, 4095}}, 1.0f, 21);
    check_1b(kv, false, {{0, 4095}, {1, 3}}, 3.0f, 22);
    // One KV head (and two): a single (row, KV head) pair, so its group is split across threads.
    check_1b(kv, false, {{0, 700}}, 1.0f, 23, 1);
    check_1b(kv, false, {{0, 300}}, 1.0f, 24, 2);
    check_1b(kv, true, {{0, 70}, {0, 71}}, 1.0f, 25, 1);
  }
}

// Sliding windows (Mistral, Gemma 2/3) and soft-capped scores (Gemma 2): the reference against the
// definition in double, the generated kernels bit-identical to the reference, on both paths;
// windows that start inside a tile, on a tile boundary and past whole tiles, rows of one block
// with different starts, and a window wider than the context.
TEST(JitAttention, SlidingWindowAndSoftcapBitIdentical) {
  std::vector<std::pair<int, int64_t>> prefill;
  for (int64_t p = 0; p < 150; ++p) prefill.push_back({0, p});
  for (int64_t p = 0; p < 30; ++p) prefill.push_back({1, p});
  for (QuantType kv : {QuantType::F32, QuantType::F16}) {
    for (const int64_t window : {int64_t(24), int64_t(64), int64_t(100), int64_t(4096)}) {
      check_1b(kv, true, prefill, 1.0f, 31, 8, window);
      check_1b(kv, false, {{0, 700}, {1, 23}, {1, 24}, {0, 63}}, 1.0f, 32, 4, window);
    }
    check_1b(kv, true, prefill, 4.0f, 33, 8, 0, 5.0f);
    check_1b(kv, false, {{0, 300}, {1, 40}}, 4.0f, 34, 8, 0, 5.0f);
    check_1b(kv, true, prefill, 4.0f, 35, 8, 24, 5.0f);
  }
}

// Attention sinks (gpt-oss): the reference against the definition in double, the generated
// kernels bit-identical to it, on both paths, with and without a sliding window (gpt-oss's
// sliding layers have both), with GQA groups of 4 and 8.
TEST(JitAttention, SinksBitIdentical) {
  std::vector<std::pair<int, int64_t>> prefill;
  for (int64_t p = 0; p < 150; ++p) prefill.push_back({0, p});
  for (int64_t p = 0; p < 30; ++p) prefill.push_back({1, p});
  for (QuantType kv : {QuantType::F32, QuantType::F16}) {
    check_1b(kv, true, prefill, 1.0f, 41, 8, 0, 0.0f, true);
    check_1b(kv, true, prefill, 1.0f, 42, 4, 64, 0.0f, true);
    check_1b(kv, false, {{0, 700}, {1, 23}, {1, 0}, {0, 63}}, 1.0f, 43, 8, 0, 0.0f, true);
    check_1b(kv, false, {{0, 700}, {1, 23}}, 3.0f, 44, 4, 128, 0.0f, true);
  }
}

}  // namespace
}  // namespace jitllm
