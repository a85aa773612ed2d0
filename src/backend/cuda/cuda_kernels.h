// Host side of the generated kernels: compiles (through the cached Compiler) the variant a call
// needs, on first use, and launches it on a stream. Pointers are device addresses. Used by
// CudaOps and directly by the GPU kernel tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>

#include "backend/cuda/compiler.h"
#include "backend/cuda/device.h"
#include "backend/cuda/packed_weight.h"

namespace jitllm::cuda {

// A weight matrix resident on the card.
struct DeviceWeight {
  WeightKind kind = WeightKind::F32;
  int64_t rows = 0, k = 0;
  DeviceBuffer buf;
  size_t scale_offset = 0;
  static DeviceWeight upload(const PackedWeight& p);
};

// Activation rows quantized for the dp4a kernels: int8 [n][k] and (d, d*sum) [n][k/32]; when h
// is set, the kernels that quantize also write f16(q d) [n][k] there (the DQ-MMA activation).
struct Q8Buffers {
  CUdeviceptr q = 0, ds = 0, h = 0;
};

// One matrix of a grouped matvec launch: out [n][w.rows] = x . w^T, and res [n][w.rows] += the
// same when res is set (the residual add fused into the epilogue).
struct MatmulSeg {
  const DeviceWeight* w = nullptr;
  CUdeviceptr out = 0, res = 0;
};

// One matrix of a tensor-core launch (mmq.h, dq_mma.h) as the kernels' MqSeg / DqSeg read it:
// weights, their scale plane, out, res, rows, and the launch's first CTA for this matrix.
struct TcSegArg {
  uint64_t w, w2, out, res;
  int32_t rows, cta0;
};
static_assert(sizeof(TcSegArg) == 40, "must match the kernels' MqSeg / DqSeg");
// Fills seg[i] and kinds[i] for each matrix, giving each ceil(rows / rows_per_cta) CTAs in order;
// returns the launch's CTA count.
int64_t tc_segments(std::span<const MatmulSeg> segs, int64_t rows_per_cta, TcSegArg (&seg)[3],
                    WeightKind (&kinds)[3]);

// Time per kernel name (JITLLM_CUDA_PROFILE=1: every launch is bracketed by events and waited
// for, so the sum is the kernels' time without overlap; graphs are off then).
struct KernelProfile {
  struct Entry { int64_t count = 0; double ms = 0; };
  std::map<std::string, Entry> by_name;
  std::string report() const;
  // One launch bracketed by events and waited for; its time is added under `label`.
  void timed_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, size_t smem,
                    const Stream& s, void** args, const std::string& label);

 private:
  std::unique_ptr<Event> ev0_, ev1_;
};

class CudaKernels {
 public:
  CudaKernels(const Device& device, Compiler& compiler);

  // Activation tile (rows per matvec pass) used for a batch of n rows (at most kMaxMatvecTile).
  static int tile_for(int64_t n);
  // Weight rows per warp for a tile, and the unroll of the loop over a row (the benches override
  // both with tune()).
  static int rows_per_warp(int nt);
  static int unroll();
  // Bytes the Q8 buffers need for n rows of k (n rounded up to the tile).
  static size_t q8_bytes(int64_t n, int64_t k);
  static size_t q8_ds_offset(int64_t n, int64_t k);

