// The decode epilogues of the matvec (decode_fusion.cpp) against the launches they replace:
// q/k/v with RoPE + KV store == matvec then rope_store; a residual matvec with the RMSNorm + q8
// epilogue == matvec with the residual then rms_norm_q8 (same bits); and a whole decode run with
// the epilogues on == off; DQ-MMA's SwiGLU epilogue (batched decode) == the DQ-MMA gate/up launch
// then swiglu_q8. Label gpu.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/mmq.h"
#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

// gate and up of rows x k on the card, every 7th block of gate zero.
std::vector<DeviceWeight> gate_up_weights(QuantType t, int64_t rows, int64_t k, std::mt19937& rng) {
  std::vector<DeviceWeight> dw;
  for (int i = 0; i < 2; ++i) {
    const auto w = random_weights(t, rows, k, rng, i == 0 ? 7 : 0);
    dw.push_back(DeviceWeight::upload(pack_weight(t, w.data(), rows, k)));
  }
  return dw;
}

std::vector<uint8_t> bytes_of(const DeviceBuffer& d, size_t count) {
  std::vector<uint8_t> v(count);
  d.download(v.data(), count);
  return v;
}

TEST(CudaDecodeFusion, RopeEpilogueEqualsMatvecThenRopeStore) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t k = 2048;
  const int nh = 8, nkv = 2, hd = 64;
  const QuantType types[3] = {QuantType::Q4_K, QuantType::Q4_K, QuantType::Q6_K};
  const int64_t rows[3] = {nh * hd, nkv * hd, nkv * hd};
  std::vector<DeviceWeight> dw;
  for (int i = 0; i < 3; ++i) {
    const auto w = random_weights(types[i], rows[i], k, rng);
    dw.push_back(DeviceWeight::upload(pack_weight(types[i], w.data(), rows[i], k)));
  }
  for (int n_rot : {64, 32}) {       // full and partial rotary
    for (int64_t n : {1, 3, 8}) {    // one row, a ragged tile, a full tile
      const auto x = random_floats(size_t(n * k), rng);
      const auto cache = random_floats(size_t(n * n_rot), rng);
      DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * k)), dc = to_device(cache);
      DeviceBuffer q8(CudaKernels::q8_bytes(n, k));
      const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, k)};
      const size_t row = size_t(nkv * hd) * 2;  // f16 K or V row
      const uint64_t voff = size_t(n) * row;
      DeviceBuffer kv1(size_t(n) * row * 2), kv2(size_t(n) * row * 2);
      check(driver().cuMemsetD8Async(kv1.get(), 0x5a, kv1.bytes(), G->stream->get()), "memset");
      check(driver().cuMemsetD8Async(kv2.get(), 0x5a, kv2.bytes(), G->stream->get()), "memset");
      std::vector<uint64_t> r1(static_cast<size_t>(n)), r2(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) {
        r1[size_t(t)] = kv1.get() + size_t(t) * row;
        r2[size_t(t)] = kv2.get() + size_t(t) * row;
      }
      DeviceBuffer dr1(size_t(n) * 8), dr2(size_t(n) * 8);
      dr1.upload(r1.data(), dr1.bytes());
      dr2.upload(r2.data(), dr2.bytes());
      std::vector<DeviceBuffer> o1, o2;
      MatmulSeg s1[3], s2[3];
      for (int i = 0; i < 3; ++i) {
        o1.emplace_back(size_t(n * rows[i]) * 4);
        o2.emplace_back(size_t(n * rows[i]) * 4);
        check(driver().cuMemsetD8Async(o2.back().get(), 0xff, o2.back().bytes(), G->stream->get()), "memset");
        s1[i] = MatmulSeg{&dw[size_t(i)], o1.back().get(), 0};
        s2[i] = MatmulSeg{&dw[size_t(i)], o2.back().get(), 0};
      }
      G->kernels->matmul_group(s1, dx.get(), n, qb, *G->stream);
      CudaKernels::RopeStoreCall c;
      c.q = o1[0].get();
      c.k = o1[1].get();
      c.v = o1[2].get();
      c.cache = dc.get();
      c.rows = dr1.get();
      c.voff = voff;
      c.n = n;
      c.n_head = nh;
      c.n_head_kv = nkv;
      c.head_dim = hd;
      c.n_rot = n_rot;
      G->kernels->rope_store(c, *G->stream);
      CudaKernels::RopeEpilogue re;
      re.cache = dc.get();
      re.rows = dr2.get();
      re.voff = voff;
      re.head_dim = hd;
      re.n_rot = n_rot;
      for (int rep = 0; rep < 2; ++rep)  // a repeated launch writes the same bits
        G->kernels->matmul_group(s2, dx.get(), n, qb, *G->stream, true, nullptr, &re);
      G->stream->sync();
      for (int i = 0; i < 3; ++i) {
        const auto a = from_device(o1[size_t(i)], size_t(n * rows[i]));
        const auto b = from_device(o2[size_t(i)], size_t(n * rows[i]));
        // The rotation is rounded op by op in both (rope_lo / rope_hi): the same bits.
        EXPECT_EQ(b, a) << "segment " << i << " n=" << n << " n_rot=" << n_rot;
      }
      EXPECT_EQ(bytes_of(kv1, kv1.bytes()), bytes_of(kv2, kv2.bytes())) << "n=" << n << " n_rot=" << n_rot;
    }
  }
}

