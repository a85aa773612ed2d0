// Flash attention for prefill on tensor cores (mma.sync m16n8k16, f16 operands, f32
// accumulation): one CTA per (tile of up to 64 query rows of one sequence, query head), 4 warps
// of 16 rows each; keys in blocks of 64 copied from the f16 KV pages to shared memory
// (cp.async), S = Q K^T and O += P V on tensor cores, online softmax in registers. The mask is
// per row: row i sees keys [0, n_kv[i]) of its sequence (the last `window` of them with a sliding
// window; scores soft-capped where asked), which is the causal mask inside a
// prompt and also serves rows that continue an earlier prompt. GQA: query head h reads KV head
// h / group. Decode steps keep the one-CTA-per-(row, head) kernel (cuda_kernels.h).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/compiler.h"
#include "backend/cuda/cuda_kernels.h"

namespace jitllm::cuda {

// Rows row0 .. row0 + count - 1 of a batch: one sequence, count <= kFlashTileRows.
struct FlashTile {
  int32_t row0 = 0, count = 0;
};
inline constexpr int kFlashTileRows = 64;

// Head sizes the kernel is generated for: multiples of 16 up to 128 (registers bound the rest).
bool flash_supported(int head_dim, bool kv_f16);

// Consecutive rows of the same sequence (row_seq[i]), cut into tiles of kFlashTileRows.
std::vector<FlashTile> flash_tiles(std::span<const int32_t> row_seq);

// Entry point "flash_attention"; grid (n_tiles, n_head), block 128. Q and P each as an f16 pair
// (value + remainder, two MMAs each), so the result is within f32 rounding of the reference.
std::string flash_attention_source(int head_dim);

class FlashAttention {
 public:
  explicit FlashAttention(Compiler& compiler) : compiler_(compiler) {}
  // a: as for CudaKernels::attention (kv_f16 must be true); tiles: device array of n_tiles
  // FlashTile covering every row of a.
  void run(const CudaKernels::AttentionCall& a, CUdeviceptr tiles, int n_tiles, const Stream& s);

 private:
  Compiler& compiler_;
  std::map<int, CUfunction> fns_;  // by head size
};

}  // namespace jitllm::cuda
