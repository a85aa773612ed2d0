// The prefill GEMM (gemm.h: cuBLASLt fed by generated dequantization kernels) against the CPU
// reference matmul on real shapes: 512 x 4096x4096 and 512 x 14336x4096 for every weight kind
// the backend holds (Q4_K, Q6_K, Q8_0, F16, BF16, F32, and formats stored as F16), ragged
// batches of 17..515 rows, the 128256-row head in several dequantization slices; the prefill
// embedding lookup on the card equals dequantize_row bit for bit. The reference
// runs on a sample of weight rows (every slice, its borders, the last row); every other output
// must still be written (the output is poisoned with NaN first). DISABLED_GemmVsMatvecTiming
// prints per-call times of both paths (run by device_run.sh to choose the row threshold).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/gemm.h"
#include "cuda_test_util.h"

namespace jitllm::cuda::test {
namespace {

Gemm* gemm() {
  static std::unique_ptr<Gemm> g = [] {
    std::unique_ptr<Gemm> out;
    if (gpu() && cublaslt_available()) out = std::make_unique<Gemm>(*gpu()->compiler);
    return out;
  }();
  return g.get();
}

#define JITLLM_REQUIRE_GEMM()                                                 \
  JITLLM_REQUIRE_GPU();                                                       \
  std::string why_no_lt;                                                      \
  if (!cublaslt_available(&why_no_lt)) GTEST_SKIP() << why_no_lt;             \
  Gemm* GM = gemm();

// Weight rows the reference checks: spread over the matrix, both sides of every slice border,
// the first and the last.
std::vector<int64_t> sample_rows(int64_t rows, int64_t k) {
  std::vector<int64_t> r = {0, rows - 1};
  for (int i = 1; i < 48; ++i) r.push_back(rows * i / 48 + (i * 7) % 5);
  const int64_t s = Gemm::slice_rows(rows, k);
  for (int64_t b = s; b < rows; b += s) {
    r.push_back(b - 1);
    r.push_back(b);
  }
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  while (!r.empty() && r.back() >= rows) r.pop_back();
  return r;
}

void check_gemm(QuantType type, int64_t rows, int64_t k, std::initializer_list<int64_t> ns,
                double tol) {
  JITLLM_REQUIRE_GEMM();
  std::mt19937 rng(uint32_t(rows * 131 + k + int(type)));
  const std::vector<uint8_t> w = random_weights(type, rows, k, rng);
  const DeviceWeight dw = DeviceWeight::upload(pack_weight(type, w.data(), rows, k));
  const std::vector<int64_t> pick = sample_rows(rows, k);
  const size_t rb = row_bytes(type, k);
  std::vector<uint8_t> sub(rb * pick.size());
  for (size_t i = 0; i < pick.size(); ++i)
    std::copy_n(w.data() + size_t(pick[i]) * rb, rb, sub.data() + i * rb);
  for (int64_t n : ns) {
    const std::vector<float> x = random_floats(size_t(n * k), rng);
    std::vector<float> ref(size_t(n) * pick.size());
    reference_kernels().matmul(type, sub.data(), int64_t(pick.size()), k, x.data(), n, ref.data());
    DeviceBuffer dx = to_device(x, size_t(8 * k));
    DeviceBuffer dout(size_t(n * rows) * sizeof(float));
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    GM->matmul(dw, dx.get(), n, dout.get(), *G->stream);
    G->stream->sync();
    const std::vector<float> all = from_device(dout, size_t(n * rows));
    size_t unwritten = 0;
    for (float v : all) unwritten += !std::isfinite(v);
    EXPECT_EQ(unwritten, 0u) << quant_name(type) << " n=" << n;
    std::vector<float> got(ref.size());
    for (int64_t t = 0; t < n; ++t)
      for (size_t i = 0; i < pick.size(); ++i)
        got[size_t(t) * pick.size() + i] = all[size_t(t * rows + pick[i])];
    const double err = rel_error(got, ref);
    EXPECT_LT(err, tol) << quant_name(type) << " " << rows << "x" << k << " n=" << n;
    // Repeated call: same bits.
    GM->matmul(dw, dx.get(), n, dout.get(), *G->stream);
    G->stream->sync();
    EXPECT_TRUE(from_device(dout, size_t(n * rows)) == all) << quant_name(type) << " n=" << n;
    std::printf("[ cuda     ] gemm %-6s %6ld x %5ld n=%-4ld rel err %.2e (%zu rows checked)\n",
                quant_name(type), long(rows), long(k), long(n), err, pick.size());
  }
}

double tol_for(QuantType t) {
  // Activation rounding: f16 here (bf16 for BF16 weights), the format's vec_dot type (q8_K,
  // q8_0, f16, bf16) in the reference.
  return t == QuantType::F32 ? 1e-5 : t == QuantType::F16 ? 2e-3 : 1e-2;
}

TEST(CudaGemm, RealShapes4096) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16,
                      QuantType::BF16, QuantType::F32})
    check_gemm(t, 4096, 4096, {512}, tol_for(t));
}

TEST(CudaGemm, RealShapesFfn) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16})
    check_gemm(t, 14336, 4096, {512}, tol_for(t));
  check_gemm(QuantType::Q4_K, 4096, 14336, {512}, tol_for(QuantType::Q4_K));  // down projection
}

