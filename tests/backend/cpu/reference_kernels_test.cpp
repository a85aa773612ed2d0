// Reference kernels against plain double-precision math written independently here: matmul
// (F32, F16 and a quantized format via dequantize), RMSNorm, RoPE (normal and NeoX, partial
// rotary), SwiGLU, and causal GQA attention over paged K/V in both of ggml's paths and both KV
// types, including ragged rows of different sequences, and V heads of their own width (MLA).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "backend/cpu/reference_kernels.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

const CpuKernels& K() { return reference_kernels(); }

TEST(ReferenceKernels, MatmulMatchesDoubleMath) {
  const int64_t rows = 37, k = 96, n = 5;
  const auto w = randn(size_t(rows * k), 1), x = randn(size_t(n * k), 2);
  std::vector<float> out(size_t(n * rows));
  for (int64_t nn : {int64_t(1), n}) {  // one-row (vec order) and several rows (gemm order)
    K().matmul(QuantType::F32, reinterpret_cast<const uint8_t*>(w.data()), rows, k, x.data(), nn,
               out.data());
    for (int64_t t = 0; t < nn; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double want = 0;
        for (int64_t i = 0; i < k; ++i) want += double(w[r * k + i]) * x[t * k + i];
        EXPECT_NEAR(out[t * rows + r], want, 1e-4) << t << "," << r;
      }
  }
  // F16 weights: the activation is rounded to F16 first (llama.cpp's vec_dot_type).
  std::vector<uint16_t> w16(w.size());
  for (size_t i = 0; i < w.size(); ++i) w16[i] = f32_to_fp16(w[i]);
  K().matmul(QuantType::F16, reinterpret_cast<const uint8_t*>(w16.data()), rows, k, x.data(), n,
             out.data());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0;
      for (int64_t i = 0; i < k; ++i)
        want += double(fp16_to_f32(w16[r * k + i])) * fp16_to_f32(f32_to_fp16(x[t * k + i]));
      EXPECT_NEAR(out[t * rows + r], want, 1e-4);
    }
  // Q8_0: the activation is converted to Q8_0 blocks first; the result is the exact product of
  // the dequantized weights and the dequantized activation (up to f32 accumulation).
  std::vector<uint8_t> wq(row_bytes(QuantType::Q8_0, k) * rows);
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(QuantType::Q8_0, w.data() + r * k, wq.data() + r * row_bytes(QuantType::Q8_0, k), k);
  K().matmul(QuantType::Q8_0, wq.data(), rows, k, x.data(), n, out.data());
  std::vector<float> deq(static_cast<size_t>(k)), xq(static_cast<size_t>(n * k));
  std::vector<uint8_t> act(row_bytes(QuantType::Q8_0, k));
  for (int64_t t = 0; t < n; ++t) {
    quantize_activation(QuantType::Q8_0, x.data() + t * k, act.data(), k);
    dequantize_row(QuantType::Q8_0, act.data(), xq.data() + t * k, k);
  }
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(QuantType::Q8_0, wq.data() + r * row_bytes(QuantType::Q8_0, k), deq.data(), k);
    for (int64_t t = 0; t < n; ++t) {
      double want = 0;
      for (int64_t i = 0; i < k; ++i) want += double(deq[i]) * xq[t * k + i];
      EXPECT_NEAR(out[t * rows + r], want, 1e-4 * (1 + std::fabs(want)));
    }
  }
}

TEST(ReferenceKernels, RmsNormAndSwiglu) {
  const int64_t n = 3, dim = 40;
  const auto x = randn(size_t(n * dim), 3), w = randn(size_t(dim), 4);
  std::vector<float> y(x.size());
  K().rms_norm(x.data(), w.data(), n, dim, 1e-5f, y.data());
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
    const double s = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(y[t * dim + i], x[t * dim + i] * s * w[i], 1e-5);
  }
  std::vector<float> out(x.size());
  K().swiglu(x.data(), y.data(), out.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(out[i], x[i] / (1 + std::exp(-double(x[i]))) * y[i], 1e-5);
}

