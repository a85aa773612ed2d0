// Generators of CUDA C++ source text for the kernels the CUDA backend launches. Formats, row
// lengths, batch tiles and head sizes are compile-time constants (#defines at the top of each
// source), so NVRTC unrolls the loops over a row and keeps all indexing in registers.
//
// Launch conventions (the host side in cuda_ops.cpp relies on them):
//  - matvec: grid (sum over segments of ceil(rows / (4 RPW)), ceil(n / NT)), block 128 (one warp
//    per RPW weight rows); segment s starts at CTA seg[s].cta0.
//  - quantize_q8: grid ceil(n * k / 32 / 8), block 256 (one warp per 32-value block).
//  - rms_norm, rms_norm_q8: grid n, block 1024 (RMS_THREADS).  rope: grid n, block 128.
//    swiglu/add: grid-stride, block 256.  swiglu_q8: grid ceil(count / 256), block 256.
//  - store_kv: grid n, block 128.  rope_store: grid n, any block (512).  attention: grid
//    (n_rows, n_head), block 128.
#pragma once

#include <cstdint>
#include <string>

namespace jitllm::cuda {

// How a weight matrix is laid out on the card (see packed_weight.h). The kinds from Q4_0 on are
// the block formats whose layouts and kernels live in weight_formats.h (the plug-in files).
enum class WeightKind { F32, F16, BF16, Q8_0, Q4_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q5_K, Q3_K, Q2_K, IQ4_NL, MXFP4 };

const char* weight_kind_name(WeightKind kind);
// True for the kinds whose kernels take the activation quantized to int8 blocks of 32.
bool uses_q8_activation(WeightKind kind);

// Largest activation tile (rows per matvec pass); activation buffers are padded to it.
inline constexpr int kMaxMatvecTile = 32;

// One matvec kernel variant: 1 to 3 matrices ("segments", e.g. q/k/v) of row length k that read
// the same activation, each of its own kind; NT activation rows per pass, RPW weight rows per
// warp, the loop over a row unrolled `unroll` times.
struct MatvecSpec {
  WeightKind kinds[3] = {WeightKind::F32, WeightKind::F32, WeightKind::F32};
  int nseg = 1;
  int64_t k = 0;
  int nt = 1, rpw = 1, unroll = 4;
  // Programmatic dependent launch with the first weight loads in registers before waiting for the
  // previous kernel (the weights do not depend on it), the dependents let go after the CTA's dot
  // products (so at most one kernel waits ahead).
  bool preload = false;
  // One residual matrix whose last CTA also applies RMSNorm + q8 to the updated residual rows
  // (CudaKernels::NormEpilogue).
  bool norm = false;
  // q, k, v (3 segments, RPW even): RoPE (normal) on q and k and the K/V rows stored in the
  // cache in the epilogue (CudaKernels::RopeEpilogue).
  bool rope = false;
  // gate and up (2 segments, RPW 4): entry point "matvec_swiglu" (grid rows / 32, block 256)
  // writes silu(gate) * up and its q8 blocks (CudaKernels::matmul_swiglu).
  bool swiglu = false;
  // The indexed MoE matvecs instead (moe_source.cpp): per pair (NT 1) "matvec_ids", or with
  // swiglu "matvec_ids_swiglu"; grouped by expert (NT <= 8) "matvec_grouped" and
  // "matvec_grouped_swiglu" (CudaKernels::matmul_ids, matmul_grouped and their swiglu twins).
  bool ids = false;
  std::string name() const;
};

// matvec / small-batch matmul: out_s[t, r] = dot(w_s row r, x[t]) (and res_s[t, r] += the same
// when a residual pointer is given). Entry point "matvec", one MvArgs parameter (cuda_kernels.h
// mirrors it).
std::string matvec_source(const MatvecSpec& spec);
// One segment, one row per warp.
std::string matvec_source(WeightKind kind, int64_t k, int nt);

// The shared head of every generated source: typedefs, half conversion, streaming weight loads,
// cp.async, dp4a, warp reductions, the q8 block quantizer and the PDL macros (kernel_source.cpp).
const char* kernel_prelude();

// The tensor-core kernels' (mmq.h, dq_mma.h) per-segment defines, "#define KIND<i> <id>" (Q8_0 3,
// Q4_K 4, Q6_K 5), after `supports` accepted each kind at row length k (else a jitllm::Error
// naming `what` and the `rule`), and which of the three kinds occur (their bodies are appended).
struct SegmentKinds {
  std::string defs;
  bool q4k = false, q6k = false, q80 = false;
};
SegmentKinds segment_kinds(const WeightKind* kinds, int nseg, int64_t k,
                           bool (*supports)(WeightKind, int64_t), const char* what, const char* rule);

// quantize_q8, rms_norm, rope, swiglu, add, store_kv (runtime shapes).
std::string elementwise_source();
// The MoE kernels of runtime shapes: moe_route, moe_sort, gather_rows, moe_combine
// (moe_source.cpp).
std::string moe_source();
// The indexed matvec kernels' text, appended to a matvec source whose spec has ids.
const char* matvec_ids_text();

// The logits pick (logits_pick.h): entry point "pick_logits", one CTA of 1024 threads a row.
std::string pick_source();

// Decode/prefill attention over paged KV for one head size. Entry point "attention".
// keys_per_step: keys each warp takes per loop step (1, 2, 4, 8; 1 is the one-key loop).
std::string attention_source(int head_dim, bool kv_f16, int keys_per_step = 1);
// Split-K decode attention (split_attention.cpp): entry points "attention_split" and
// "attention_merge".
std::string split_attention_source(int head_dim, bool kv_f16);

}  // namespace jitllm::cuda
