// The native block formats of weight_formats.h on the card (label gpu): each kind's matvec vs the
// CPU reference matmul on real shapes (2048x2048, 5632x2048, 2048x5632), ragged batches
// (n = 1, 3, 8, 13), zero blocks, repeated calls bitwise equal; the GEMM's dequantization kernel
// and the embedding kernel bit-equal to dequantize_row; the prefill GEMM on them vs the CPU
// reference; the oracle fixtures not in engine_test.cpp's list (Q4_1, Q5_0, Q5_1) on the card vs
// llama.cpp and the CPU engine. CudaFormatsBench (JITLLM_CUDA_BENCH=1) times 14336x4096.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "backend/cpu/reference_kernels.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/weight_formats.h"
#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

constexpr QuantType kTypes[] = {QuantType::Q4_0, QuantType::Q4_1,  QuantType::Q5_0,
                                QuantType::Q5_1, QuantType::Q5_K,  QuantType::Q3_K,
                                QuantType::Q2_K, QuantType::IQ4_NL, QuantType::MXFP4};

void put_half(uint8_t* p, float f) {
  const uint16_t h = f32_to_fp16(f);
  p[0] = uint8_t(h & 0xff);
  p[1] = uint8_t(h >> 8);
}

// rows x k weights in GGUF layout: random quants / high bits / sub-block scales (every bit
// pattern), small random block scales (and mins) so the outputs stay O(1). Every `zero_every`-th
// block (0 = none) is all zero bytes. Much faster than quantize_row at real sizes.
std::vector<uint8_t> random_blocks(QuantType t, int64_t rows, int64_t k, std::mt19937& rng,
                                   int zero_every = 0) {
  const size_t bb = quant_traits(t).block_bytes;
  std::vector<uint8_t> w(row_bytes(t, k) * size_t(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.0005f, 0.004f), off(-0.03f, 0.03f);
  for (auto& b : w) b = uint8_t(byte(rng));
  for (size_t b = 0; b < w.size(); b += bb) {
    uint8_t* p = &w[b];
    switch (t) {
      case QuantType::Q4_0: case QuantType::Q5_0: case QuantType::IQ4_NL:
        put_half(p, scale(rng) * (t == QuantType::IQ4_NL ? 0.1f : 1.0f));
        break;
      case QuantType::Q4_1: case QuantType::Q5_1:
        put_half(p, scale(rng));
        put_half(p + 2, off(rng));
        break;
      case QuantType::MXFP4: p[0] = uint8_t(118 + byte(rng) % 6); break;  // 2^-10 .. 2^-5
      case QuantType::Q5_K:
        put_half(p, scale(rng) * 0.1f);
        put_half(p + 2, scale(rng) * 0.1f);
        break;
      case QuantType::Q3_K: put_half(p + 108, scale(rng) * 0.1f); break;
      case QuantType::Q2_K:
        put_half(p + 80, scale(rng) * 0.2f);
        put_half(p + 82, scale(rng) * 0.1f);
        break;
      default: break;
    }
  }
  if (zero_every > 0)
    for (size_t b = 0; b + bb <= w.size(); b += bb * size_t(zero_every))
      std::fill(w.begin() + long(b), w.begin() + long(b + bb), uint8_t(0));
  return w;
}

// The card layout of t whatever JITLLM_CUDA_NATIVE_FORMATS says (the K-quants are opt-in in the
// engine; their kernels are tested here all the same); pack_weight for the other formats.
PackedWeight pack_native(QuantType t, const uint8_t* w, int64_t rows, int64_t k) {
  bool native = false;
  format_kind_for(t, &native);
  if (!native) return pack_weight(t, w, rows, k);
  PackedWeight p;
  pack_format_weight(t, w, rows, k, p);
  return p;
}

WeightKind kind_of(QuantType t) {
  bool ok = false;
  const WeightKind k = format_kind_for(t, &ok);
  EXPECT_TRUE(ok);
  return k;
}

void check_matmul(QuantType t, int64_t rows, int64_t k, std::initializer_list<int64_t> ns,
                  int zero_every) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(uint32_t(rows * 31 + k + int(t)));
  const std::vector<uint8_t> w = random_blocks(t, rows, k, rng, zero_every);
  const DeviceWeight dw = DeviceWeight::upload(pack_native(t, w.data(), rows, k));
  ASSERT_EQ(dw.kind, kind_of(t)) << "runs as " << weight_kind_name(dw.kind);
  for (int64_t n : ns) {
    const std::vector<float> x = random_floats(size_t(n * k), rng);
    std::vector<float> ref(size_t(n * rows));
    reference_kernels().matmul(t, w.data(), rows, k, x.data(), n, ref.data());
    DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * k));
    DeviceBuffer dout(size_t(n * rows) * sizeof(float));
    DeviceBuffer q8(CudaKernels::q8_bytes(n, k));
    const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, k)};
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream);
    G->stream->sync();
    const std::vector<float> got = from_device(dout, size_t(n * rows));
    const double err = rel_error(got, ref);
    // The activation rounding differs (int8 blocks of 32 here, the format's vec_dot type there).
    EXPECT_LT(err, 1e-2) << quant_name(t) << " " << rows << "x" << k << " n=" << n;
    G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream);
    G->stream->sync();
    EXPECT_EQ(from_device(dout, size_t(n * rows)), got) << quant_name(t) << " n=" << n << " repeated";
    std::printf("[ cuda     ] formats matmul %-6s %5ld x %5ld n=%-2ld zero/%d rel err %.2e\n",
                quant_name(t), long(rows), long(k), long(n), zero_every, err);
  }
}

