// Block layouts of the quantized formats, byte-identical to GGUF/ggml (ggml-common.h), plus the
// non-linear value tables of IQ4_NL and MXFP4. Only plain data: no code that interprets blocks.
// Multi-byte fields are little-endian on disk; like ggml we read them natively (x86/ARM are LE).
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitllm {

inline constexpr int kQK = 32;    // elements per block of the 32-element formats
inline constexpr int kQK_K = 256;  // elements per super-block of the K-quants
inline constexpr int kKScaleBytes = 12;

// x = d * (q - 8), q in 0..15; element j in the low nibble of qs[j], j + 16 in the high nibble.
struct BlockQ4_0 {
  uint16_t d;  // fp16
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q in 0..15.
struct BlockQ4_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[kQK / 2];
};
// x = d * (q - 16), q in 0..31; bit 4 of element j is bit j of qh (little-endian u32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q in 0..31.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activation format of Q4_1/Q5_1 dot products: s = fp16(d * sum(qs)) carries the block sum so
// the weight's min term costs one multiply per block.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
// x = kvalues_iq4nl[q] * d.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = kvalues_mxfp4[q] * 2^(e - 128) (the table holds doubled E2M1 values, hence the - 128).
struct BlockMXFP4 {
  uint8_t e;  // E8M0 exponent
  uint8_t qs[kQK / 2];
};

// 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q in 0..3.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 groups of 16: x = d * (scale6[g] - 32) * (q - 4), q in 0..7 (2 low bits in qs, bit 2 in
// hmask); the 6-bit scales are packed into 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
// 8 groups of 32: x = d * scale6[g] * q - dmin * min6[g], q in 0..15.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 groups of 16: x = d * scales[g] * (q - 32), q in 0..63 (low 4 bits in ql, high 2 in qh).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activation format of the K-quant dot products: float scale, and the sums of each 16 quants so
// the weights' min terms need no per-element work.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// Sizes are the GGUF on-disk facts (types.cpp's block_bytes).
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// IQ4_NL's 16 non-uniform levels (ggml's kvalues_iq4nl).
inline constexpr int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4's E2M1 levels, doubled so they are integers (0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives).
inline constexpr int8_t kValuesMXFP4[16] = {0,  1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace jitllm
