// Shared by the tensor-core matmul tests (batched_test.cpp: the int8 MMQ and the engines;
// dq_mma_test.cpp: the f16 DQ-MMA kernel): one Mmq for the process, the per-matrix check against
// the CPU reference and the matvec, and the 8B q/k/v case of mixed kinds.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/mmq.h"
#include "cuda_test_util.h"

namespace jitllm::cuda::test {

inline Mmq& mmq() {
  static Mmq m(*gpu()->compiler);
  return m;
}

inline std::vector<float> download(CUdeviceptr p, size_t n) {
  std::vector<float> v(n);
  check(driver().cuMemcpyDtoH(v.data(), p, n * sizeof(float)), "cuMemcpyDtoH");
  return v;
}

// Rows the CPU reference checks: the first and last tiles and a spread between (the reference is
// slow at 128256 rows x 64 activations).
inline std::vector<int64_t> sample_rows(int64_t rows) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < std::min<int64_t>(rows, 40); ++i) r.push_back(i);
  for (int64_t i = 1; i < 16; ++i) r.push_back(rows * i / 16 + i % 7);
  for (int64_t i = std::max<int64_t>(40, rows - 40); i < rows; ++i) r.push_back(i);
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

struct MmqCase {
  QuantType type;
  int64_t rows, k;
};