TEST(CudaFormats, MatvecRealShapesVsCpuReference) {
  for (QuantType t : kTypes) {
    check_matmul(t, 2048, 2048, {1, 3, 8, 13}, 0);
    check_matmul(t, 5632, 2048, {1, 4}, 0);
    check_matmul(t, 2048, 5632, {1, 2}, 0);
  }
}

TEST(CudaFormats, MatvecZeroBlocksRaggedRowsAndLargeTiles) {
  for (QuantType t : kTypes) {
    check_matmul(t, 517, 2048, {1, 5}, 3);        // rows not a multiple of the warp's rows
    check_matmul(t, 256, 2048, {16, 17, 40}, 0);  // several passes of the batch tile
  }
}

// The GEMM source's dequant_fmt / embed_fmt, launched directly: bit-equal to dequantize_row.
TEST(CudaFormats, DequantizationAndEmbeddingBitEqualToDequantizeRow) {
  JITLLM_REQUIRE_GPU();
  const Module& mod = G->compiler->module(gemm_source(), "gemm kernels (formats test)");
  CUfunction deq = mod.function("dequant_fmt"), emb = mod.function("embed_fmt");
  std::mt19937 rng(11);
  for (QuantType t : kTypes) {
    const int64_t rows = 96, k = 2560;  // 10 super-blocks, 80 blocks of 32
    const auto w = random_blocks(t, rows, k, rng, 7);
    const DeviceWeight dw = DeviceWeight::upload(pack_native(t, w.data(), rows, k));
    std::vector<float> ref(size_t(rows * k));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t, w.data() + size_t(r) * row_bytes(t, k), ref.data() + r * k, k);
    // Rows [row0, row0 + m): a slice that does not start at row 0.
    const long long row0 = 17, m = 60;
    DeviceBuffer out(size_t(m * k) * 2);
    CUdeviceptr src = dw.buf.get(), aux = dw.buf.get() + dw.scale_offset, dst = out.get();
    long long mm = m, r0 = row0;
    int kk = int(k), kind = format_kind_id(dw.kind);
    void* args[] = {&src, &aux, &dst, &r0, &mm, &kk, &kind};
    launch(deq, 64, 1, 1, 256, 0, *G->stream, args, "dequant_fmt");
    G->stream->sync();
    std::vector<uint16_t> got(size_t(m * k));
    out.download(got.data(), got.size() * 2);
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i] != f32_to_fp16(ref[size_t(row0 * k) + i]);
    EXPECT_EQ(bad, 0u) << quant_name(t) << " dequant_fmt values differing from f16(dequantize_row)";

    const std::vector<int32_t> ids = {0, 95, 17, 17, 63};
    DeviceBuffer dids(ids.size() * 4), dout(ids.size() * size_t(k) * 4);
    dids.upload(ids.data(), ids.size() * 4);
    CUdeviceptr pid = dids.get(), po = dout.get();
    void* eargs[] = {&src, &aux, &pid, &po, &kk, &kind};
    launch(emb, unsigned(ids.size()), 1, 1, 256, 0, *G->stream, eargs, "embed_fmt");
    G->stream->sync();
    const std::vector<float> e = from_device(dout, ids.size() * size_t(k));
    size_t ebad = 0;
    for (size_t r = 0; r < ids.size(); ++r)
      for (int64_t i = 0; i < k; ++i)
        ebad += std::memcmp(&e[r * size_t(k) + size_t(i)], &ref[size_t(ids[r] * k + i)], 4) != 0;
    EXPECT_EQ(ebad, 0u) << quant_name(t) << " embed_fmt values differing from dequantize_row";
    std::printf("[ cuda     ] formats %-6s dequant_fmt %zu / %zu differ, embed_fmt %zu / %zu differ\n",
                quant_name(t), bad, got.size(), ebad, e.size());
  }
}

