// Generators of CUDA C++ source text for the kernels the CUDA backend launches. Formats, row
// lengths, batch tiles and head sizes are compile-time constants (#defines at the top of each
// source), so NVRTC unrolls the loops over a row and keeps all indexing in registers.
//
// Launch conventions (the host side in cuda_ops.cpp relies on them):
//  - matvec: grid (ceil(rows / 4), ceil(n / NT)), block 128 (one warp per weight row).
//  - quantize_q8: grid ceil(n * k / 32 / 8), block 256 (one warp per 32-value block).
//  - rms_norm: grid n, block 256.  rope: grid n, block 128.  swiglu/add: grid-stride, block 256.
//  - store_kv: grid n, block 128.  attention: grid (n_rows, n_head), block 128.
#pragma once

#include <cstdint>
#include <string>

namespace jitllm::cuda {

// How a weight matrix is laid out on the card (see packed_weight.h).
enum class WeightKind { F32, F16, BF16, Q8_0, Q4_K, Q6_K };

const char* weight_kind_name(WeightKind kind);
// True for the kinds whose kernels take the activation quantized to int8 blocks of 32.
bool uses_q8_activation(WeightKind kind);

// matvec / small-batch matmul: out[t, r] = dot(w row r, x[t]) for one weight kind and row
// length k, NT activation rows per pass. Entry point "matvec".
std::string matvec_source(WeightKind kind, int64_t k, int nt);

// quantize_q8, rms_norm, rope, swiglu, add, store_kv (runtime shapes).
std::string elementwise_source();

// Decode/prefill attention over paged KV for one head size. Entry point "attention".
std::string attention_source(int head_dim, bool kv_f16);

}  // namespace jitllm::cuda