  // out[t, r] = dot(w row r, x[t]); x: [n_pad][k] f32 where n_pad = n rounded up to the tile
  // (rows past n are read and ignored); q8: scratch of q8_bytes(n, k) for quantized kinds.
  // x_quantized: q8 already holds x quantized (several matrices reading the same activation).
  void matmul(const DeviceWeight& w, CUdeviceptr x, int64_t n, CUdeviceptr out, Q8Buffers q8,
              const Stream& s, bool x_quantized = false);
  // After a residual matvec (res += W x), RMSNorm of the updated residual rows into out and q8
  // (as rms_norm_q8, same bits), done by the launch's last CTA. counters: kNormCounters u32,
  // zero before the first launch (each launch leaves them zero).
  struct NormEpilogue {
    CUdeviceptr w = 0, out = 0, counters = 0;
    Q8Buffers q8;
    float eps = 0;
  };
  static constexpr int64_t kNormCounters = 64;
  // q, k, v of one launch: RoPE (normal, pairs of adjacent rows) on q and k from the step's
  // cos/sin table [n][n_rot], and the K and V rows stored at rows[t] + koff / voff (f16 or f32),
  // as rope_store does after a plain launch.
  struct RopeEpilogue {
    CUdeviceptr cache = 0, rows = 0;
    uint64_t koff = 0, voff = 0;
    int head_dim = 0, n_rot = 0;
    bool f16 = true;
  };
  bool rope_epilogue_fits(std::span<const MatmulSeg> segs, int64_t n, int head_dim) const;
  // gate and up (same rows, a multiple of 32; n <= 8): out [n][rows] = silu(x . gate^T) *
  // (x . up^T) and out quantized into q8_out, bit-identical to the two matvecs then swiglu_q8;
  // the gate and up outputs of segs are not written. q8_out must not overlap q8.
  static bool swiglu_fits(std::span<const MatmulSeg> segs, int64_t n);
  void matmul_swiglu(std::span<const MatmulSeg> segs, CUdeviceptr x, int64_t n, Q8Buffers q8,
                     const Stream& s, bool x_quantized, CUdeviceptr out, Q8Buffers q8_out);
  // One matrix with a residual, output rows == cols, one tile of activation rows.
  static bool norm_epilogue_fits(std::span<const MatmulSeg> segs, int64_t n, int64_t cols);
  // Up to 3 matrices of one row length reading the same x in one launch (segments of any kinds).
  void matmul_group(std::span<const MatmulSeg> segs, CUdeviceptr x, int64_t n, Q8Buffers q8,
                    const Stream& s, bool x_quantized = false,
                    const NormEpilogue* norm = nullptr, const RopeEpilogue* rope = nullptr);
  void quantize_q8(CUdeviceptr x, int64_t n, int64_t k, Q8Buffers q8, const Stream& s);
  void rms_norm(CUdeviceptr x, CUdeviceptr w, CUdeviceptr out, int64_t n, int64_t dim, float eps,
                const Stream& s);
  // rms_norm, and out also quantized into q8 (dim a multiple of 32), bit-identical to rms_norm
  // followed by quantize_q8.
  void rms_norm_q8(CUdeviceptr x, CUdeviceptr w, CUdeviceptr out, Q8Buffers q8, int64_t n,
                   int64_t dim, float eps, const Stream& s);
  // swiglu, and out also quantized (count a multiple of 32).
  void swiglu_q8(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, Q8Buffers q8, int64_t count,
                 const Stream& s);
  // cache: [n][n_rot] (cos, sin) pairs.
  void rope(CUdeviceptr x, CUdeviceptr cache, int64_t n, int n_heads, int head_dim, int n_rot,
            bool neox, const Stream& s);
  void swiglu(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count, const Stream& s);
  void add(CUdeviceptr acc, CUdeviceptr x, int64_t count, const Stream& s);
  void geglu(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count, const Stream& s);
  void swiglu_oai(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count, float alpha,
                  float limit, const Stream& s);
  void add_rows(CUdeviceptr x, CUdeviceptr bias, int64_t n, int dim, const Stream& s);
  void scale(CUdeviceptr x, float v, int64_t count, const Stream& s);
  void softcap(CUdeviceptr x, float cap, int64_t count, const Stream& s);
  void copy_cols(CUdeviceptr x, CUdeviceptr out, int64_t n, int x_cols, int first, int cols,
                 const Stream& s);
  // out [n][cols] = per row, the sum of terms coef-weighted rows of x (rows, coef: device
  // arrays of n * terms).
  void weighted_sum_rows(CUdeviceptr x, CUdeviceptr out, CUdeviceptr rows, CUdeviceptr coef,
                         int64_t n, int cols, int terms, const Stream& s);
  // Mixture of experts (moe_kernels.cpp). One projection of a layer's experts on the card: a
  // device table [n_expert][2] of (weights, scale plane) addresses, all of one kind and shape.
  struct ExpertTable {
    CUdeviceptr tab = 0;
    WeightKind kind = WeightKind::F32;
    int64_t rows = 0, k = 0;
    int n_expert = 0;
    CUdeviceptr bias = 0;  // [n_expert][rows] f32 added to each product (gpt-oss), or 0
  };
  // ids and weights [n][k] (int32, f32) of each row of router logits [n][n_expert]: the rules of
  // route_experts (graph/moe.h) on the card (n_expert <= 256, k <= 32).
  static constexpr int kMaxRouteExperts = 256, kMaxRouteUsed = 32;
  void moe_route(CUdeviceptr logits, int64_t n, int n_expert, int k, bool softmax_all, bool norm,
                 float scale, CUdeviceptr ids, CUdeviceptr weights, const Stream& s);
  // The pairs (ids [pairs], k a row) in expert order on the card: offset [n_expert + 1] (expert
  // e's positions [offset[e], offset[e + 1])), src [pairs] (the row of each position) and where
  // [pairs] (each pair's position), pairs in their order within an expert (pairs <= 4096).
  static constexpr int64_t kMaxSortPairs = 4096;
  void moe_sort(CUdeviceptr ids, int64_t pairs, int n_expert, int k, CUdeviceptr offset,
                CUdeviceptr src, CUdeviceptr where, const Stream& s);
  // out [n][cols] = x[rows[t]] (rows: device int32 [n]).
  void gather_rows(CUdeviceptr x, CUdeviceptr out, CUdeviceptr rows, int64_t n, int cols,
                   const Stream& s);
  // out [n][cols] = sum_j w[t k + j] * ys[where ? where[t k + j] : t k + j] (+ the shared
  // expert's row times sigmoid(sgate[t]), or times 1 without sgate, when shared is set).
  void moe_combine(CUdeviceptr ys, CUdeviceptr out, CUdeviceptr where, CUdeviceptr w, int64_t n,
                   int k, int cols, CUdeviceptr shared, CUdeviceptr sgate, const Stream& s);
  // out [pairs][w.rows] = row p / xdiv of x . (expert ids[p] of w)^T. x: [pairs / xdiv][w.k]
  // f32; for the quantized kinds q8 holds it quantized (x_quantized) or is scratch of
  // q8_bytes(pairs / xdiv, w.k) to quantize it into.
  void matmul_ids(const ExpertTable& w, CUdeviceptr ids, int64_t pairs, int xdiv, CUdeviceptr x,
                  Q8Buffers q8, bool x_quantized, CUdeviceptr out, const Stream& s);
  // gate and up of the same shape (rows a multiple of 32): out [pairs][rows] = silu(x . gate^T) *
  // (x . up^T) per pair as matmul_ids reads them, and out quantized into q8_out ([pairs][rows]
  // int8 at q, [pairs][rows / 32] (d, d sum) at ds). With swiglu_limit > 0, gpt-oss's clamped
  // SwiGLU instead (graph/ops.h swiglu_oai); the tables' biases are added to the products.
  void matmul_ids_swiglu(const ExpertTable& gate, const ExpertTable& up, CUdeviceptr ids,
                         int64_t pairs, int xdiv, CUdeviceptr x, Q8Buffers q8, bool x_quantized,
                         CUdeviceptr out, Q8Buffers q8_out, float swiglu_limit, const Stream& s);
  // The grouped twins: x [pairs + nt][w.k] in expert order (moe_sort's offset), f32 and for the
  // quantized kinds also in q8 (quantized by the caller; the nt rows past the last pair are read,
  // not used); out [pairs][rows] in the same order, each expert's weights read once per tile of
  // nt (<= 8) of its rows.
  void matmul_grouped(const ExpertTable& w, CUdeviceptr offset, int nt, CUdeviceptr x, Q8Buffers q8,
                      CUdeviceptr out, const Stream& s);
  void matmul_grouped_swiglu(const ExpertTable& gate, const ExpertTable& up, CUdeviceptr offset,
                             int nt, CUdeviceptr x, Q8Buffers q8, CUdeviceptr out, Q8Buffers q8_out,
                             float swiglu_limit, const Stream& s);
  // The expected rows of a chosen expert when n rows choose k of n_expert uniformly,
  // n k / (n_expert (1 - (1 - k / n_expert)^n)), and the tile the grouped matvecs take for it
  // (rounded up to a power of 2 <= 8).
  static double rows_per_chosen_expert(int64_t n, int k, int n_expert);
  static int grouped_tile(int64_t n, int k, int n_expert);
  // Row t of src [n][dim] to address rows[t] + offset (rows: device array of n u64).
  void store_kv(CUdeviceptr src, CUdeviceptr rows, uint64_t offset, int64_t n, int dim, bool f16,
                const Stream& s);
  // rope on q and k in place, then k and v stored at rows[t] + koff / voff (one launch).
  struct RopeStoreCall {
    CUdeviceptr q = 0, k = 0, v = 0, cache = 0, rows = 0;
    uint64_t koff = 0, voff = 0;
    int64_t n = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
    bool neox = false, f16 = true;
  };
  void rope_store(const RopeStoreCall& c, const Stream& s);
  struct AttentionCall {
    CUdeviceptr q = 0, out = 0;        // [n_rows][n_head * head_dim]
    CUdeviceptr pages = 0;             // u64 device page addresses, every sequence's table
    CUdeviceptr row_pt = 0, n_kv = 0;  // int [n_rows]: row's table start, keys to attend
    uint64_t koff = 0, voff = 0;       // byte offset of this layer's K / V plane in a page
    int page_tokens = 0, row_bytes = 0;
    int64_t n_rows = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    float scale = 1.0f;
    int window = 0;         // > 0: a row sees only its last `window` keys (sliding window)
    float softcap = 0.0f;   // > 0: scores = softcap * tanh(scores / softcap), after the scale
    CUdeviceptr sinks = 0;  // float [n_head] sink logits in each softmax's sum (gpt-oss), or 0
    bool kv_f16 = true;
    Q8Buffers q8;  // when set (and head_dim % 32 == 0): out also quantized for the next matvec
    // Keys each warp takes per step of its loop (their loads issued together): 0 = the default,
    // JITLLM_CUDA_ATTN_KEYS or 4 (1: the one-key loop whose bits the split kernel shares).
    int keys_per_step = 0;
  };
  void attention(const AttentionCall& a, const Stream& s);
  // Split-K decode attention (split_attention.cpp): the same result as attention() (bitwise for
  // rows of one split), the keys of a row split over split_count(n_kv, max_splits) CTAs per head
  // and merged in a second launch. scratch: split_scratch_bytes(n_rows, n_head, head_dim,
  // max_splits).
  static int split_count(int64_t n_kv, int max_splits);
  static size_t split_scratch_bytes(int64_t n_rows, int n_head, int head_dim, int max_splits);
  void attention_split(const AttentionCall& a, int max_splits, CUdeviceptr scratch, const Stream& s);
  // For a step of n_rows rows (n_head query heads, the longest attending to max_n_kv keys) on a
  // card of sm_count SMs: the max_splits argument (2..max_splits) of an attention_split launch
  // that runs faster than attention(), or 0 when none does. A cost model of both launch shapes
  // (split_attention.cpp), no measurement; the count depends only on n_rows and n_head once the
  // split pays, so a session's context growing does not change it.
  static int attention_splits_that_pay(int64_t n_rows, int n_head, int64_t max_n_kv, int sm_count,
                                       int max_splits);
  // Compiles (or loads) the split kernels now, so a step that later takes them compiles nothing.
  void prepare_split(int head_dim, bool kv_f16) { split_functions(head_dim, kv_f16); }
  // Keys per warp step of attention() when the call does not say: JITLLM_CUDA_ATTN_KEYS or 4.
  static int attention_keys_per_step();
  // ids[t] = argmax of row t of x [n][cols] (lowest column among equal maxima). scratch:
  // argmax_scratch_bytes(cap) for up to cap rows, zeroed before the first call (its row
  // counters; the kernel leaves them zero).
  static size_t argmax_scratch_bytes(int64_t cap);
  void argmax_rows(CUdeviceptr x, int64_t n, int64_t cols, CUdeviceptr scratch, int64_t cap,
                   CUdeviceptr ids, const Stream& s);