TEST(CudaFormats, PrefillGemmVsCpuReference) {
  JITLLM_REQUIRE_GPU();
  if (!cublaslt_available()) GTEST_SKIP() << "no cuBLASLt";
  Gemm gemm(*G->compiler);
  std::mt19937 rng(12);
  for (QuantType t : kTypes) {
    const int64_t rows = 1024, k = 2048, n = 64;
    const auto w = random_blocks(t, rows, k, rng);
    const DeviceWeight dw = DeviceWeight::upload(pack_native(t, w.data(), rows, k));
    const auto x = random_floats(size_t(n * k), rng);
    std::vector<float> ref(size_t(n * rows));
    reference_kernels().matmul(t, w.data(), rows, k, x.data(), n, ref.data());
    DeviceBuffer dx = to_device(x), dout(size_t(n * rows) * 4);
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    gemm.matmul(dw, dx.get(), n, dout.get(), *G->stream);
    G->stream->sync();
    const double err = rel_error(from_device(dout, size_t(n * rows)), ref);
    EXPECT_LT(err, 1e-2) << quant_name(t);
    std::printf("[ cuda     ] formats gemm %-6s %ld x %ld n=%ld rel err %.2e\n", quant_name(t),
                long(rows), long(k), long(n), err);
  }
}

// The fixtures engine_test.cpp does not list: the same checks (llama.cpp's logits within the CPU
// oracle test's tolerance, greedy tokens equal to the CPU engine's where it is not a near tie).
class CudaFormatsFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaFormatsFixture, SameGreedyTokensAsCpuAndLogitsWithinTolerance) {
  JITLLM_REQUIRE_GPU();
  using jitllm::testing::oracle_path;
  const std::string format = GetParam();
  const float tol = 0.03f;
  const auto file = load_model_file(oracle_path("models/synth-llama." + format + ".gguf"));
  EngineOptions oc, og;
  oc.cpu_kernels = og.cpu_kernels = "reference";
  oc.devices = "cpu";
  og.devices = "cuda";
  Engine cpu(file, oc), gpu_engine(file, og);
  auto diff = [](const float* a, const float* b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::isfinite(a[i]) ? std::fabs(a[i] - b[i]) : INFINITY);
    return m;
  };
  auto argmax = [](const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); };
  float worst_prompt = 0, worst_gen = 0;
  int compared = 0;
  for (const char* prompt : {"fox", "rand64", "bos"}) {
    const std::string ref = std::string("logits/synth-llama.") + format + "." + prompt;
    const auto meta = nlohmann::json::parse(jitllm::testing::read_text(oracle_path(ref + ".json")));
    const auto ids = meta["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = meta["greedy_ids"].get<std::vector<int32_t>>();
    const int64_t nv = meta["n_vocab"].get<int64_t>();
    const auto ref_logits = jitllm::testing::read_f32(oracle_path(ref + ".logits.f32"));
    const auto ref_gen = jitllm::testing::read_f32(oracle_path(ref + ".gen_logits.f32"));
    auto sc = cpu.new_session(256), sg = gpu_engine.new_session(256);
    const auto lc = cpu.prefill(*sc, ids, true), lg = gpu_engine.prefill(*sg, ids, true);
    ASSERT_EQ(lg.size(), ref_logits.size());
    worst_prompt = std::max(worst_prompt, diff(lg.data(), ref_logits.data(), lg.size()));
    std::vector<float> rc(lc.end() - nv, lc.end()), rg(lg.end() - nv, lg.end());
    for (size_t i = 0; i < greedy.size(); ++i) {
      std::vector<float> sorted = rc;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] > 2 * tol) {
        EXPECT_EQ(argmax(rg), argmax(rc)) << ref << " step " << i;
        ++compared;
      }
      rc = cpu.decode(*sc, greedy[i]);
      rg = gpu_engine.decode(*sg, greedy[i]);
      worst_gen = std::max(worst_gen, diff(rg.data(), ref_gen.data() + i * size_t(nv), size_t(nv)));
    }
  }
  EXPECT_LE(worst_prompt, tol) << format;
  EXPECT_LE(worst_gen, tol) << format;
  EXPECT_GT(compared, 10) << "too few non-tied greedy steps to compare";
  std::printf("[ cuda     ] %-7s vs llama.cpp max |diff| prompt %.3g gen %.3g (tol %.3g); greedy "
              "steps compared with CPU: %d\n", format.c_str(), worst_prompt, worst_gen, tol, compared);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFormatsFixture, ::testing::Values("Q4_1", "Q5_0", "Q5_1"),
                         [](const auto& info) { return std::string(info.param); });

