// Vectorized element-wise ops against the reference, bit for bit: SwiGLU over ordinary values,
// the exp polynomial's saturation ranges (|g| > 87), tiny and huge magnitudes, zeros and NaN;
// RMSNorm, RoPE (both modes, partial rotary, llama3 factors, YaRN), residual add, K/V row
// stores (f16 rounding specials) and row lookups of quantized tables, on the 1B model's shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/jit_kernels.h"
#include "core/error.h"
#include "quant/quant.h"

namespace jitllm {
namespace {

TEST(JitElementwise, SwigluBitIdentical) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> g(200003), u(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = nd(rng);
    u[i] = nd(rng);
  }
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.7f, -88.7f, 89.0f,
                            -89.0f, 100.0f, -100.0f, 140.0f, -140.0f, 1e30f, -1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float); ++i) g[100 + i] = specials[i];
  for (int i = 0; i < 2000; ++i) g[1000 + size_t(i)] = -130.0f + 0.13f * float(i);  // saturation
  std::vector<float> ref(g.size()), got(g.size());
  reference_kernels().swiglu(g.data(), u.data(), ref.data(), int64_t(g.size()));
  jit_kernels().swiglu(g.data(), u.data(), got.data(), int64_t(g.size()));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(std::memcmp(&ref[i], &got[i], 4), 0)
        << "g=" << g[i] << " u=" << u[i] << " ref " << ref[i] << " got " << got[i];
}