TEST(ReferenceKernels, RopeNormalNeoxAndPartial) {
  const int heads = 2, hd = 16;
  const std::vector<int32_t> pos = {0, 7, 300};
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox})
    for (int n_rot : {16, 8}) {
      auto x = randn(size_t(3 * heads * hd), 5);
      const auto orig = x;
      RopeParams p;
      p.n_rot = n_rot;
      p.mode = mode;
      p.freq_base = 10000.0f;
      K().rope(x.data(), 3, heads, hd, pos.data(), p);
      for (int t = 0; t < 3; ++t)
        for (int h = 0; h < heads; ++h) {
          const float* a = orig.data() + (t * heads + h) * hd;
          const float* b = x.data() + (t * heads + h) * hd;
          for (int i = 0; i < n_rot / 2; ++i) {
            const double theta = pos[t] * std::pow(10000.0, -2.0 * i / n_rot);
            const int i0 = mode == RopeMode::Normal ? 2 * i : i;
            const int i1 = mode == RopeMode::Normal ? 2 * i + 1 : i + n_rot / 2;
            EXPECT_NEAR(b[i0], a[i0] * std::cos(theta) - a[i1] * std::sin(theta), 2e-4);
            EXPECT_NEAR(b[i1], a[i0] * std::sin(theta) + a[i1] * std::cos(theta), 2e-4);
          }
          for (int i = n_rot; i < hd; ++i) EXPECT_EQ(b[i], a[i]);  // partial rotary
        }
    }
}

// Causal GQA attention: 2 sequences of different lengths in one ragged call, K/V in pages of 3.
TEST(ReferenceKernels, AttentionMatchesSoftmaxMath) {
  const int n_head = 4, n_kv = 2, hd = 32, kv_dim = n_kv * hd;
  const int64_t page = 3;
  const std::vector<int64_t> len = {5, 70};  // rows attend to positions [0, len)
  for (QuantType type : {QuantType::F16, QuantType::F32})
    for (bool tiled : {false, true}) {
      const size_t esz = type == QuantType::F16 ? 2 : 4;
      std::vector<std::vector<uint8_t>> storage;
      std::vector<std::vector<uint8_t*>> pages(2);
      std::vector<std::vector<float>> kf(2), vf(2);  // what the cache holds, as floats
      for (int s = 0; s < 2; ++s) {
        kf[s] = randn(size_t(len[s] * kv_dim), 10 + s);
        vf[s] = randn(size_t(len[s] * kv_dim), 20 + s);
        for (int64_t p = 0; p < (len[s] + page - 1) / page; ++p) {
          storage.emplace_back(size_t(2 * page * kv_dim) * esz);
          pages[s].push_back(storage.back().data());
        }
      }
      std::vector<PagedRows> krows, vrows;
      for (int s = 0; s < 2; ++s) {
        krows.push_back(PagedRows{pages[s].data(), page, 0, kv_dim * esz});
        vrows.push_back(PagedRows{pages[s].data(), page, size_t(page * kv_dim) * esz, kv_dim * esz});
        std::vector<uint8_t*> kd, vd;
        for (int64_t p = 0; p < len[s]; ++p) {
          kd.push_back(krows[s].row(p));
          vd.push_back(vrows[s].row(p));
        }
        K().store_rows(type, kf[s].data(), len[s], kv_dim, kd.data());
        K().store_rows(type, vf[s].data(), len[s], kv_dim, vd.data());
        if (type == QuantType::F16)  // the reference below sees the stored (rounded) values
          for (float* v : {kf[s].data(), vf[s].data()})
            for (int64_t i = 0; i < len[s] * kv_dim; ++i) v[i] = fp16_to_f32(f32_to_fp16(v[i]));
      }
      const auto q = randn(size_t(2 * n_head * hd), 30);
      std::vector<float> out(q.size());
      AttentionArgs a;
      a.n_head = n_head;
      a.n_head_kv = n_kv;
      a.head_dim = hd;
      a.scale = 1.0f / std::sqrt(float(hd));
      a.kv_type = type;
      a.n_rows = 2;
      a.q = q.data();
      a.out = out.data();
      a.n_kv = len.data();
      a.k = krows.data();
      a.v = vrows.data();
      a.f32_tiles = tiled;
      K().attention(a);
      for (int r = 0; r < 2; ++r)
        for (int h = 0; h < n_head; ++h) {
          const int kvh = h / (n_head / n_kv);
          std::vector<double> sc(static_cast<size_t>(len[r]));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < len[r]; ++j) {
            double d = 0;
            for (int i = 0; i < hd; ++i)
              d += double(q[(r * n_head + h) * hd + i]) * kf[r][j * kv_dim + kvh * hd + i];
            sc[j] = d / std::sqrt(double(hd));
            mx = std::max(mx, sc[j]);
          }
          for (double& s : sc) sum += (s = std::exp(s - mx));
          for (int i = 0; i < hd; ++i) {
            double want = 0;
            for (int64_t j = 0; j < len[r]; ++j) want += sc[j] / sum * vf[r][j * kv_dim + kvh * hd + i];
            // F16 paths round Q (and, in the one_chunk path, the V accumulator) to F16.
            EXPECT_NEAR(out[(r * n_head + h) * hd + i], want, type == QuantType::F16 ? 3e-3 : 1e-5)
                << quant_name(type) << (tiled ? " tiled" : " one_chunk") << " row " << r << " head " << h;
          }
        }
    }
}