// Not a test: time per kind at the 8B gate shape, n = 1 (JITLLM_CUDA_BENCH=1). Three weight
// copies rotate (> L2), so the kernels read HBM; GB/s of the bytes on the card.
TEST(CudaFormatsBench, Matvec14336x4096) {
  if (!std::getenv("JITLLM_CUDA_BENCH")) GTEST_SKIP() << "set JITLLM_CUDA_BENCH=1";
  JITLLM_REQUIRE_GPU();
  const int64_t rows = 14336, k = 4096;
  std::mt19937 rng(3);
  Event e0, e1;
  const auto x = random_floats(size_t(kMaxMatvecTile * k), rng);
  DeviceBuffer dx = to_device(x), dout(size_t(kMaxMatvecTile * rows) * 4);
  DeviceBuffer q8(CudaKernels::q8_bytes(kMaxMatvecTile, k));
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1,
                      QuantType::Q5_K, QuantType::Q3_K, QuantType::Q2_K, QuantType::IQ4_NL,
                      QuantType::MXFP4, QuantType::Q4_K, QuantType::Q8_0}) {
    const auto w = random_blocks(t, rows, k, rng);
    std::vector<DeviceWeight> dws;
    for (int c = 0; c < 3; ++c) dws.push_back(DeviceWeight::upload(pack_native(t, w.data(), rows, k)));
    const double bytes = double(dws[0].buf.bytes());
    for (int64_t n : {int64_t(1)}) {
      const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, k)};
      G->kernels->quantize_q8(dx.get(), n, k, qb, *G->stream);
      G->kernels->matmul(dws[0], dx.get(), n, dout.get(), qb, *G->stream, true);  // compile, warm
      G->stream->sync();
      const int reps = 30;
      e0.record(*G->stream);
      for (int r = 0; r < reps; ++r)
        G->kernels->matmul(dws[size_t(r % 3)], dx.get(), n, dout.get(), qb, *G->stream, true);
      e1.record(*G->stream);
      e1.sync();
      const double us = 1000.0 * e1.ms_since(e0) / reps;
      std::printf("[ bench    ] formats %-6s %ld x %ld n=%ld %8.1f us %7.1f GB/s (%.1f MB on the card)\n",
                  quant_name(t), long(rows), long(k), long(n), us, bytes / us / 1e3, bytes / 1e6);
    }
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