// Fills with normal(0, sd) values plus a few specials (zeros, tiny, huge, infinities).
std::vector<float> random_floats(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

void expect_same_bits(const std::vector<float>& ref, const std::vector<float>& got,
                      const std::string& what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(std::memcmp(&ref[i], &got[i], 4), 0)
        << what << " at " << i << ": ref " << ref[i] << " got " << got[i];
}

// Llama-3.2-1B's n_embd (2048) for decode (1 row), a few rows, and a prefill batch; a ragged dim;
// rows with huge and zero values; in place (out == x) and two calls into one buffer.
TEST(JitElementwise, RmsNormBitIdentical) {
  for (int64_t dim : {2048, 2050, 7})
    for (int64_t n : {1, 3, 8, 13, 200}) {
      std::vector<float> x = random_floats(size_t(n * dim), uint32_t(dim + n), 3.0f);
      std::vector<float> w = random_floats(size_t(dim), 5);
      x[0] = 1e30f;                                                   // squares overflow float
      if (n > 2) std::fill(x.begin() + dim, x.begin() + 2 * dim, 0.0f);  // all-zero row
      std::vector<float> ref(x.size()), got(x.size(), -1.0f);
      reference_kernels().rms_norm(x.data(), w.data(), n, dim, 1e-5f, ref.data());
      jit_kernels().rms_norm(x.data(), w.data(), n, dim, 1e-5f, got.data());
      const std::string what = "dim " + std::to_string(dim) + " n " + std::to_string(n);
      expect_same_bits(ref, got, what);
      jit_kernels().rms_norm(x.data(), w.data(), n, dim, 1e-5f, got.data());  // same buffer again
      expect_same_bits(ref, got, what + " (second call)");
      std::vector<float> inplace = x;
      jit_kernels().rms_norm(inplace.data(), w.data(), n, dim, 1e-5f, inplace.data());
      expect_same_bits(ref, inplace, what + " (in place)");
    }
}

// Both modes, full and partial rotary (n_rot not a multiple of 16: vector body plus tail), llama3
// frequency factors and YaRN, positions up to 1e5; a prefill batch goes through the pool.
TEST(JitElementwise, RopeBitIdentical) {
  std::vector<float> factors = random_floats(64, 3);
  for (float& f : factors) f = 1.0f + std::fabs(f) * 4.0f;
  struct Case {
    RopeMode mode;
    int head_dim, n_rot;
    bool freq_factors, yarn;
  };
  const Case cases[] = {{RopeMode::Normal, 64, 64, true, false}, {RopeMode::Neox, 64, 64, false, false},
                        {RopeMode::Normal, 128, 128, false, true}, {RopeMode::Neox, 128, 128, true, false},
                        {RopeMode::Normal, 64, 20, false, false}, {RopeMode::Neox, 80, 36, false, true}};
  for (const Case& c : cases)
    for (int64_t n : {1, 5, 130}) {
      const int n_heads = 8;
      RopeParams p;
      p.n_rot = c.n_rot;
      p.mode = c.mode;
      p.freq_base = 500000.0f;
      p.freq_factors = c.freq_factors ? factors.data() : nullptr;
      if (c.yarn) {
        p.ext_factor = 1.0f;
        p.freq_scale = 0.25f;
        p.n_ctx_orig = 4096;
      }
      std::vector<int32_t> pos(static_cast<size_t>(n));
      std::mt19937 rng{static_cast<uint32_t>(n)};
      for (auto& v : pos) v = int32_t(rng() % 100000);
      pos[0] = 0;
      const std::vector<float> x = random_floats(size_t(n) * n_heads * c.head_dim, uint32_t(n + c.n_rot));
      std::vector<float> ref = x, got = x;
      reference_kernels().rope(ref.data(), n, n_heads, c.head_dim, pos.data(), p);
      jit_kernels().rope(got.data(), n, n_heads, c.head_dim, pos.data(), p);
      expect_same_bits(ref, got, "mode " + std::to_string(int(c.mode)) + " hd " +
                                     std::to_string(c.head_dim) + " n_rot " +
                                     std::to_string(c.n_rot) + " n " + std::to_string(n));
    }
  RopeParams bad;
  bad.n_rot = 65;
  std::vector<float> x(64);
  const int32_t pos0 = 0;
  EXPECT_THROW(jit_kernels().rope(x.data(), 1, 1, 64, &pos0, bad), Error);
}

TEST(JitElementwise, AddBitIdentical) {
  for (int64_t count : {int64_t(1), int64_t(2048), int64_t(2053), int64_t(512 * 2048 + 3)}) {
    const std::vector<float> acc = random_floats(size_t(count), 1), x = random_floats(size_t(count), 2);
    std::vector<float> ref = acc, got = acc;
    reference_kernels().add(ref.data(), x.data(), count);
    jit_kernels().add(got.data(), x.data(), count);
    expect_same_bits(ref, got, "count " + std::to_string(count));
    reference_kernels().add(ref.data(), x.data(), count);  // twice into the same buffer
    jit_kernels().add(got.data(), x.data(), count);
    expect_same_bits(ref, got, "count " + std::to_string(count) + " (second call)");
  }
}

// f32 -> f16 KV rows: rounding ties, subnormals, overflow to infinity, NaN; f32 copies; rows at
// scattered destinations (pages); a prefill batch through the pool.
TEST(JitElementwise, StoreRowsBitIdentical) {
  for (QuantType type : {QuantType::F16, QuantType::F32})
    for (int64_t n : {1, 4, 300}) {
      const int64_t dim = 512 + 5;  // n_head_kv * head_dim of the 1B model, plus a ragged tail
      std::vector<float> src = random_floats(size_t(n * dim), uint32_t(n), 100.0f);
      const float specials[] = {65504.0f, 65520.0f, 1e6f, -1e6f, 6e-8f, 3e-8f, 1e-40f, 0.0f, -0.0f,
                                1.00048828125f, 1.00146484375f, std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()};
      for (size_t i = 0; i < std::size(specials); ++i) src[i * 3] = specials[i];
      const size_t esz = type == QuantType::F16 ? 2 : 4;
      const size_t row = size_t(dim) * esz;
      std::vector<uint8_t> ref(size_t(n) * 2 * row, 0xAB), got = ref;
      std::vector<uint8_t*> dr, dg;
      for (int64_t t = 0; t < n; ++t) {  // every other slot, in reverse order
        dr.push_back(ref.data() + size_t(2 * (n - 1 - t)) * row);
        dg.push_back(got.data() + size_t(2 * (n - 1 - t)) * row);
      }
      reference_kernels().store_rows(type, src.data(), n, dim, dr.data());
      jit_kernels().store_rows(type, src.data(), n, dim, dg.data());
      ASSERT_EQ(ref, got) << quant_name(type) << " n " << n;
    }
  std::vector<float> src(8);
  std::vector<uint8_t> dst(64);
  uint8_t* d = dst.data();
  EXPECT_THROW(jit_kernels().store_rows(QuantType::Q8_0, src.data(), 1, 8, &d), Error);
}

// Row lookups from tables quantized by quant/ (real formats, not hand-made blocks): the 1B
// model's row length, repeated and out-of-order ids, an all-zero row, a batch over the pool, and
// a format that goes through the reference dequantizer (Q5_K).
TEST(JitElementwise, GetRowsBitIdentical) {
  const int64_t k = 2048, rows = 40;
  const std::vector<float> values = random_floats(size_t(rows * k), 77, 0.05f);
  for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0,
                         QuantType::Q4_K, QuantType::Q6_K, QuantType::Q5_K, QuantType::Q4_0}) {
    const size_t rb = row_bytes(type, k);
    std::vector<uint8_t> table(rb * size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> v(values.begin() + r * k, values.begin() + (r + 1) * k);
      if (r == 3) std::fill(v.begin(), v.end(), 0.0f);
      if (type == QuantType::F32) std::memcpy(table.data() + size_t(r) * rb, v.data(), rb);
      else quantize_row(type, v.data(), table.data() + size_t(r) * rb, k);
    }
    for (int64_t n : {1, 7, 64}) {
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) ids[size_t(t)] = int32_t((t * 17 + 3) % rows);
      std::vector<float> ref(size_t(n * k)), got(size_t(n * k), -5.0f);
      reference_kernels().get_rows(type, table.data(), k, ids.data(), n, ref.data());
      jit_kernels().get_rows(type, table.data(), k, ids.data(), n, got.data());
      expect_same_bits(ref, got, std::string(quant_name(type)) + " n " + std::to_string(n));
      jit_kernels().get_rows(type, table.data(), k, ids.data(), n, got.data());
      expect_same_bits(ref, got, std::string(quant_name(type)) + " second call");
    }
  }
}

}  // namespace
}  // namespace jitllm
