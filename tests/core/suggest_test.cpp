// closest_name: near misspellings find their name, unrelated words find nothing.
#include "core/suggest.h"

#include <gtest/gtest.h>

namespace jitllm {
namespace {

TEST(ClosestName, FindsNearMisspellingsOnly) {
  const std::vector<std::string> names = {"parallel", "port", "model", "ctx-size", "host"};
  EXPECT_EQ(closest_name("prallel", names), "parallel");
  EXPECT_EQ(closest_name("modle", names), "model");
  EXPECT_EQ(closest_name("prot", names), "port");
  EXPECT_EQ(closest_name("ctx-szie", names), "ctx-size");
  EXPECT_EQ(closest_name("xyz", names), "");
  EXPECT_EQ(closest_name("temperature", names), "");
  EXPECT_EQ(closest_name("", names), "");
}

}  // namespace
}  // namespace jitllm