// The MMQ kernel on one matrix at each n: vs the CPU reference on sampled rows (tolerance as the
// matvec tests: the activation is int8 blocks of 32 here, the format's vec_dot type there), vs
// the matvec on every output (same int8 activation, same exact block dots: only the order of the
// f32 sums differs), the residual epilogue, and a repeated call into the same buffers.
// dq: the DQ-MMA kernel instead (f16 weights and activation: within 2e-3 of the matvec).
inline void check_mmq(const MmqCase& c, std::initializer_list<int64_t> ns, int zero_every = 0, bool dq = false) {
  JITLLM_REQUIRE_GPU();
  const char* what = dq ? "dqmma" : "mmq";
  DeviceBuffer xh(DqMma::f16_bytes(kMmqMaxRows, c.k));
  const CUdeviceptr xhp = dq ? xh.get() : 0;
  std::mt19937 rng(uint32_t(c.rows * 17 + c.k + int(c.type)));
  const std::vector<uint8_t> w = random_weights(c.type, c.rows, c.k, rng, zero_every);
  const DeviceWeight dw = DeviceWeight::upload(pack_weight(c.type, w.data(), c.rows, c.k));
  const std::vector<int64_t> sample = sample_rows(c.rows);
  const size_t rb = row_bytes(c.type, c.k);
  std::vector<uint8_t> sub(sample.size() * rb);
  for (size_t i = 0; i < sample.size(); ++i)
    std::memcpy(sub.data() + i * rb, w.data() + size_t(sample[i]) * rb, rb);
  for (int64_t n : ns) {
    const std::vector<float> x = random_floats(size_t(n * c.k), rng);
    const size_t outs = size_t(n * c.rows);
    DeviceBuffer dx = to_device(x, size_t(kMmqMaxRows * c.k));  // rows past n read, ignored
    DeviceBuffer dout(outs * 4), dmv(outs * 4), dres(outs * 4);
    DeviceBuffer q8(CudaKernels::q8_bytes(n, c.k));
    const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, c.k)};
    const int64_t t = CudaKernels::tile_for(n);
    ASSERT_EQ(t % 8, 0) << "n=" << n << ": the q8 rows are not padded to 8";
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    G->kernels->quantize_q8(dx.get(), (n + t - 1) / t * t, c.k, qb, *G->stream);
    const MatmulSeg seg{&dw, dout.get(), 0};
    if (dq) {
      ASSERT_TRUE(Mmq::use_dq(std::span<const MatmulSeg>(&seg, 1)));
    }
    check(driver().cuMemsetD8Async(xh.get(), 0xff, xh.bytes(), G->stream->get()), "memset");
    mmq().matmul_group(std::span<const MatmulSeg>(&seg, 1), n, qb, *G->stream, xhp);
    G->kernels->matmul(dw, dx.get(), n, dmv.get(), qb, *G->stream, true);
    G->stream->sync();
    const std::vector<float> got = download(dout.get(), outs), mv = download(dmv.get(), outs);

    std::vector<float> ref(size_t(n) * sample.size()), got_s(ref.size());
    reference_kernels().matmul(c.type, sub.data(), int64_t(sample.size()), c.k, x.data(), n, ref.data());
    for (int64_t tk = 0; tk < n; ++tk)
      for (size_t i = 0; i < sample.size(); ++i)
        got_s[size_t(tk) * sample.size() + i] = got[size_t(tk * c.rows + sample[i])];
    const double err_ref = rel_error(got_s, ref), err_mv = rel_error(got, mv);
    EXPECT_LT(err_ref, 1e-2) << quant_name(c.type) << " " << c.rows << "x" << c.k << " n=" << n;
    size_t unwritten = 0;
    for (float v : got) unwritten += !std::isfinite(v);
    EXPECT_EQ(unwritten, 0u) << what << " n=" << n;
    EXPECT_LT(err_mv, dq ? 2e-3 : 1e-5) << quant_name(c.type) << " " << c.rows << "x" << c.k << " n=" << n;

    // Residual epilogue: res += out, and out still written.
    const std::vector<float> r0 = random_floats(outs, rng);
    dres.upload(r0.data(), outs * 4);
    const MatmulSeg seg_res{&dw, dout.get(), dres.get()};
    mmq().matmul_group(std::span<const MatmulSeg>(&seg_res, 1), n, qb, *G->stream, xhp);
    G->stream->sync();
    EXPECT_EQ(download(dout.get(), outs), got) << "repeated call, n=" << n;  // same bits
    const std::vector<float> res = download(dres.get(), outs);
    size_t bad = 0;
    for (size_t i = 0; i < outs; ++i) bad += res[i] != r0[i] + got[i];
    EXPECT_EQ(bad, 0u) << "residual epilogue, n=" << n;
    if (dq) {
      // The f16 copy written by the quantizer itself (Q8Buffers::h, as every q8 producer of a DQ
      // step does) instead of the kernel's own conversion: the same bits.
      DeviceBuffer xh2(DqMma::f16_bytes(kMmqMaxRows, c.k));
      check(driver().cuMemsetD8Async(xh2.get(), 0xff, xh2.bytes(), G->stream->get()), "memset");
      const Q8Buffers qh{qb.q, qb.ds, xh2.get()};
      G->kernels->quantize_q8(dx.get(), (n + t - 1) / t * t, c.k, qh, *G->stream);
      mmq().matmul_group(std::span<const MatmulSeg>(&seg, 1), n, qh, *G->stream, xh2.get());
      G->stream->sync();
      EXPECT_EQ(download(dout.get(), outs), got) << "f16 copy from the quantizer, n=" << n;
    }
    std::printf("[ cuda     ] %-5s %-5s %6ld x %5ld n=%-2ld rel err vs CPU %.2e, vs matvec %.2e\n",
                what, quant_name(c.type), long(c.rows), long(c.k), long(n), err_ref, err_mv);
  }
}

struct QkvCase {
  static constexpr int64_t k = 4096;
  static constexpr QuantType types[3] = {QuantType::Q4_K, QuantType::Q4_K, QuantType::Q6_K};
  static constexpr int64_t rows[3] = {4096, 1024, 1024};
  int64_t n;
  std::vector<DeviceWeight> dw;
  DeviceBuffer dx, q8;
  Q8Buffers qb;
  QkvCase(Gpu* G, int64_t n_rows, uint32_t seed) : n(n_rows) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 3; ++i) {
      const auto w = random_weights(types[i], rows[i], k, rng);
      dw.push_back(DeviceWeight::upload(pack_weight(types[i], w.data(), rows[i], k)));
    }
    dx = to_device(random_floats(size_t(n * k), rng), size_t(kMmqMaxRows * k));
    q8 = DeviceBuffer(CudaKernels::q8_bytes(n, k));
    qb = Q8Buffers{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, k)};
    G->kernels->quantize_q8(dx.get(), (n + 7) / 8 * 8, k, qb, *G->stream);
  }
};

}  // namespace jitllm::cuda::test