TEST(CudaDecodeFusion, NormEpilogueEqualsResidualThenRmsNormQ8) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(32);
  struct Shape { QuantType t; int64_t rows, k; };
  for (const Shape& sh : {Shape{QuantType::Q4_K, 2048, 2048}, Shape{QuantType::Q6_K, 2048, 8192},
                          Shape{QuantType::Q4_K, 4096, 4096}}) {
    const auto w = random_weights(sh.t, sh.rows, sh.k, rng);
    const DeviceWeight dw = DeviceWeight::upload(pack_weight(sh.t, w.data(), sh.rows, sh.k));
    const auto nw = random_floats(size_t(sh.rows), rng, 0.5, 1.5);
    DeviceBuffer dnw = to_device(nw), counters(size_t(CudaKernels::kNormCounters) * 4);
    check(driver().cuMemsetD8Async(counters.get(), 0, counters.bytes(), G->stream->get()), "memset");
    for (int64_t n : {1, 3, 8}) {
      const auto x = random_floats(size_t(n * sh.k), rng);
      const auto r0 = random_floats(size_t(n * sh.rows), rng, -4, 4);
      DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * sh.k));
      DeviceBuffer q8in(CudaKernels::q8_bytes(n, sh.k));
      const Q8Buffers qin{q8in.get(), q8in.get() + CudaKernels::q8_ds_offset(n, sh.k)};
      DeviceBuffer qa(CudaKernels::q8_bytes(n, sh.rows)), qb(CudaKernels::q8_bytes(n, sh.rows));
      const size_t dso = CudaKernels::q8_ds_offset(n, sh.rows);
      const Q8Buffers q8a{qa.get(), qa.get() + dso}, q8b{qb.get(), qb.get() + dso};
      DeviceBuffer res1 = to_device(r0), res2 = to_device(r0);
      DeviceBuffer out1(size_t(n * sh.rows) * 4), out2(size_t(n * sh.rows) * 4);
      DeviceBuffer y1(size_t(n * sh.rows) * 4), y2(size_t(n * sh.rows) * 4);
      check(driver().cuMemsetD8Async(y2.get(), 0xff, y2.bytes(), G->stream->get()), "memset");
      check(driver().cuMemsetD8Async(qb.get(), 0xff, qb.bytes(), G->stream->get()), "memset");
      const MatmulSeg s1{&dw, out1.get(), res1.get()}, s2{&dw, out2.get(), res2.get()};
      G->kernels->matmul_group(std::span<const MatmulSeg>(&s1, 1), dx.get(), n, qin, *G->stream);
      G->kernels->rms_norm_q8(res1.get(), dnw.get(), y1.get(), q8a, n, sh.rows, 1e-5f, *G->stream);
      CudaKernels::NormEpilogue ne;
      ne.w = dnw.get();
      ne.out = y2.get();
      ne.counters = counters.get();
      ne.q8 = q8b;
      ne.eps = 1e-5f;
      G->kernels->matmul_group(std::span<const MatmulSeg>(&s2, 1), dx.get(), n, qin, *G->stream,
                               true, &ne);
      G->stream->sync();
      const size_t cnt = size_t(n * sh.rows);
      EXPECT_EQ(from_device(res1, cnt), from_device(res2, cnt)) << "residual n=" << n;
      EXPECT_EQ(from_device(y1, cnt), from_device(y2, cnt)) << "normed n=" << n;
      const auto ba = bytes_of(qa, qa.bytes()), bb = bytes_of(qb, qb.bytes());
      EXPECT_TRUE(std::equal(ba.begin(), ba.begin() + long(cnt), bb.begin())) << "int8 n=" << n;
      EXPECT_TRUE(std::equal(ba.begin() + long(dso), ba.begin() + long(dso + cnt / 32 * 8),
                             bb.begin() + long(dso)))
          << "scales n=" << n;
      std::printf("[ cuda     ] norm epilogue %s %ldx%ld n=%ld checked\n", quant_name(sh.t),
                  long(sh.rows), long(sh.k), long(n));
    }
    std::vector<uint32_t> left(static_cast<size_t>(CudaKernels::kNormCounters));
    counters.download(left.data(), counters.bytes());
    EXPECT_EQ(*std::max_element(left.begin(), left.end()), 0u) << "the counters are reset";
  }
}

