// Every generated CUDA kernel against the CPU reference (backend/cpu/reference_kernels.h) on
// real shapes: matvec / small-batch matmul per format at 2048x2048, 5632x2048 and (the head)
// 128256x2048, ragged batch tails (1, 3, 8, 13 rows), zero blocks, repeated calls bitwise
// equal; RMSNorm, RoPE (normal, neox, partial), SwiGLU and add. Label gpu: runs on the device
// machine (ctest -L gpu), skipped where no card is usable.
#include <gtest/gtest.h>

#include "backend/cpu/reference_kernels.h"
#include "cuda_test_util.h"

namespace jitllm::cuda::test {
namespace {

struct MatCase {
  QuantType type;
  int64_t rows, k;
  double tol;  // relative error vs the CPU reference (activation rounding differs: int8 blocks
               // of 32 here, the format's vec_dot type there)
};

void check_matmul(const MatCase& c, std::initializer_list<int64_t> ns, int zero_every) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(uint32_t(c.rows * 31 + c.k + int(c.type)));
  const std::vector<uint8_t> w = random_weights(c.type, c.rows, c.k, rng, zero_every);
  const DeviceWeight dw = DeviceWeight::upload(pack_weight(c.type, w.data(), c.rows, c.k));
  for (int64_t n : ns) {
    const std::vector<float> x = random_floats(size_t(n * c.k), rng);
    std::vector<float> ref(size_t(n * c.rows));
    reference_kernels().matmul(c.type, w.data(), c.rows, c.k, x.data(), n, ref.data());

    DeviceBuffer dx = to_device(x, size_t(8 * c.k));  // rows padded to the tile
    DeviceBuffer dout(size_t(n * c.rows) * sizeof(float));
    DeviceBuffer q8(CudaKernels::q8_bytes(n, c.k));
    const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, c.k)};
    // Poison the output so an unwritten element cannot pass.
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream);
    G->stream->sync();
    const std::vector<float> got = from_device(dout, size_t(n * c.rows));
    const double err = rel_error(got, ref);
    EXPECT_LT(err, c.tol) << quant_name(c.type) << " " << c.rows << "x" << c.k << " n=" << n;
    // Repeated call: same bits (no races, no state left behind).
    G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream);
    G->stream->sync();
    EXPECT_EQ(from_device(dout, size_t(n * c.rows)), got) << quant_name(c.type) << " n=" << n;
    std::printf("[ cuda     ] matmul %-6s %6ld x %5ld n=%-3ld rel err %.2e\n", quant_name(c.type),
                long(c.rows), long(c.k), long(n), err);
  }
}

TEST(CudaKernels, MatmulNativeFormatsRealShapes) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16,
                      QuantType::BF16, QuantType::F32}) {
    const double tol = t == QuantType::F32 ? 1e-5 : t == QuantType::F16 ? 2e-3 : 1e-2;
    check_matmul({t, 2048, 2048, tol}, {1, 3, 8, 13}, 0);
    check_matmul({t, 5632, 2048, tol}, {1, 4}, 0);
    check_matmul({t, 2048, 5632 / 256 * 256, tol}, {1, 2}, 0);
  }
}

TEST(CudaKernels, MatmulHeadShape) {
  check_matmul({QuantType::Q6_K, 128256, 2048, 1e-2}, {1, 2}, 0);
  check_matmul({QuantType::Q4_K, 128256, 2048, 1e-2}, {1}, 0);
}

TEST(CudaKernels, MatmulZeroBlocks) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0})
    check_matmul({t, 512, 2048, 1e-2}, {1, 5}, 3);
}

TEST(CudaKernels, MatmulConvertedFormats) {
  // Formats without their own kernel yet run as F16 after dequantization on the host.
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_K,
                      QuantType::Q3_K, QuantType::Q2_K, QuantType::IQ4_NL, QuantType::MXFP4})
    check_matmul({t, 256, 2048, 1e-2}, {1, 6}, 0);
}

TEST(CudaKernels, MatmulOddRowLengths) {
  check_matmul({QuantType::F16, 300, 2052, 2e-3}, {1, 3}, 0);   // scalar tail after 8-wide loads
  check_matmul({QuantType::F32, 77, 66, 1e-5}, {2, 9}, 0);      // 66: not a multiple of 4
}

