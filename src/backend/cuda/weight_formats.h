// The block formats that run natively on the card besides Q8_0 / Q4_K / Q6_K: Q4_0, Q4_1, Q5_0,
// Q5_1, Q5_K, Q3_K, Q2_K, IQ4_NL, MXFP4. This header is the plug-in interface the generic code
// calls for those kinds: names and ids (matvec_source.cpp, kernel_source.cpp), the packing at
// upload (packed_weight.cpp -> packed_weight_formats.cpp), the matvec bodies
// (matvec_formats_source.cpp) and the dequantization / embedding kernels of the prefill GEMM
// (dequant_formats_source.cpp, launched by gemm.cpp).
//
// Layouts on the card (main plane of `rows * nb` records, then the aux plane at scale_offset;
// nb = blocks per row; every record of the main plane is a multiple of 16 bytes so a lane's
// loads are 16-byte aligned):
//  - Q4_0, IQ4_NL: qs[16] per block of 32 | half d per block.
//  - Q4_1:         qs[16]                 | (half d, half m) per block.
//  - Q5_0, Q5_1:   qs[16]                 | (u32 qh, half d, half m or 0) per block (8 bytes).
//  - MXFP4:        qs[16]                 | u8 e (E8M0) per block.
//  - Q5_K:         the GGUF blocks as stored (176 bytes: d, dmin, scales[12], qh[32], qs[128];
//                  16-byte aligned already); no aux plane.
//  - Q3_K:         [qs 64][hmask 32][16 int8 scales, already minus 32] = 112 bytes | half d.
//  - Q2_K:         [qs 64][scales 16] = 80 bytes | (half d, half dmin).
// Every byte of the GGUF blocks is kept (unpack_format_weight gives them back). The card copy is
// the GGUF size except Q3_K (114 bytes per block: the 12 packed scale bytes stored as 16) and
// Q5_0 (24: the (qh, d) record padded to 8 bytes for one aligned load).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/kernel_source.h"
#include "quant/types.h"

namespace jitllm::cuda {

struct PackedWeight;

// True for the kinds of this header.
bool is_format_kind(WeightKind kind);
// The kind a GGUF type runs as when it is one of these formats (ok = false otherwise).
WeightKind format_kind_for(QuantType type, bool* ok);
QuantType format_quant_type(WeightKind kind);
const char* format_kind_name(WeightKind kind);
// Whether pack_weight / cuda_kind_for give `kind` (else the format is dequantized to F16 at
// upload). JITLLM_CUDA_NATIVE_FORMATS: unset or 1 = the blocks of 32 (Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL, MXFP4); all = also the K-quants Q5_K, Q3_K, Q2_K; 0 = none. The K-quants are opt-in:
// their kernels agree with the CPU reference as Q4_K / Q6_K do, but the int8 blocks of 32 the
// activation is rounded to differ from llama.cpp's CPU Q8_K rounding, and on the oracle fixtures
// Q5_K_M and Q2_K that moved the logits just past the 0.03 tolerance (docs/cuda.md, "Kernels").
bool format_runs_native(WeightKind kind);
// KIND_ id in the generated sources (the enum's value: 6..14).
int format_kind_id(WeightKind kind);
// Row lengths must be a multiple of this (the block size: 32 or 256).
int64_t format_row_multiple(WeightKind kind);

// GGUF rows (rows * row_bytes(type, k) bytes) -> the layout above, into p (kind, bytes,
// scale_offset set). Throws jitllm::Error for a type that is not one of these formats.
void pack_format_weight(QuantType type, const uint8_t* data, int64_t rows, int64_t k,
                        PackedWeight& p);
// The inverse: the GGUF bytes of every row (tests: packing loses nothing).
std::vector<uint8_t> unpack_format_weight(const PackedWeight& p);

// Mv<KIND_x> specializations (generated CUDA text; needs the matvec head's ldw helpers and the
// K / NT / RPW / UNR defines) for the format kinds among spec.kinds[0 .. nseg); "" when none.
std::string format_matvec_bodies(const MatvecSpec& spec);

// Kernels appended to gemm_source():
//  dequant_fmt(const u8* w, const u8* w2, u16* out, long long row0, long long rows, int k, int kind)
//    rows [row0, row0 + rows) of a packed weight -> f16 [rows][k], bit-equal to f16 of
//    dequantize_row; one thread per 8 values (grid-stride, block 256).
//  embed_fmt(const u8* w, const u8* w2, const int* ids, float* out, int k, int kind)
//    out[t] = row ids[t] in f32, bit-equal to dequantize_row; grid n, block 256.
// kind: format_kind_id. Needs the GEMM source's typedefs and h2f / f2h.
const char* format_dequant_source();

}  // namespace jitllm::cuda