TEST(CudaDecodeFusion, SwigluEpilogueEqualsGateUpThenSwigluQ8) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(33);
  struct Shape { QuantType t; int64_t rows, k; };
  for (const Shape& sh : {Shape{QuantType::Q4_K, 8192, 2048}, Shape{QuantType::Q6_K, 1024, 4096},
                          Shape{QuantType::Q8_0, 544, 2048}}) {
    const std::vector<DeviceWeight> dw = gate_up_weights(sh.t, sh.rows, sh.k, rng);
    for (int64_t n : {1, 3, 8}) {
      const auto x = random_floats(size_t(n * sh.k), rng, -2, 2);
      DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * sh.k));
      DeviceBuffer q8in(CudaKernels::q8_bytes(n, sh.k));
      const Q8Buffers qin{q8in.get(), q8in.get() + CudaKernels::q8_ds_offset(n, sh.k)};
      const size_t cnt = size_t(n * sh.rows), dso = CudaKernels::q8_ds_offset(n, sh.rows);
      DeviceBuffer g(cnt * 4), u(cnt * 4), h1(cnt * 4), h2(cnt * 4);
      DeviceBuffer qa(CudaKernels::q8_bytes(n, sh.rows)), qb(CudaKernels::q8_bytes(n, sh.rows));
      const Q8Buffers q8a{qa.get(), qa.get() + dso}, q8b{qb.get(), qb.get() + dso};
      check(driver().cuMemsetD8Async(h2.get(), 0xff, h2.bytes(), G->stream->get()), "memset");
      check(driver().cuMemsetD8Async(qb.get(), 0xff, qb.bytes(), G->stream->get()), "memset");
      const MatmulSeg plain[2] = {{&dw[0], g.get(), 0}, {&dw[1], u.get(), 0}};
      G->kernels->matmul_group(plain, dx.get(), n, qin, *G->stream);
      G->kernels->swiglu_q8(g.get(), u.get(), h1.get(), q8a, int64_t(cnt), *G->stream);
      for (int rep = 0; rep < 2; ++rep)
        G->kernels->matmul_swiglu(plain, dx.get(), n, qin, *G->stream, true, h2.get(), q8b);
      G->stream->sync();
      EXPECT_EQ(from_device(h1, cnt), from_device(h2, cnt)) << quant_name(sh.t) << " n=" << n;
      const auto ba = bytes_of(qa, qa.bytes()), bb = bytes_of(qb, qb.bytes());
      EXPECT_TRUE(std::equal(ba.begin(), ba.begin() + long(cnt), bb.begin())) << "int8 n=" << n;
      EXPECT_TRUE(std::equal(ba.begin() + long(dso), ba.begin() + long(dso + cnt / 32 * 8),
                             bb.begin() + long(dso)))
          << "scales n=" << n;
    }
  }
}

