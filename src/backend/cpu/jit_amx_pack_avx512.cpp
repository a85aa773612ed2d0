// amx_pack_panel (jit_amx.h) in AVX-512: each row's group decoded 32 elements a vector into a
// row-major stage (K formats: v = scale * q in int16, split into hi and lo bytes), then every
// 16 rows x 64 bytes of the stage transposed as a 16 x 16 matrix of dwords into one VNNI tile.
// Written with intrinsics rather than emitted: it only runs where the AMX GEMM does (AVX-512 is
// then certain), and its output is checked byte for byte against the plain twin.
// GCC 12 warns inside its own avx512fintrin.h (the unpack intrinsics' undefined pass-through).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_amx_layout.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/ref_kernels.h"

#define JITLLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace jitllm::jit {

namespace {

using namespace amx_layout;

// 16 rows of 64 bytes (`stride` apart) -> one tile: tile row i = dword i of rows 0..15.
JITLLM_AVX512 void transpose_tile(const int8_t* stage, int stride, uint8_t* tile) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(stage + i * stride);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + e], lane j: rows 4g..4g+3 at column 4j + e.
  for (int g = 0; g < 4; ++g) {
    const __m512i a = t[4 * g], b = t[4 * g + 1], c = t[4 * g + 2], d = t[4 * g + 3];
    r[4 * g + 0] = _mm512_unpacklo_epi64(a, c);
    r[4 * g + 1] = _mm512_unpackhi_epi64(a, c);
    r[4 * g + 2] = _mm512_unpacklo_epi64(b, d);
    r[4 * g + 3] = _mm512_unpackhi_epi64(b, d);
  }
  for (int e = 0; e < 4; ++e) {  // a 4 x 4 transpose of 128-bit lanes per e
    const __m512i v0 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0x88);
    const __m512i v1 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0xDD);
    const __m512i v2 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0x88);
    const __m512i v3 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0xDD);
    _mm512_storeu_si512(tile + (0 + e) * 64, _mm512_shuffle_i32x4(v0, v2, 0x88));
    _mm512_storeu_si512(tile + (4 + e) * 64, _mm512_shuffle_i32x4(v1, v3, 0x88));
    _mm512_storeu_si512(tile + (8 + e) * 64, _mm512_shuffle_i32x4(v0, v2, 0xDD));
    _mm512_storeu_si512(tile + (12 + e) * 64, _mm512_shuffle_i32x4(v1, v3, 0xDD));
  }
}

// 32 int16 weights -> their hi (v >> 6) and lo (v & 63) bytes.
JITLLM_AVX512 inline void split_store(__m512i v, int8_t* hi, int8_t* lo) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 6)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo),
                      _mm512_cvtepi16_epi8(_mm512_and_si512(v, _mm512_set1_epi16(63))));
}

// Q4_K fields: header d, dmin, scales[12]; body qs[128].
JITLLM_AVX512 void q4k_row(const uint8_t* scales, const uint8_t* qs, int8_t* hi, int8_t* lo,
                           float* mins, int mins_stride) {
  const __m512i m4 = _mm512_set1_epi16(0xF);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc0, mn0, sc1, mn1;
    quant_ref::k4_scale_min(2 * c, scales, sc0, mn0);
    quant_ref::k4_scale_min(2 * c + 1, scales, sc1, mn1);
    mins[(2 * c) * mins_stride] = float(mn0);
    mins[(2 * c + 1) * mins_stride] = float(mn1);
    const __m512i q = _mm512_cvtepu8_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c)));
    const __m512i v0 = _mm512_mullo_epi16(_mm512_and_si512(q, m4), _mm512_set1_epi16(sc0));
    const __m512i v1 = _mm512_mullo_epi16(_mm512_srli_epi16(q, 4), _mm512_set1_epi16(sc1));
    split_store(v0, hi + 64 * c, lo + 64 * c);
    split_store(v1, hi + 64 * c + 32, lo + 64 * c + 32);
  }
}

JITLLM_AVX512 inline __m512i load(const uint8_t* p) {  // 32 bytes -> 32 int16
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q6_K fields: body ql[128], qh[64]; header scales[16].
JITLLM_AVX512 void q6k_row(const uint8_t* ql_qh, const int8_t* scales, int8_t* hi, int8_t* lo) {
  const uint8_t* ql = ql_qh;
  const uint8_t* qhs = ql_qh + kQK_K / 2;
  const __m512i m4 = _mm512_set1_epi16(0xF), m3 = _mm512_set1_epi16(3),
                c32 = _mm512_set1_epi16(32);
  for (int h = 0; h < 2; ++h) {
    const __m512i ql0 = load(ql + 64 * h), ql1 = load(ql + 64 * h + 32), qh = load(qhs + 32 * h);
    const __m512i q[4] = {
        _mm512_or_si512(_mm512_and_si512(ql0, m4), _mm512_slli_epi16(_mm512_and_si512(qh, m3), 4)),
        _mm512_or_si512(_mm512_and_si512(ql1, m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2), m3), 4)),
        _mm512_or_si512(_mm512_srli_epi16(ql0, 4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), m3), 4)),
        _mm512_or_si512(_mm512_srli_epi16(ql1, 4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 6), m3), 4))};
    for (int quarter = 0; quarter < 4; ++quarter) {
      const int e = 128 * h + 32 * quarter;  // elements e..e+31, scales e/16 and e/16 + 1
      const __m512i sc = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(scales[e / 16]),
                                                 _mm512_set1_epi16(scales[e / 16 + 1]));
      split_store(_mm512_mullo_epi16(_mm512_sub_epi16(q[quarter], c32), sc), hi + e, lo + e);
    }
  }
}