TEST(CudaGemm, RaggedRows) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16,
                      QuantType::BF16, QuantType::F32})
    check_gemm(t, 2048, 2048, {17, 31, 100, 255, 515}, tol_for(t));
}

TEST(CudaGemm, FormatsStoredAsF16) {
  for (QuantType t : {QuantType::Q4_0, QuantType::Q5_K, QuantType::Q3_K, QuantType::IQ4_NL})
    check_gemm(t, 512, 2048, {40}, 1e-2);
}

TEST(CudaGemm, HeadInSlices) {
  // 128256 x 2048: Gemm::slice_rows gives 32768 rows per slice, so 4 slices (the last partial).
  check_gemm(QuantType::Q6_K, 128256, 2048, {64}, 1e-2);
}

TEST(CudaGemm, OddRowLengths) {
  check_gemm(QuantType::F16, 300, 2052, {20}, 2e-3);
  check_gemm(QuantType::F32, 77, 66, {33}, 1e-5);
}

TEST(CudaGemm, EmbedRowsEqualTheHostDequantization) {
  // The prefill embedding lookup on the card gives dequantize_row's bits for every format it
  // takes; ids include the first and last rows and repeats.
  JITLLM_REQUIRE_GEMM();
  std::mt19937 rng(11);
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16,
                      QuantType::BF16, QuantType::F32}) {
    ASSERT_TRUE(Gemm::embeds_on_card(t));
    const int64_t rows = 3001, k = 2048;
    const std::vector<uint8_t> w = random_weights(t, rows, k, rng, 5);
    const DeviceWeight dw = DeviceWeight::upload(pack_weight(t, w.data(), rows, k));
    std::vector<int32_t> ids = {0, int32_t(rows - 1), 7, 7};
    std::uniform_int_distribution<int32_t> pick(0, int32_t(rows - 1));
    while (ids.size() < 40) ids.push_back(pick(rng));
    std::vector<float> ref(ids.size() * size_t(k));
    for (size_t i = 0; i < ids.size(); ++i)
      dequantize_row(t, w.data() + size_t(ids[i]) * row_bytes(t, k), ref.data() + i * size_t(k), k);
    DeviceBuffer dids(ids.size() * 4), dout(ref.size() * 4);
    dids.upload(ids.data(), ids.size() * 4);
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    GM->embed(dw, dids.get(), int64_t(ids.size()), dout.get(), *G->stream);
    G->stream->sync();
    const std::vector<float> got = from_device(dout, ref.size());
    size_t differ = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      differ += std::memcmp(&got[i], &ref[i], 4) != 0;
    EXPECT_EQ(differ, 0u) << quant_name(t);
    std::printf("[ cuda     ] embed rows %-6s %zu rows of %ld: %zu values differ from the host\n",
                quant_name(t), ids.size(), long(k), differ);
  }
  EXPECT_FALSE(Gemm::embeds_on_card(QuantType::Q5_K));  // stored as F16: stays on the host
}

// Per-call times (median of 20) of the matvec passes and the GEMM for several batch sizes.
TEST(CudaGemm, DISABLED_GemmVsMatvecTiming) {
  JITLLM_REQUIRE_GEMM();
  std::mt19937 rng(5);
  struct Shape { QuantType t; int64_t rows, k; };
  for (Shape sh : {Shape{QuantType::Q4_K, 4096, 4096}, Shape{QuantType::Q4_K, 14336, 4096},
                   Shape{QuantType::Q6_K, 4096, 14336}, Shape{QuantType::Q4_K, 2048, 2048},
                   Shape{QuantType::Q4_K, 8192, 2048}, Shape{QuantType::F16, 14336, 4096},
                   Shape{QuantType::Q8_0, 14336, 4096}}) {
    const std::vector<uint8_t> w = random_weights(sh.t, sh.rows, sh.k, rng);
    const DeviceWeight dw = DeviceWeight::upload(pack_weight(sh.t, w.data(), sh.rows, sh.k));
    for (int64_t n : {8, 16, 24, 32, 48, 64, 128, 512}) {
      const std::vector<float> x = random_floats(size_t(n * sh.k), rng);
      DeviceBuffer dx = to_device(x, size_t(8 * sh.k));
      DeviceBuffer dout(size_t(n * sh.rows) * sizeof(float));
      DeviceBuffer q8(CudaKernels::q8_bytes(n, sh.k));
      const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, sh.k)};
      auto time = [&](auto&& f) {
        std::vector<float> ms;
        for (int i = 0; i < 23; ++i) {
          Event a, b;
          a.record(*G->stream);
          f();
          b.record(*G->stream);
          b.sync();
          if (i >= 3) ms.push_back(b.ms_since(a));
        }
        std::sort(ms.begin(), ms.end());
        return double(ms[ms.size() / 2]);
      };
      const double mv = time([&] { G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream); });
      const double gm = time([&] { GM->matmul(dw, dx.get(), n, dout.get(), *G->stream); });
      const double tflops = 2.0 * double(n * sh.rows * sh.k) / (gm * 1e-3) / 1e12;
      std::printf("[ cuda     ] timing %-5s %6ld x %5ld n=%-4ld matvec %8.1f us  gemm %8.1f us "
                  "(%.0f TFLOP/s)\n", quant_name(sh.t), long(sh.rows), long(sh.k), long(n),
                  mv * 1e3, gm * 1e3, tflops);
    }
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
