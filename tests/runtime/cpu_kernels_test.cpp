// resolve_cpu_kernels: names and the batch-invariant contract (jitllmd --deterministic never
// runs AMX tiles, whose float order differs from the decode kernels'), and AMX as the default
// where the CPU allows it.
#include "runtime/cpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backend/cpu/jit_cpu_features.h"
#include "backend/cpu/jit_kernels.h"
#include "core/error.h"

namespace jitllm {
namespace {

TEST(CpuKernelsByName, BatchInvariantStepsNeverGetAmxTiles) {
  for (const std::string name : {"", "jit", "jit-avx512", "reference"}) {
    if (name == "jit-avx512" && !jit::cpu_supports(jit::Isa::Avx512Vnni)) continue;
    const CpuKernels& k = resolve_cpu_kernels(name, true);
    EXPECT_TRUE(k.batch_invariant()) << "'" << name << "' gave " << k.name();
    EXPECT_STRNE(k.name(), "jit-amx");
  }
}

TEST(CpuKernelsByName, AmxIsTheDefaultWhereUsableAndNamedOtherwiseRefused) {
  const std::vector<std::string> names = jit_kernel_names();
  const bool listed = std::find(names.begin(), names.end(), "jit-amx") != names.end();
  EXPECT_EQ(listed, jit::amx_usable());
  if (!jit::amx_usable()) {
    EXPECT_THROW(resolve_cpu_kernels("jit-amx"), Error);
    GTEST_SKIP() << "no usable AMX on this CPU: the rest needs it";
  }
  const CpuKernels& amx = resolve_cpu_kernels("jit-amx");
  EXPECT_STREQ(amx.name(), "jit-amx");
  EXPECT_FALSE(amx.batch_invariant());
  EXPECT_THROW(resolve_cpu_kernels("jit-amx", true), Error);
  if (jit::selected_amx()) {
    EXPECT_STREQ(resolve_cpu_kernels("jit").name(), "jit-amx");
  }
}

}  // namespace
}  // namespace jitllm
