// CpuOps' row-copy primitives: copy_cols (a column block of each row out) and copy_cols_into
// (a block written into each row), which multi-head latent attention uses to cut a head out of
// q and to set the absorbed query and its rotated part side by side.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace jitllm {
namespace {

TEST(CpuOps, CopyColsIntoWritesOnlyItsBlock) {
  CpuOps ops;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<float> out(12, -1.0f);          // [3, 4]
  const Act xa{x.data(), 3, 2}, oa{out.data(), 3, 4};
  ops.copy_cols_into(xa, oa, 1);
  EXPECT_EQ(out, (std::vector<float>{-1, 1, 2, -1, -1, 3, 4, -1, -1, 5, 6, -1}));
  std::vector<float> back(6, 0.0f);
  ops.copy_cols(oa, 1, Act{back.data(), 3, 2});  // and out again
  EXPECT_EQ(back, x);
  EXPECT_THROW(ops.copy_cols_into(xa, oa, 3), Error);                     // past the row
  EXPECT_THROW(ops.copy_cols_into(xa, Act{out.data(), 2, 4}, 0), Error);  // rows differ
}

}  // namespace
}  // namespace jitllm