TEST(CudaKernels, UploadedWeightsAreOnTheCardForTheNextLaunch) {
  // A 64 MB weight uploaded and read by a kernel launched at once, with no host work between
  // (the engine uploads each weight on first use, then launches). Each round frees the previous
  // buffer and uploads different values into a new one of the same size, so a kernel that ran
  // before the copy landed would read the previous round's (or unwritten) bytes. A plain
  // cuMemcpyHtoD from pageable memory is not ordered with our non-blocking streams.
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(23);
  const int64_t rows = 8192, k = 2048, n = 2;
  const std::vector<float> x = random_floats(size_t(n * k), rng);
  DeviceBuffer dx = to_device(x, size_t(8 * k));
  DeviceBuffer dout(size_t(n * rows) * sizeof(float));
  for (int round = 0; round < 3; ++round) {
    std::vector<float> w = random_floats(size_t(rows * k), rng);
    std::vector<float> ref(size_t(n * rows));
    reference_kernels().matmul(QuantType::F32, reinterpret_cast<const uint8_t*>(w.data()), rows, k,
                               x.data(), n, ref.data());
    const DeviceWeight dw = DeviceWeight::upload(
        pack_weight(QuantType::F32, reinterpret_cast<const uint8_t*>(w.data()), rows, k));
    G->kernels->matmul(dw, dx.get(), n, dout.get(), Q8Buffers{}, *G->stream);
    G->stream->sync();
    EXPECT_LT(rel_error(from_device(dout, size_t(n * rows)), ref), 1e-5) << "round " << round;
  }
}

TEST(CudaKernels, RmsNormSwigluAdd) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(7);
  const int64_t n = 5, dim = 2048;
  const auto x = random_floats(size_t(n * dim), rng, -3, 3);
  const auto w = random_floats(size_t(dim), rng, 0.5, 1.5);
  std::vector<float> ref(x.size());
  reference_kernels().rms_norm(x.data(), w.data(), n, dim, 1e-5f, ref.data());
  DeviceBuffer dx = to_device(x), dw = to_device(w), dout(x.size() * 4);
  G->kernels->rms_norm(dx.get(), dw.get(), dout.get(), n, dim, 1e-5f, *G->stream);
  G->stream->sync();
  EXPECT_LT(rel_error(from_device(dout, x.size()), ref), 1e-6);

  const auto up = random_floats(x.size(), rng, -2, 2);
  reference_kernels().swiglu(x.data(), up.data(), ref.data(), int64_t(x.size()));
  DeviceBuffer dup = to_device(up);
  G->kernels->swiglu(dx.get(), dup.get(), dout.get(), int64_t(x.size()), *G->stream);
  G->stream->sync();
  EXPECT_LT(rel_error(from_device(dout, x.size()), ref), 1e-6);

  std::vector<float> acc = x;
  reference_kernels().add(acc.data(), up.data(), int64_t(x.size()));
  G->kernels->add(dx.get(), dup.get(), int64_t(x.size()), *G->stream);
  G->stream->sync();
  EXPECT_EQ(from_device(dx, x.size()), acc);  // one float add each: bit-exact
}

TEST(CudaKernels, Rope) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    for (int n_rot : {64, 32}) {
      const int64_t n = 6;
      const int heads = 8, hd = 64;
      RopeParams p;
      p.n_rot = n_rot;
      p.mode = mode;
      p.freq_base = 500000.0f;
      const std::vector<int32_t> pos = {0, 1, 17, 255, 256, 4000};
      auto x = random_floats(size_t(n * heads * hd), rng);
      std::vector<float> ref = x;
      reference_kernels().rope(ref.data(), n, heads, hd, pos.data(), p);
      // The cos/sin table as CudaOps makes it: rotating a unit pair gives (cos, sin).
      std::vector<float> cache(size_t(n * n_rot));
      for (int64_t t = 0; t < n; ++t) {
        std::vector<float> unit(size_t(hd), 0.0f);
        for (int j = 0; j < n_rot / 2; ++j) unit[size_t(mode == RopeMode::Normal ? 2 * j : j)] = 1;
        reference_kernels().rope(unit.data(), 1, 1, hd, &pos[size_t(t)], p);
        for (int j = 0; j < n_rot / 2; ++j) {
          const int a = mode == RopeMode::Normal ? 2 * j : j;
          const int b = mode == RopeMode::Normal ? 2 * j + 1 : j + n_rot / 2;
          cache[size_t(t * n_rot + 2 * j)] = unit[size_t(a)];
          cache[size_t(t * n_rot + 2 * j + 1)] = unit[size_t(b)];
        }
      }
      DeviceBuffer dx = to_device(x), dc = to_device(cache);
      G->kernels->rope(dx.get(), dc.get(), n, heads, hd, n_rot, mode == RopeMode::Neox, *G->stream);
      G->stream->sync();
      EXPECT_LT(rel_error(from_device(dx, x.size()), ref), 1e-6) << "n_rot " << n_rot;
    }
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
