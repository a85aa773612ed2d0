// Internal to the AMX GEMM: byte offsets inside a packed panel (jit_amx.h), shared by the packer
// and the emitter.
#pragma once

#include <cstddef>

#include "backend/cpu/jit_amx.h"
#include "quant/types.h"

namespace jitllm::jit::amx_layout {

// Block-of-32 formats, per block: one B tile of 8 rows x 64 bytes (32 elements x 16 rows), then
// the 16 rows' d as floats.
constexpr size_t kB32Tile = 512;
constexpr size_t kB32Bytes = kB32Tile + 64;

// K formats, per super-block: 4 hi tiles then 4 lo tiles (16 rows x 64 bytes: 64 elements x 16
// rows each), the rows' d; Q4_K adds dmin and the 8 groups' mins m_j (floats, 16 rows each).
constexpr size_t kKTile = 1024;
constexpr size_t kKHi = 0, kKLo = 4 * kKTile, kKd = 8 * kKTile, kKdmin = kKd + 64,
                 kKmins = kKdmin + 64;
inline size_t kquant_sb_bytes(QuantType t) {
  return t == QuantType::Q4_K ? kKmins + 8 * 64 : kKd + 64;
}

// Both packers' first step: refuses what the GEMM does not take, zeroes a partial panel (the
// missing rows' scales); true for the block-of-32 formats, false for the K formats.
bool begin_panel(const AmxSource& src, int n_rows, uint8_t* panel);

}  // namespace jitllm::jit::amx_layout
