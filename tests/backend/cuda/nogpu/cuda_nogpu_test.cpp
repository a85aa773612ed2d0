// CUDA backend checks that need no card (they run in the CPU suite wherever the toolkit was found
// at build time): every generated kernel source compiles under NVRTC for sm_90, bad kernel
// parameters are refused with a jitllm::Error, and asking for a card that is not there is a clear
// error rather than a crash.
#include <gtest/gtest.h>

#include "backend/cuda/compiler.h"
#include "nvrtc_test_util.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/kernel_source.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda {
namespace {

TEST(CudaNoGpu, EveryGeneratedSourceCompilesForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  const WeightKind kinds[] = {WeightKind::F32, WeightKind::F16, WeightKind::BF16,
                              WeightKind::Q8_0, WeightKind::Q4_K, WeightKind::Q6_K};
  for (WeightKind kind : kinds) {
    for (int nt : {1, 8}) {
      // 2048 and 8192 are real rows; 2080/264 give the scalar tails of the float kernels.
      for (int64_t k : {int64_t(2048), int64_t(8192)}) {
        const std::vector<char> cubin = nvrtc_compile(matvec_source(kind, k, nt), "matvec", opts);
        EXPECT_GT(cubin.size(), 1000u) << weight_kind_name(kind);
      }
    }
  }
  EXPECT_GT(nvrtc_compile(matvec_source(WeightKind::F16, 2052, 4), "f16 tail", opts).size(), 0u);
  EXPECT_GT(nvrtc_compile(matvec_source(WeightKind::F32, 66, 2), "f32 tail", opts).size(), 0u);
  EXPECT_GT(nvrtc_compile(elementwise_source(), "elementwise", opts).size(), 0u);
  EXPECT_GT(nvrtc_compile(pick_source(), "logits pick", opts).size(), 1000u);
  // Grouped launches (q/k/v of mixed kinds), several rows per warp, the largest batch tile.
  for (int rpw : {1, 2, 4}) {
    MatvecSpec spec;
    spec.kinds[0] = WeightKind::Q4_K;
    spec.kinds[1] = WeightKind::Q4_K;
    spec.kinds[2] = WeightKind::Q6_K;
    spec.nseg = 3;
    spec.k = 4096;
    spec.rpw = rpw;
    spec.preload = rpw == 2;  // the PDL weight preload
    for (int nt : {1, 8, kMaxMatvecTile}) {
      spec.nt = nt;
      EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
    }
    spec.kinds[0] = WeightKind::Q8_0;
    spec.kinds[1] = WeightKind::F16;
    spec.kinds[2] = WeightKind::F32;
    spec.nt = 2;
    EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  }
  for (int hd : {64, 128, 80})
    for (bool f16 : {true, false})
      EXPECT_GT(nvrtc_compile(attention_source(hd, f16), "attention", opts).size(), 0u);
  for (int keys : {2, 4, 8})  // keys per warp step
    EXPECT_GT(nvrtc_compile(attention_source(128, true, keys), "attention", opts).size(), 0u) << keys;
}

// The MoE kernels: routing, sort, gather and combine, and the indexed matvecs (per pair and
// grouped, the plain one and the gate/up SwiGLU one) for the kinds real MoE files carry at their row lengths (Qwen3-30B-A3B's
// 2048 and 768, the F16 fixtures' 64 and 32).
TEST(CudaNoGpu, MoeSourcesCompileForSm90) {
  JITLLM_REQUIRE_NVRTC();
  const auto opts = nvrtc_options("sm_90");
  EXPECT_GT(nvrtc_compile(moe_source(), "moe kernels", opts).size(), 1000u);
  const std::pair<WeightKind, int64_t> shapes[] = {{WeightKind::Q4_K, 2048}, {WeightKind::Q6_K, 768},
                                                   {WeightKind::Q8_0, 64}, {WeightKind::F16, 64},
                                                   {WeightKind::F32, 32}};
  for (const auto& [kind, k] : shapes) {
    MatvecSpec spec;
    spec.kinds[0] = spec.kinds[1] = kind;
    spec.k = k;
    spec.rpw = 2;
    spec.ids = true;
    EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
    spec.nseg = 2;
    spec.rpw = 4;
    spec.swiglu = true;
    EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  }
  for (const int nt : {2, 4, 8}) {  // the grouped kernels' tiles
    MatvecSpec spec;
    spec.kinds[0] = spec.kinds[1] = WeightKind::Q4_K;
    spec.kinds[1] = WeightKind::Q6_K;
    spec.k = 2048;
    spec.nt = nt;
    spec.rpw = 4;
    spec.ids = true;
    EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
    spec.nseg = 2;
    spec.swiglu = true;
    EXPECT_GT(nvrtc_compile(matvec_source(spec), spec.name(), opts).size(), 1000u) << spec.name();
  }
  MatvecSpec tiled;
  tiled.kinds[0] = WeightKind::Q4_K;
  tiled.k = 2048;
  tiled.nt = 16;
  tiled.ids = true;
  EXPECT_THROW(matvec_source(tiled), Error);  // the indexed kernels take tiles of up to 8 rows
}

TEST(CudaNoGpu, CompileErrorsCarryTheLog) {
  JITLLM_REQUIRE_NVRTC();
  try {
    nvrtc_compile("extern \"C\" __global__ void f() { undeclared_thing(); }", "broken kernel",
                  nvrtc_options("sm_90"));
    FAIL() << "expected a jitllm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

TEST(CudaNoGpu, BadKernelShapesAreRefused) {
  EXPECT_THROW(matvec_source(WeightKind::Q4_K, 2000, 1), Error);  // not whole blocks of 256
  EXPECT_THROW(matvec_source(WeightKind::Q8_0, 48, 1), Error);
  EXPECT_THROW(matvec_source(WeightKind::F16, 2048, 0), Error);
  EXPECT_THROW(matvec_source(WeightKind::F16, 2048, kMaxMatvecTile + 1), Error);
  MatvecSpec four;
  four.nseg = 4;
  four.k = 2048;
  EXPECT_THROW(matvec_source(four), Error);  // at most 3 matrices per launch
  EXPECT_THROW(attention_source(0, true), Error);
  EXPECT_THROW(attention_source(128, true, 3), Error);
}

TEST(CudaNoGpu, DevicesFlagWithoutACardIsAClearError) {
  const auto file = load_model_file(testing::oracle_path("models/synth-llama.Q8_0.gguf"));
  EngineOptions bad;
  bad.devices = "tpu:0";
  try {
    Engine e(file, bad);
    FAIL() << "expected a jitllm::Error for -devices tpu:0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tpu:0"), std::string::npos) << e.what();
  }
  if (available()) GTEST_SKIP() << "a CUDA device is present; the no-device message cannot be seen";
  EngineOptions o;
  o.devices = "cuda";
  try {
    Engine e(file, o);
    FAIL() << "expected a jitllm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-devices cuda"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace jitllm::cuda
