// respell_flags: llama.cpp's short forms and the old single-dash long names become GNU long
// flags; short flags, values and everything after "--" are left alone.
#include "core/flag_spelling.h"

#include <gtest/gtest.h>

namespace jitllm {
namespace {

TEST(FlagSpelling, RewritesShortFormsAndOldLongNames) {
  const char* argv[] = {"jitllmd", "serve", "-ngl", "99", "-np=4", "-load", "m.gguf",
                        "-m", "x", "-c", "512", "-bogus", "--port", "1", "--", "-load"};
  const FlagSpelling f = respell_flags(int(std::size(argv)), argv,
                                       {{"ngl", "n-gpu-layers"}, {"np", "parallel"}},
                                       {"load", "port", "parallel"});
  const std::vector<std::string> want = {"jitllmd", "serve", "--n-gpu-layers", "99",
                                         "--parallel=4", "--load", "m.gguf", "-m", "x", "-c",
                                         "512", "-bogus", "--port", "1", "--", "-load"};
  EXPECT_EQ(f.args, want);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_EQ(f.warnings[0], "-load is deprecated: use --load");
}

TEST(FlagSpelling, NegativeNumbersAreValues) {
  const char* argv[] = {"jitllm", "run", "--seed", "-12", "--temp", "-1"};
  const FlagSpelling f = respell_flags(int(std::size(argv)), argv, {}, {"seed", "temp"});
  EXPECT_EQ(f.args[3], "-12");
  EXPECT_EQ(f.args[5], "-1");
}

}  // namespace
}  // namespace jitllm
