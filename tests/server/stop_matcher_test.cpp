// StopMatcher: stops inside one piece and across pieces, false starts released, earliest stop
// wins, held text flushed at the end.
#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace jitllm::server {
namespace {

// Feeds pieces, returns everything emitted (pushes + flush).
std::string feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("Hello"), "Hello");
  EXPECT_EQ(m.push(" world"), " world");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopAcrossPieces) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abc E"), "abc ");  // "E" may start END: held back
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("Dxyz"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched_stop(), "END");
  EXPECT_EQ(m.push("more"), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"END"});
  EXPECT_EQ(feed(m, {"a E", "N", "x b"}), "a ENx b");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(feed(m, {"Hello world"}), "Hel");
  EXPECT_EQ(m.matched_stop(), "lo");
}

TEST(StopMatcher, HeldTextFlushedAtEnd) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(m.push("line\n"), "line");
  EXPECT_EQ(m.flush(), "\n");
}

TEST(StopMatcher, StopInsideOnePiece) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(feed(m, {"x</s>y"}), "x");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace jitllm::server
