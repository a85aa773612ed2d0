// Seeded random numbers for sampling that give the same sequence on every platform.
// std::mt19937's output is fixed by the C++ standard, but std::uniform_real_distribution is not:
// libstdc++, libc++ and MSVC draw different numbers of engine outputs and round differently, so
// the same seed would pick different tokens on different systems. We derive uniforms ourselves.
#pragma once

#include <cstdint>
#include <random>

namespace jitllm {

class SampleRng {
 public:
  explicit SampleRng(uint32_t seed) : engine_(seed) {}

  void reseed(uint32_t seed) { engine_.seed(seed); }

  // Uniform in [0, 1) with 53 random bits: two 32-bit outputs, the top 27 and 26 bits of each
  // (the MT authors' genrand_res53 construction), exactly representable as a double.
  double uniform() {
    const uint64_t a = engine_() >> 5;  // 27 bits
    const uint64_t b = engine_() >> 6;  // 26 bits
    return double((a << 26) | b) * (1.0 / 9007199254740992.0);  // / 2^53
  }

  uint32_t next_u32() { return uint32_t(engine_()); }

 private:
  std::mt19937 engine_;
};

}  // namespace jitllm