  // The logits pick (pick_source.cpp, launched from pick_ops.cpp): one CTA a row of x
  // [rows][stride]; spec [rows][8] ints {top, out_off, extra_off, extra_n, log_norm, mask_off}
  // (masks: the grammar masks, 64 columns a word); results at
  // the named device addresses (see pick_source.cpp).
  struct PickCall {
    CUdeviceptr x = 0;
    int64_t rows = 0, stride = 0, cols = 0;
    CUdeviceptr spec = 0, extra_ids = 0, masks = 0, ids = 0, vals = 0, extra = 0, bad = 0;
    CUdeviceptr stat_f = 0, lse = 0;
  };
  void pick_logits(const PickCall& c, const Stream& s);

  const Compiler& compiler() const { return compiler_; }
  // Programmatic dependent launch is on (sm_90 and later, unless JITLLM_CUDA_PDL=0).
  bool pdl() const { return pdl_; }
  // Benches: force rows per warp / unroll for every later matvec (0 = the defaults above).
  void tune(int rpw, int unroll) {
    rpw_override_ = rpw;
    unroll_override_ = unroll;
  }
  // Starts (or stops) timing every launch; see KernelProfile.
  void set_profiling(bool on) { profiling_ = on; }
  const KernelProfile& profile() const { return profile_; }

