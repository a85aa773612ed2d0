// The native block formats of the CUDA backend (weight_formats.h) without a card: packing GGUF
// rows into the card layouts loses nothing (unpacked bytes == the GGUF bytes, quantize_row
// output with zero blocks included), the planes are 16-byte aligned, the default choice of
// native kinds (blocks of 32 native, K-quants as F16), and every generated source
// of these formats (matvec per kind / tile / rows per warp, grouped launches mixing them with the
// other kinds, the GEMM's dequantization and embedding kernels) compiles under NVRTC for sm_90.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "backend/cuda/compiler.h"
#include "nvrtc_test_util.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/packed_weight.h"
#include "backend/cuda/weight_formats.h"
#include "core/error.h"
#include "core/tuning.h"
#include "quant/quant.h"

namespace jitllm::cuda {
namespace {

constexpr QuantType kTypes[] = {QuantType::Q4_0, QuantType::Q4_1,  QuantType::Q5_0,
                                QuantType::Q5_1, QuantType::Q5_K,  QuantType::Q3_K,
                                QuantType::Q2_K, QuantType::IQ4_NL, QuantType::MXFP4};

std::vector<uint8_t> quantized_rows(QuantType t, int64_t rows, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2, 2);
  const size_t rb = row_bytes(t, k);
  std::vector<uint8_t> w(rb * size_t(rows));
  std::vector<float> x(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : x) v = u(rng) * (1.0f + float(r));  // rows of different magnitudes
    if (r == 1) std::fill(x.begin(), x.begin() + 256, 0.0f);  // a zero (super-)block
    quantize_row(t, x.data(), w.data() + size_t(r) * rb, k);
  }
  return w;
}

TEST(CudaFormatsNoGpu, PackingKeepsEveryGgufByte) {
  std::mt19937 rng(5);
  for (QuantType t : kTypes) {
    const int64_t rows = 5, k = 512;
    const auto w = quantized_rows(t, rows, k, rng);
    PackedWeight p;
    pack_format_weight(t, w.data(), rows, k, p);
    ASSERT_TRUE(is_format_kind(p.kind)) << quant_name(t);
    EXPECT_FALSE(p.converted);
    EXPECT_EQ(format_quant_type(p.kind), t);
    EXPECT_EQ(p.scale_offset % 16, 0u) << quant_name(t);
    // Same bytes as the GGUF rows, except Q3_K's 12 packed scale bytes, stored as 16, and Q5_0's
    // 6-byte (qh, d) records, padded to 8.
    const size_t blocks = size_t(rows * k) / size_t(quant_traits(t).block_elems);
    const size_t extra = t == QuantType::Q3_K ? 4 : t == QuantType::Q5_0 ? 2 : 0;
    EXPECT_EQ(p.bytes.size(), w.size() + extra * blocks) << quant_name(t);
    EXPECT_EQ(unpack_format_weight(p), w) << quant_name(t);
    // The aux plane and (for Q5_K) the blocks keep 16-byte alignment of every main record.
    EXPECT_EQ((p.scale_offset ? p.scale_offset : p.bytes.size()) % (blocks * 16), 0u) << quant_name(t);
  }
}

TEST(CudaFormatsNoGpu, DefaultPolicyRunsTheBlocksOf32NativelyAndTheKQuantsAsF16) {
  tuning::ScopedOverride policy("JITLLM_CUDA_NATIVE_FORMATS", "");  // the default, whatever the environment says
  std::mt19937 rng(6);
  for (QuantType t : kTypes) {
    const bool k_quant = quant_traits(t).block_elems == 256;
    const WeightKind kind = cuda_kind_for(t);
    EXPECT_EQ(kind == WeightKind::F16, k_quant) << quant_name(t) << " runs as " << weight_kind_name(kind);
    const auto w = quantized_rows(t, 2, 256, rng);
    const PackedWeight p = pack_weight(t, w.data(), 2, 256);
    EXPECT_EQ(p.kind, kind);
    EXPECT_EQ(p.converted, k_quant);
  }
}

TEST(CudaFormatsNoGpu, RowsThatAreNotWholeBlocksAreRefused) {
  std::vector<uint8_t> w(4096);
  PackedWeight p;
  EXPECT_THROW(pack_format_weight(QuantType::Q5_K, w.data(), 1, 300, p), Error);
  EXPECT_THROW(pack_format_weight(QuantType::Q4_0, w.data(), 1, 48, p), Error);
  EXPECT_THROW(pack_format_weight(QuantType::Q4_K, w.data(), 1, 256, p), Error);  // not one of them
  EXPECT_THROW(matvec_source(WeightKind::Q3_K, 2000, 1), Error);
  EXPECT_THROW(matvec_source(WeightKind::MXFP4, 48, 1), Error);
}

TEST(CudaFormatsNoGpu, GeneratedSourcesCompileForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  for (QuantType t : kTypes) {
    bool ok = false;
    const WeightKind kind = format_kind_for(t, &ok);
    ASSERT_TRUE(ok);
    // 5632 = 22 super-blocks (lanes past the last block), 2048 the common row.
    for (int nt : {1, 8}) {
      MatvecSpec spec;
      spec.kinds[0] = kind;
      spec.k = nt == 1 ? 5632 : 2048;
      spec.nt = nt;
      spec.rpw = nt == 1 ? 2 : 4;
      EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
    }
  }
  // Grouped launches mixing the new kinds with each other and with the older ones.
  MatvecSpec spec;
  spec.nseg = 3;
  spec.k = 4096;
  spec.kinds[0] = WeightKind::Q5_K;
  spec.kinds[1] = WeightKind::Q3_K;
  spec.kinds[2] = WeightKind::Q6_K;
  EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  spec.kinds[0] = WeightKind::IQ4_NL;
  spec.kinds[1] = WeightKind::Q4_K;
  spec.kinds[2] = WeightKind::MXFP4;
  spec.nt = kMaxMatvecTile;
  spec.rpw = 1;
  EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  spec.kinds[0] = WeightKind::Q2_K;
  spec.kinds[1] = WeightKind::Q5_1;
  spec.kinds[2] = WeightKind::Q8_0;
  spec.nt = 2;
  spec.rpw = 4;
  EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  EXPECT_GT(nvrtc_compile(gemm_source(), "gemm + format dequantization", opts).size(), 1000u);
}

}  // namespace
}  // namespace jitllm::cuda
