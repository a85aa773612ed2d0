// The decode kernel variants of this slice compile under NVRTC for sm_90 (no card needed): the
// Q4_K matvec at the 8B row lengths, the norm, rope and swiglu epilogues, the argmax kernel (in
// the element-wise source) and split-K decode attention; bad epilogue settings are refused.
#include <gtest/gtest.h>

#include "backend/cuda/compiler.h"
#include "nvrtc_test_util.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/kernel_source.h"
#include "core/error.h"

namespace jitllm::cuda {
namespace {

TEST(CudaDecodeNoGpu, DecodeVariantsCompileForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  MatvecSpec spec;
  spec.kinds[0] = WeightKind::Q4_K;
  for (int64_t k : {int64_t(2048), int64_t(5632), int64_t(14336)}) {
    spec.k = k;
    spec.rpw = 2;
    spec.nt = 1;
    EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  }
  MatvecSpec norm;  // a residual matrix with the norm epilogue
  norm.kinds[0] = WeightKind::Q6_K;
  norm.k = 8192;
  norm.rpw = 2;
  norm.norm = true;
  for (int nt : {1, 8}) {
    norm.nt = nt;
    EXPECT_GT(nvrtc_compile(matvec_source(norm), norm.name(), opts).size(), 1000u) << norm.name();
  }
  MatvecSpec rope;  // q, k, v with the rope epilogue
  rope.kinds[0] = rope.kinds[1] = WeightKind::Q4_K;
  rope.kinds[2] = WeightKind::Q6_K;
  rope.nseg = 3;
  rope.k = 4096;
  rope.rope = true;
  for (int rpw : {2, 4}) {
    rope.rpw = rpw;
    rope.nt = rpw == 2 ? 1 : 8;
    EXPECT_GT(nvrtc_compile(matvec_source(rope), rope.name(), opts).size(), 1000u) << rope.name();
  }
  MatvecSpec sw;  // gate and up with the swiglu epilogue
  sw.kinds[0] = sw.kinds[1] = WeightKind::Q4_K;
  sw.nseg = 2;
  sw.k = 2048;
  sw.rpw = 4;
  sw.swiglu = true;
  for (int nt : {1, 8}) {
    sw.nt = nt;
    const std::string src = matvec_source(sw);
    EXPECT_NE(src.find("matvec_swiglu"), std::string::npos);
    EXPECT_GT(nvrtc_compile(src, sw.name(), opts).size(), 1000u) << sw.name();
  }
  // The PDL preload: the weight loads before griddepcontrol.wait in the bodies that preload
  // (Q4_K, Q6_K, Q8_0), the wait before the body in the others (F16, Q4_0), with the rope
  // epilogue and in mixed groups.
  MatvecSpec pre;
  pre.k = 4096;
  pre.rpw = 2;
  pre.preload = true;
  {
    pre.nseg = 3;
    pre.kinds[0] = WeightKind::Q4_K;
    pre.kinds[1] = WeightKind::Q8_0;
    pre.kinds[2] = WeightKind::Q6_K;
    pre.rope = true;
    std::string src = matvec_source(pre);
    EXPECT_NE(src.find("#define PRELOAD 2"), std::string::npos);
    EXPECT_GT(nvrtc_compile(src, pre.name(), opts).size(), 1000u) << pre.name();
    pre.rope = false;
    pre.nseg = 2;
    pre.kinds[0] = WeightKind::F16;
    pre.kinds[1] = WeightKind::Q4_0;
    EXPECT_GT(nvrtc_compile(matvec_source(pre), pre.name(), opts).size(), 1000u) << pre.name();
    pre.nseg = 1;
    pre.kinds[0] = WeightKind::Q4_K;
    EXPECT_GT(nvrtc_compile(matvec_source(pre), pre.name(), opts).size(), 1000u) << pre.name();
  }
  pre.norm = true;  // the preload goes without the norm epilogue (its CTAs count each other)
  EXPECT_THROW(matvec_source(pre), Error);
  EXPECT_NE(elementwise_source().find("argmax_rows"), std::string::npos);
  for (int hd : {64, 128, 80})  // split-K decode attention
    for (bool f16 : {true, false})
      EXPECT_GT(nvrtc_compile(split_attention_source(hd, f16), "split attention", opts).size(), 1000u);
}

TEST(CudaDecodeNoGpu, BadEpilogueSettingsAreRefused) {
  MatvecSpec rope;
  rope.kinds[0] = rope.kinds[1] = rope.kinds[2] = WeightKind::Q4_K;
  rope.nseg = 3;
  rope.k = 2048;
  rope.rope = true;
  rope.rpw = 1;  // the rotated pairs need two rows per warp
  EXPECT_THROW(matvec_source(rope), Error);
  rope.rpw = 2;
  rope.nseg = 2;
  EXPECT_THROW(matvec_source(rope), Error);
  MatvecSpec norm;
  norm.kinds[0] = norm.kinds[1] = WeightKind::Q4_K;
  norm.nseg = 2;
  norm.k = 2048;
  norm.norm = true;
  EXPECT_THROW(matvec_source(norm), Error);
  MatvecSpec sw;
  sw.kinds[0] = sw.kinds[1] = WeightKind::Q4_K;
  sw.nseg = 2;
  sw.k = 2048;
  sw.rpw = 2;  // the swiglu epilogue's CTA owns 32 rows: 8 warps x 4
  sw.swiglu = true;
  EXPECT_THROW(matvec_source(sw), Error);
  EXPECT_THROW(split_attention_source(0, true), Error);
}

}  // namespace
}  // namespace jitllm::cuda
