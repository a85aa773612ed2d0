// XXH64 against values printed by the reference implementation (`xxhsum -H64`, xxHash 0.8.1,
// Debian package xxhash): every code path (empty, <4, 4-7, 8-31 tail, 32-byte stripes + tails).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/jlm_hash.h"

namespace jitllm {
namespace {

TEST(JlmHash, MatchesXxhsumOnStrings) {
  EXPECT_EQ(xxh64("", 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(xxh64("a", 1), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(xxh64("abc", 3), 0x44bc2cf5ad770999ull);
}

TEST(JlmHash, MatchesXxhsumOnEveryLengthClass) {
  // byte i = (7 i + 3) mod 256; reference: `head -c N file | xxhsum -H64`.
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t((i * 7 + 3) % 256);
  const std::vector<std::pair<size_t, uint64_t>> expected = {
      {3, 0x31d2363f52e564c9ull},   {4, 0x9bb64b7d66ee9fdaull},  {7, 0x9a7b149959ce60d8ull},
      {8, 0xdab99d95c6f90092ull},   {31, 0xa2aa5f33cc4a6119ull}, {32, 0x23c3c17ef790fd97ull},
      {33, 0x50a7cfc7ba588784ull},  {63, 0x5e3e54b431c7493cull}, {64, 0x0eb64b3ef6eeb01full},
      {100, 0xa61f8d4c170fe531ull}, {1000, 0x5f235fa033f1a3fbull},
  };
  for (const auto& [n, want] : expected) EXPECT_EQ(xxh64(data.data(), n), want) << "length " << n;
}

}  // namespace
}  // namespace jitllm