// DqMma::matmul_swiglu against DqMma::matmul_group (gate, up) then swiglu_q8: the same bits in the
// f32 output, the q8 rows, their scales and the f16 copy; 8..64 activation rows, a last tile of
// half the rows (1056 = 16.5 tiles of 64), zero blocks, 8 and 4 warps, a repeated call.
TEST(CudaDecodeFusion, DqSwigluEpilogueEqualsDqGateUpThenSwigluQ8) {
  JITLLM_REQUIRE_GPU();
  Mmq mmq(*G->compiler);
  std::mt19937 rng(34);
  struct Shape { QuantType t; int64_t rows, k; };
  for (const Shape& sh : {Shape{QuantType::Q4_K, 14336, 4096}, Shape{QuantType::Q6_K, 1056, 2048},
                          Shape{QuantType::Q8_0, 544, 2048}}) {
    const std::vector<DeviceWeight> dw = gate_up_weights(sh.t, sh.rows, sh.k, rng);
    const MatmulSeg probe[2] = {{&dw[0], 0, 0}, {&dw[1], 0, 0}};
    ASSERT_TRUE(Mmq::use_dq(probe) && DqMma::swiglu_fits(probe)) << quant_name(sh.t);
    for (int64_t n : {8, 13, 32, 64}) {
      // Rows padded to the matvec tile, which the batched kernels need in whole tiles of 8 (as
      // CudaOps::use_mmq requires).
      const int64_t t = CudaKernels::tile_for(n), n_pad = (n + t - 1) / t * t;
      const auto x = random_floats(size_t(n * sh.k), rng, -2, 2);
      DeviceBuffer dx = to_device(x, size_t(n_pad * sh.k));
      DeviceBuffer q8in(CudaKernels::q8_bytes(n, sh.k)), xh(size_t(n_pad * sh.k) * 2);
      const Q8Buffers qin{q8in.get(), q8in.get() + CudaKernels::q8_ds_offset(n, sh.k), xh.get()};
      G->kernels->quantize_q8(dx.get(), n_pad, sh.k, qin, *G->stream);
      const size_t cnt = size_t(n * sh.rows), dso = CudaKernels::q8_ds_offset(n, sh.rows);
      DeviceBuffer g(cnt * 4), u(cnt * 4), h1(cnt * 4), h2(cnt * 4), xa(cnt * 2), xb(cnt * 2);
      DeviceBuffer qa(CudaKernels::q8_bytes(n, sh.rows)), qb(CudaKernels::q8_bytes(n, sh.rows));
      const Q8Buffers q8a{qa.get(), qa.get() + dso, xa.get()}, q8b{qb.get(), qb.get() + dso, xb.get()};
      const MatmulSeg plain[2] = {{&dw[0], g.get(), 0}, {&dw[1], u.get(), 0}};
      // The reference with the warps owning rows over the whole row length, as the epilogue's
      // launch (and the default wide launch of an 8B or 1B gate/up): the same MMA order per row.
      mmq.dq().tune(0, 0, 0);
      mmq.matmul_group(plain, n, qin, *G->stream, xh.get());
      G->kernels->swiglu_q8(g.get(), u.get(), h1.get(), q8a, int64_t(cnt), *G->stream);
      for (int warps : {0, 4}) {
        mmq.dq().tune(0, warps, 0);
        for (DeviceBuffer* b : {&h2, &qb, &xb})
          check(driver().cuMemsetD8Async(b->get(), 0xff, b->bytes(), G->stream->get()), "memset");
        for (int rep = 0; rep < 2; ++rep) mmq.dq().matmul_swiglu(plain, n, qin, xh.get(), h2.get(), q8b, *G->stream);
        G->stream->sync();
        const std::string what = fmt::format("{} {}x{} n={} warps={}", quant_name(sh.t), sh.rows, sh.k, n, warps);
        EXPECT_EQ(from_device(h1, cnt), from_device(h2, cnt)) << what;
        const auto ba = bytes_of(qa, qa.bytes()), bb = bytes_of(qb, qb.bytes());
        EXPECT_TRUE(std::equal(ba.begin(), ba.begin() + long(cnt), bb.begin())) << "int8 " << what;
        EXPECT_TRUE(std::equal(ba.begin() + long(dso), ba.begin() + long(dso + cnt / 32 * 8), bb.begin() + long(dso)))
            << "scales " << what;
        EXPECT_EQ(bytes_of(xa, cnt * 2), bytes_of(xb, cnt * 2)) << "f16 copy " << what;
      }
      mmq.dq().tune(0, 0, -1);
    }
    std::printf("[ cuda     ] dqmma swiglu epilogue %s %ldx%ld == gate/up then swiglu_q8 (bitwise)\n",
                quant_name(sh.t), long(sh.rows), long(sh.k));
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
