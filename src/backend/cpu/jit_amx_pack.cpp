// The plain C++ twin of the panel packing (jit_amx.h): weights of 16 rows unpacked into int8 tiles
// in VNNI order (element e of row r at byte (e / 4) * 64 + 4 r + e % 4 of its tile), then the
// rows' float scales. The oracle of the AVX-512 packing (jit_amx_pack_avx512.cpp), which the
// GEMM runs.
#include <cstring>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_amx_layout.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/formats.h"
#include "quant/quant.h"
#include "quant/ref_kernels.h"

namespace jitllm::jit {

namespace {

using namespace amx_layout;

// Integer weights v[256] of one super-block (v = scale * q, the reference's isum terms).
void q4k_values(const BlockQ4_K& b, int16_t v[kQK_K], float mins[8]) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    quant_ref::k4_scale_min(j, b.scales, sc, mn);
    mins[j] = float(mn);
    const uint8_t* qs = b.qs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) {
      const int q = j % 2 == 0 ? qs[l] & 0xF : qs[l] >> 4;
      v[32 * j + l] = int16_t(sc * q);
    }
  }
}

void q6k_values(const BlockQ6_K& b, int16_t v[kQK_K]) {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    int16_t* o = v + 128 * half;
    for (int l = 0; l < 32; ++l) {
      o[l] = int16_t(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      o[l + 32] = int16_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      o[l + 64] = int16_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      o[l + 96] = int16_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  for (int e = 0; e < kQK_K; ++e) v[e] = int16_t(v[e] * b.scales[e / 16]);
}

// Row-major staging of a panel's 16 rows (one group: 32 or 256 elements) -> VNNI tiles of 64
// elements (16 tile rows of 64 bytes) or 32 elements (8 tile rows).
void to_vnni(const int8_t* stage, int stage_stride, int elems, uint8_t* tile) {
  for (int i = 0; i < elems / 4; ++i)
    for (int r = 0; r < kAmxRows; ++r)
      std::memcpy(tile + i * 64 + r * 4, stage + r * stage_stride + 4 * i, 4);
}

void pack_block32(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel) {
  const int64_t nb = src.k / kQK;
  alignas(64) int8_t stage[kAmxRows][kQK] = {};
  alignas(16) uint8_t tmp[sizeof(BlockQ8_0)];
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* tile = panel + size_t(b) * kB32Bytes;
    auto* d = reinterpret_cast<float*>(tile + kB32Tile);
    for (int r = 0; r < n_rows; ++r) {
      const uint8_t* block = src.block(r0 + r, b, tmp);
      int8_t* q = stage[r];
      if (src.type == QuantType::Q8_0) {
        const auto& blk = *reinterpret_cast<const BlockQ8_0*>(block);
        std::memcpy(q, blk.qs, kQK);
        d[r] = fp16_to_f32(blk.d);
      } else {
        const auto& blk = *reinterpret_cast<const BlockQ4_0*>(block);
        for (int l = 0; l < kQK / 2; ++l) {
          q[l] = int8_t((blk.qs[l] & 0xF) - 8);
          q[l + kQK / 2] = int8_t((blk.qs[l] >> 4) - 8);
        }
        d[r] = fp16_to_f32(blk.d);
      }
    }
    to_vnni(&stage[0][0], kQK, kQK, tile);
  }
}

void pack_kquant(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel) {
  const int64_t nsb = src.k / kQK_K;
  const size_t sb_bytes = kquant_sb_bytes(src.type);
  alignas(64) int8_t hi[kAmxRows][kQK_K] = {}, lo[kAmxRows][kQK_K] = {};
  alignas(16) uint8_t tmp[sizeof(BlockQ6_K)];
  for (int64_t s = 0; s < nsb; ++s) {
    uint8_t* sb = panel + size_t(s) * sb_bytes;
    auto* d = reinterpret_cast<float*>(sb + kKd);
    for (int r = 0; r < n_rows; ++r) {
      const uint8_t* block = src.block(r0 + r, s, tmp);
      alignas(64) int16_t v[kQK_K];
      if (src.type == QuantType::Q4_K) {
        const auto& blk = *reinterpret_cast<const BlockQ4_K*>(block);
        float mins[8];
        q4k_values(blk, v, mins);
        d[r] = fp16_to_f32(blk.d);
        reinterpret_cast<float*>(sb + kKdmin)[r] = fp16_to_f32(blk.dmin);
        for (int j = 0; j < 8; ++j) reinterpret_cast<float*>(sb + kKmins + 64 * j)[r] = mins[j];
      } else {
        const auto& blk = *reinterpret_cast<const BlockQ6_K*>(block);
        q6k_values(blk, v);
        d[r] = fp16_to_f32(blk.d);
      }
      for (int e = 0; e < kQK_K; ++e) {  // v = 64 hi + lo, |hi| <= 64, lo in 0..63
        hi[r][e] = int8_t(v[e] >> 6);
        lo[r][e] = int8_t(v[e] & 63);
      }
    }
    for (int q = 0; q < 4; ++q) {
      to_vnni(&hi[0][64 * q], kQK_K, 64, sb + kKHi + q * kKTile);
      to_vnni(&lo[0][64 * q], kQK_K, 64, sb + kKLo + q * kKTile);
    }
  }
}

}  // namespace