JITLLM_AVX512 void pack_block32(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel) {
  alignas(64) int8_t stage[kAmxRows][64] = {};
  alignas(16) uint8_t tmp[sizeof(BlockQ8_0)];
  const __m256i m4 = _mm256_set1_epi8(0xF), c8 = _mm256_set1_epi8(8);
  const RepackFields rf = src.type == QuantType::Q8_0 ? repack_fields(src.type) : RepackFields{};
  for (int64_t b = 0; b < src.k / kQK; b += 2) {  // two blocks: one 16 x 64 transpose
    uint8_t* tile0 = panel + size_t(b) * kB32Bytes;
    uint8_t* tile1 = tile0 + kB32Bytes;
    for (int r = 0; r < n_rows; ++r) {
      for (int h = 0; h < 2; ++h) {
        float* d = reinterpret_cast<float*>((h ? tile1 : tile0) + kB32Tile);
        if (src.type == QuantType::Q8_0) {  // body qs[32], side d
          const AmxSource::Fields f = src.fields(rf, r0 + r, b + h);
          std::memcpy(stage[r] + 32 * h, f.body, kQK);
          uint16_t h16;
          std::memcpy(&h16, f.side, 2);
          d[r] = fp16_to_f32(h16);
        } else {
          const auto& blk = *reinterpret_cast<const BlockQ4_0*>(src.block(r0 + r, b + h, tmp));
          const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
          const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q),
                                                       _mm_srli_epi16(q, 4), 1);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(stage[r] + 32 * h),
                              _mm256_sub_epi8(_mm256_and_si256(both, m4), c8));
          d[r] = fp16_to_f32(blk.d);
        }
      }
    }
    // Columns 0..7 of the transpose are block b's 8 tile rows, 8..15 block b + 1's.
    alignas(64) uint8_t tile[16 * 64];
    transpose_tile(&stage[0][0], 64, tile);
    std::memcpy(tile0, tile, kB32Tile);
    std::memcpy(tile1, tile + kB32Tile, kB32Tile);
  }
}

JITLLM_AVX512 void pack_kquant(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel) {
  const size_t sb_bytes = kquant_sb_bytes(src.type);
  const RepackFields rf = repack_fields(src.type);
  alignas(64) int8_t hi[kAmxRows][kQK_K] = {}, lo[kAmxRows][kQK_K] = {};
  for (int64_t s = 0; s < src.k / kQK_K; ++s) {
    uint8_t* sb = panel + size_t(s) * sb_bytes;
    auto* d = reinterpret_cast<float*>(sb + kKd);
    for (int r = 0; r < n_rows; ++r) {
      const AmxSource::Fields f = src.fields(rf, r0 + r, s);
      uint16_t dh[2];
      if (src.type == QuantType::Q4_K) {  // header d, dmin, scales[12]; body qs
        q4k_row(f.hdr + 4, f.body, hi[r], lo[r], reinterpret_cast<float*>(sb + kKmins) + r, 16);
        std::memcpy(dh, f.hdr, 4);
        d[r] = fp16_to_f32(dh[0]);
        reinterpret_cast<float*>(sb + kKdmin)[r] = fp16_to_f32(dh[1]);
      } else {  // body ql, qh; header scales; side d
        q6k_row(f.body, reinterpret_cast<const int8_t*>(f.hdr), hi[r], lo[r]);
        std::memcpy(dh, f.side, 2);
        d[r] = fp16_to_f32(dh[0]);
      }
    }
    for (int q = 0; q < 4; ++q) {
      transpose_tile(&hi[0][64 * q], kQK_K, sb + kKHi + q * kKTile);
      transpose_tile(&lo[0][64 * q], kQK_K, sb + kKLo + q * kKTile);
    }
  }
}

}  // namespace

void amx_pack_panel(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel) {
  if (begin_panel(src, n_rows, panel))
    pack_block32(src, r0, n_rows, panel);
  else
    pack_kquant(src, r0, n_rows, panel);
}

}  // namespace jitllm::jit
