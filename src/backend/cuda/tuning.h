// The CUDA backend's settings (core/tuning.h): every JITLLM_* variable src/backend/cuda reads,
// each read once. What each one chose when it was kept, and the measurements that retired the
// others: docs/tuning.md.
#pragma once

#include "core/tuning.h"

namespace jitllm::cuda {

struct CudaKnobs {
  tuning::Registry registry{"cuda"};
  tuning::Flag graph{registry, "JITLLM_CUDA_GRAPH", true,
                     "capture decode steps into CUDA graphs and replay them (0: every step launches directly)"};
  tuning::Flag stats{registry, "JITLLM_CUDA_STATS", false,
                     "print at exit: kernels compiled, cubins from the disk cache, weight bytes, KV pages, graph replays"};
  tuning::Flag profile{registry, "JITLLM_CUDA_PROFILE", false,
                       "time every launch (each waited for, graphs off) and print the time per kernel at exit"};
  tuning::Flag batch_invariant{registry, "JITLLM_BATCH_INVARIANT", false,
                               "1: sessions stepped together give their solo steps' bits (matvec decode, no automatic split-K)"};
  tuning::Text splitk{registry, "JITLLM_CUDA_SPLITK", "auto", "auto, 0 (never) or a split count up to 1024",
                      splitk_value,
                      "split-K decode attention: chosen per step (auto), never (0) or always, over up to S CTAs a head"};
  tuning::Number attn_keys{registry, "JITLLM_CUDA_ATTN_KEYS", 4, {1, 2, 4, 8},
                           "keys each warp of the decode attention kernel takes per loop step"};
  tuning::Flag gemm{registry, "JITLLM_CUDA_GEMM", true,
                    "prefill matmuls of 16 rows or more on cuBLASLt (0: the matvec passes)"};
  tuning::Flag flash{registry, "JITLLM_CUDA_FLASH", true,
                     "flash attention for prompt steps (0: the paged decode kernel for every step)"};
  tuning::Flag mmq{registry, "JITLLM_CUDA_MMQ", true,
                   "decode steps of 8..64 rows on tensor cores (0: the matvec)"};
  tuning::Flag dqmma{registry, "JITLLM_CUDA_DQMMA", true,
                     "those steps on the f16 tensor-core kernel, DQ-MMA (0: the int8 MMQ)"};
  tuning::Choice pdl{registry, "JITLLM_CUDA_PDL", "3", {"0", "3"},
                     "programmatic dependent launch on sm_90+, first weight step loaded before the wait (0: off)"};
  tuning::Choice native_formats{registry, "JITLLM_CUDA_NATIVE_FORMATS", "1", {"0", "1", "all"},
                                "block formats run natively: those of 32 (1), also Q5_K/Q3_K/Q2_K (all), none (0: as F16)"};
  // The fused ops (decode_fusion.cpp).
  tuning::Flag fuse{registry, "JITLLM_CUDA_FUSE", true,
                    "fused ops and launches: residual epilogue, norm + q8, rope + KV store, attention + q8 (0: the plain twins, one kernel per op)"};
  tuning::Flag dq_swiglu{registry, "JITLLM_CUDA_DQ_SWIGLU", true,
                         "in a batched (DQ-MMA) step, gate and up with the SwiGLU epilogue (0: then swiglu_q8)"};
  tuning::Number moe_grouped{registry, "JITLLM_CUDA_MOE_GROUPED", 32, 1, 65,
                            "MoE decode steps of at least this many rows (up to 64) sort their rows by expert and run each chosen expert once over its rows; fewer rows: each (row, expert) pair alone (65: never)"};

  // The value of JITLLM_CUDA_SPLITK: -1 = auto (unset, empty or "auto"), else the split count.
  static std::optional<int> splitk_value(const std::string& v);
};
const CudaKnobs& knobs();

}  // namespace jitllm::cuda