bool amx_supported(QuantType type, int64_t k) {
  switch (type) {
    case QuantType::Q8_0:
    case QuantType::Q4_0: return k > 0 && k % 64 == 0;
    case QuantType::Q4_K:
    case QuantType::Q6_K: return k > 0 && k % kQK_K == 0;
    default: return false;
  }
}

size_t amx_panel_bytes(QuantType type, int64_t k) {
  if (type == QuantType::Q8_0 || type == QuantType::Q4_0) return size_t(k / kQK) * kB32Bytes;
  return size_t(k / kQK_K) * kquant_sb_bytes(type);
}

const uint8_t* AmxSource::block(int64_t r, int64_t b, uint8_t* tmp) const {
  if (!packed) return w + size_t(r) * size_t(stride) + size_t(b) * quant_traits(type).block_bytes;
  // The interleaved copy (jit_repack.h): groups of kRepackGroup rows, the tail rows alone.
  const RepackFields f = repack_fields(type);
  const int64_t full = packed->rows - packed->rows % kRepackGroup;
  const int64_t g = r < full ? kRepackGroup : 1;
  const int64_t first = r < full ? r - r % kRepackGroup : r, i = r - first;
  const uint8_t* rec = packed->main + size_t(first * packed->main_row_bytes) +
                       size_t(b * g * (f.hdr + f.body));
  std::memcpy(tmp + f.hdr_from, rec + i * f.hdr, size_t(f.hdr));
  std::memcpy(tmp + f.body_from, rec + g * f.hdr + i * f.body, size_t(f.body));
  if (f.side)
    std::memcpy(tmp + f.side_from,
                packed->side + size_t(first * packed->side_row_bytes) + size_t((b * g + i) * f.side),
                size_t(f.side));
  return tmp;
}

namespace amx_layout {

bool begin_panel(const AmxSource& src, int n_rows, uint8_t* panel) {
  if (!amx_supported(src.type, src.k) || n_rows < 1 || n_rows > kAmxRows)
    throw_error("amx panel: {} rows of {} at k={} unsupported", n_rows, quant_name(src.type), src.k);
  if (n_rows < kAmxRows) std::memset(panel, 0, amx_panel_bytes(src.type, src.k));
  return src.type == QuantType::Q8_0 || src.type == QuantType::Q4_0;
}

}  // namespace amx_layout

void amx_pack_panel_reference(const AmxSource& src, int64_t r0, int n_rows, uint8_t* panel) {
  if (begin_panel(src, n_rows, panel))
    pack_block32(src, r0, n_rows, panel);
  else
    pack_kquant(src, r0, n_rows, panel);
}

}  // namespace jitllm::jit