// V heads of their own width: a V plane of 24 per head beside K heads of 16 (GQA), and MLA's
// absorbed form, one KV head of 40 (latent 32 + rope 8) whose first 32 values are V (v_in_k:
// the K rows are all the cache holds). One sequence of 70 keys, both of ggml's paths.
TEST(ReferenceKernels, AttentionWithVHeadsOfTheirOwnWidth) {
  struct Shape {
    int n_head, n_kv, hk, hv;
    bool v_in_k;
  };
  for (const Shape sh : {Shape{4, 2, 16, 24, false}, Shape{4, 1, 40, 32, true}})
    for (QuantType type : {QuantType::F16, QuantType::F32})
      for (bool tiled : {false, true}) {
        const int64_t len = 70, page = 16, k_dim = sh.n_kv * sh.hk, v_dim = sh.n_kv * sh.hv;
        const size_t esz = type == QuantType::F16 ? 2 : 4;
        std::vector<float> kf = randn(size_t(len * k_dim), 11), vf = randn(size_t(len * v_dim), 21);
        std::vector<std::vector<uint8_t>> storage;
        std::vector<uint8_t*> pages;
        for (int64_t p = 0; p < (len + page - 1) / page; ++p) {
          storage.emplace_back(size_t(page * (k_dim + v_dim)) * esz);
          pages.push_back(storage.back().data());
        }
        const PagedRows krows{pages.data(), page, 0, size_t(k_dim) * esz};
        const PagedRows vrows = sh.v_in_k ? krows
                                          : PagedRows{pages.data(), page, size_t(page * k_dim) * esz,
                                                      size_t(v_dim) * esz};
        std::vector<uint8_t*> kd, vd;
        for (int64_t p = 0; p < len; ++p) {
          kd.push_back(krows.row(p));
          vd.push_back(vrows.row(p));
        }
        K().store_rows(type, kf.data(), len, k_dim, kd.data());
        if (!sh.v_in_k) K().store_rows(type, vf.data(), len, v_dim, vd.data());
        if (type == QuantType::F16)  // the math below sees the stored (rounded) values
          for (std::vector<float>* v : {&kf, &vf})
            for (float& x : *v) x = fp16_to_f32(f32_to_fp16(x));
        // V of key j, head g, dim i: its own plane, or K's row.
        auto vval = [&](int64_t j, int g, int i) {
          return sh.v_in_k ? kf[size_t(j * k_dim + g * sh.hk + i)] : vf[size_t(j * v_dim + g * sh.hv + i)];
        };
        const auto q = randn(size_t(sh.n_head * sh.hk), 31);
        std::vector<float> out(size_t(sh.n_head * sh.hv), -1.0f);
        const int64_t n_kv[] = {len};
        AttentionArgs a;
        a.n_head = sh.n_head;
        a.n_head_kv = sh.n_kv;
        a.head_dim = sh.hk;
        a.head_dim_v = sh.hv;
        a.v_in_k = sh.v_in_k;
        a.scale = 0.3f;
        a.kv_type = type;
        a.n_rows = 1;
        a.q = q.data();
        a.out = out.data();
        a.n_kv = n_kv;
        a.k = &krows;
        a.v = &vrows;
        a.f32_tiles = tiled;
        for (const CpuKernels* kernels : {&K(), &jit_kernels()}) {
          kernels->attention(a);
          for (int h = 0; h < sh.n_head; ++h) {
            const int g = h / (sh.n_head / sh.n_kv);
            std::vector<double> sc(static_cast<size_t>(len));
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j < len; ++j) {
              double d = 0;
              for (int i = 0; i < sh.hk; ++i) d += double(q[size_t(h * sh.hk + i)]) * kf[size_t(j * k_dim + g * sh.hk + i)];
              sc[size_t(j)] = d * 0.3;
              mx = std::max(mx, sc[size_t(j)]);
            }
            for (double& x : sc) sum += (x = std::exp(x - mx));
            for (int i = 0; i < sh.hv; ++i) {
              double want = 0;
              for (int64_t j = 0; j < len; ++j) want += sc[size_t(j)] / sum * vval(j, g, i);
              EXPECT_NEAR(out[size_t(h * sh.hv + i)], want, type == QuantType::F16 ? 3e-3 : 1e-5)
                  << sh.hk << "/" << sh.hv << (sh.v_in_k ? " v_in_k " : " ") << quant_name(type)
                  << (tiled ? " tiled" : " one_chunk") << " head " << h << " dim " << i;
            }
          }
        }
      }
}

}  // namespace
}  // namespace jitllm