 private:
  // The matvec source's entry point (default: "matvec", or "matvec_swiglu" with swiglu).
  CUfunction matvec_fn(const MatvecSpec& spec, const char* entry = nullptr);
  CUfunction elementwise_fn(const char* name);
  CUfunction moe_fn(const char* name);
  // The one launch of the indexed and grouped expert matvecs (moe_kernels.cpp): `up` set for the
  // SwiGLU ones; index = the pairs' expert ids or the experts' offsets; grid_y = pairs or experts.
  void launch_expert_matvec(const ExpertTable& w, const ExpertTable* up, CUdeviceptr index, int nt,
                            int xdiv, unsigned grid_y, const char* entry, CUdeviceptr x,
                            Q8Buffers q8, CUdeviceptr out, Q8Buffers q8_out, float swiglu_limit,
                            const Stream& s);
  void run(CUfunction f, unsigned gx, unsigned gy, unsigned block, const Stream& s, void** args,
           const char* what);
  void run3(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, const Stream& s,
            void** args, const char* what);

  const Device& device_;
  Compiler& compiler_;
  const Module* elementwise_ = nullptr;
  const Module* moe_ = nullptr;
  CUfunction pick_ = nullptr;
  std::map<std::string, CUfunction> matvec_;  // by MatvecSpec::name()
  std::map<std::tuple<int, bool, int>, CUfunction> attention_;  // (head_dim, kv_f16, keys)
  std::map<std::pair<int, bool>, std::pair<CUfunction, CUfunction>> split_attention_;
  // split_attention_[(head_dim, kv_f16)], compiled on first use: (attention_split, attention_merge).
  const std::pair<CUfunction, CUfunction>& split_functions(int head_dim, bool kv_f16);
  std::map<std::string, CUfunction> ew_;
  bool profiling_ = false;
  int rpw_override_ = 0, unroll_override_ = 0;
  bool pdl_ = false;  // launches allow programmatic overlap (sm_90+, unless JITLLM_CUDA_PDL=0)
  KernelProfile profile_;
};

}  // namespace jitllm::cuda
