// CudaOps: the backend-neutral Ops (graph/ops.h) on one NVIDIA card. Activations, weights and
// the KV cache live in device memory; the llama graph runs unchanged on top.
//  - Weights are packed (packed_weight.h) and uploaded the first time a matrix is used, once.
//  - KV pages: the runtime's KvPagePool hands out host pages; each host page is shadowed by a
//    device page of the same layout (created on first sight, reused while the host page lives
//    in the pool), so the runtime's paging (sessions, recycling, ragged steps) carries over
//    without a device-aware pool. The host pages themselves are never written.
//  - The embedding lookup is done on the host (one row per token) and uploaded; RoPE's cos/sin
//    table per position is made on the host with the CPU reference's float recurrence.
//  - Decode steps (every row wants logits, at most 8 rows) are captured into a CUDA graph the
//    second time a row count is seen and replayed after that: on a replayed step the ops only do
//    their host parts (page tables, embedding rows, RoPE table: synchronous uploads into buffers
//    whose addresses the graph holds) and read() launches the graph. Any buffer growth drops the
//    graphs. JITLLM_CUDA_GRAPH=0 turns this off.
//  - Host-to-device inputs (and weights) are copies that are complete on the card when the call
//    returns, made after begin() has waited for the previous step (see upload() for why).
//  - Fusion is explicit: the fused ops (graph/ops.h) launch their fused kernels where the step's
//    shape allows (decode_fusion.cpp), every other op launches when it is called. Nothing is
//    held back between op calls, so no fusion depends on the order of a family's calls.
// Kernels are compiled on first use through the on-disk cubin cache (compiler.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/tuning.h"
#include "graph/ops.h"

namespace jitllm::cuda {

class Gemm;            // gemm.h: the prefill GEMM (cuBLASLt)
class Mmq;             // mmq.h: batched decode on int8 tensor cores
class FlashAttention;  // flash_attention.h: prefill attention on tensor cores

class CudaOps final : public Ops {
 public:
  explicit CudaOps(int ordinal = 0, std::string cache_dir = {});
  ~CudaOps() override;

  void begin(const Batch& batch, const KvLayout& kv) override;
  Act alloc(int64_t rows, int64_t cols) override;
  void embed(const TensorInfo& table, Act out) override;
  void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) override;
  void matmul(const TensorInfo& w, Act x, Act out) override;
  void matmul_group(Act x, std::span<const MatmulOut> outs) override;
  void rope(Act x, int n_heads, int head_dim, const RopeParams& params) override;
  void attention(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec) override;
  void swiglu(Act gate, Act up, Act out) override;
  void add(Act acc, Act x) override;
  void geglu(Act gate, Act up, Act out) override;
  void swiglu_oai(Act gate, Act up, Act out, float alpha, float limit) override;
  void add_bias(Act x, const std::vector<float>& bias) override;
  void scale(Act x, float s) override;
  void softcap(Act x, float cap) override;
  void copy_cols(Act x, int64_t first, Act out) override;
  void copy_cols_into(Act x, Act out, int64_t first) override;
  void weighted_sum_rows(Act x, std::span<const int32_t> rows, std::span<const float> coef,
                         Act out) override;
  // Routed on the card (moe_ops.cpp): the router's top-k kernel writes the expert ids and
  // weights on the device; steps of at most kDecodeGraphRows rows run on the card alone (no host
  // round trip, so decode steps are captured as graphs): below JITLLM_CUDA_MOE_GROUPED rows every
  // (row, expert) pair through the indexed matvecs, from there the pairs sorted by expert and
  // each chosen expert run once over its rows (the grouped matvecs);
  // longer steps read the ids home once per layer, gather the rows expert by expert and run
  // each chosen expert once over its rows (the prefill GEMMs). Both combine on the card.
  void moe_ffn(Act x, const MoeExperts& w, const MoeRouting& r, const MoeScratch& s, Act out) override;
  void select_rows(Act x, std::span<const int32_t> rows, Act out) override;
  // The fused ops (decode_fusion.cpp): q/k/v with the RoPE + KV store epilogue in decode steps of
  // one matvec tile, else q/k/v then one RoPE + KV store kernel, then attention; the residual add
  // as the matvec's (or MMQ's) epilogue; gate/up with DQ-MMA's SwiGLU epilogue in batched decode
  // steps, else gate/up then SwiGLU + q8. JITLLM_CUDA_FUSE=0: the plain twins.
  void qkv_rope_attention(int il, Act x, const Qkv& w, Act q, Act k, Act v, const RopeParams& rope,
                          const AttnSpec& spec, Act out) override;
  void matmul_add(const TensorInfo& w, Act x, Act out, Act acc) override;
  void gate_up_swiglu(Act x, const TensorInfo& gate_w, const TensorInfo& up_w, Act gate, Act up,
                      Act out) override;
  void read(Act x, float* host) override;
  void argmax_rows(Act x, int32_t* host) override;
  // Selects on the card (pick_ops.cpp) and brings home only the picks.
  void pick_logits(Act x, const LogitsPicks& picks) override;
  // The card's KV lives in its device copies of the host pages (kv_page()): a fork copies those,
  // device to device on the compute stream (ordered after the steps that wrote them and before
  // the next step), and leaves the host pages alone.
  void copy_kv_page(const uint8_t* from, uint8_t* to, const KvLayout& kv) override;

  const Device& device() const { return device_; }
  // Placement (runtime/placement.h): the residual stream arriving from another device, this
  // card's context made current when the graph moves here, and the layers this card runs: its KV
  // pages hold only layers [first, first + count) (page bytes = count layers of the host layout).
  void write(Act x, const float* host) override;
  void enter() override { device_.make_current(); }
  void set_kv_layers(int first, int count);
  int64_t graph_replays() const { return graph_replays_; }
  const CompilerStats& compiler_stats() const { return compiler_.stats(); }
  size_t weight_bytes() const { return weight_bytes_; }
  size_t kv_pages() const { return kv_pages_.size(); }
  bool has_gemm() const { return gemm_ != nullptr; }
  bool has_mmq() const { return mmq_ != nullptr; }
  // JITLLM_CUDA_SPLITK's value: unset, empty or "auto" -1 (split-K decode attention where
  // CudaKernels::attention_splits_that_pay says so), 0 never, S always with up to S splits per
  // row.
  static int splitk_setting(const char* value);
  bool stats_ = false;  // JITLLM_CUDA_STATS: the counts printed at exit
  // True when a matmul of `rows` rows in this step goes to the prefill GEMM.
  bool use_gemm(int64_t rows) const;

 private:
  // Steps of at most this many rows that all want logits are decode steps (captured into graphs).
  static constexpr size_t kDecodeGraphRows = 64;
  const DeviceWeight& weight(const TensorInfo& w);
  CUdeviceptr kv_page(uint8_t* host_page);
  static CUdeviceptr ptr(Act a) { return CUdeviceptr(reinterpret_cast<uintptr_t>(a.data)); }
  void ensure(DeviceBuffer& buf, size_t bytes);
  void upload(CUdeviceptr dst, const void* src, size_t bytes);
  bool launching() const { return mode_ != Mode::Replay; }
  // The end of a step's device work: ends a capture, launches the replayed graph (after its
  // staged inputs). read() / argmax_rows() then copy the result home.
  void finish_step();
  // Waits for the step's copy home (timing replayed steps for JITLLM_CUDA_STATS).
  void sync_step();
  void drop_graphs();
  // Ends a capture that a throwing step left open (its graph is dropped).
  void abandon_capture();
  // One matrix (res != 0: res += the product too, as the epilogue).
  void launch_matmul(const TensorInfo& w, Act x, Act out, CUdeviceptr res);
  // The matrices of a group reading x, checked, and whether x is already quantized in q8_
  // (sizing q8_ when it is not).
  struct Group {
    MatmulSeg segs[3];
    size_t n = 0;
    bool q8 = false, reuse = false;
    std::span<const MatmulSeg> span() const { return {segs, n}; }
  };
  Group group(Act x, std::span<const MatmulOut> outs);
  // The host part of RoPE for this step's positions (the cos/sin table, made once per step and
  // parameters).
  void prepare_rope(const RopeParams& p);
  // How attend() gets this step's K and V into the layer's pages.
  enum class KvStore { Done, RopeStore, Store };
  // Layer il's index among this card's KV layers; throws for a layer or spec the card cannot run.
  int card_layer(int il, const AttnSpec& spec) const;
  // The KV store (unless done) and attention of layer il (attention_ops.cpp).
  void attend(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec, KvStore store);
  // Launches matrices reading x (q8: x quantized, or to be when !reuse): the MMQ kernel where
  // use_mmq() says so, the matvec otherwise.
  void run_matmuls(std::span<const MatmulSeg> segs, Act x, Q8Buffers q8, bool reuse);
  // Decode steps of Mmq::min_rows()..kMmqMaxRows rows whose matrices the MMQ kernel reads; never
  // with JITLLM_BATCH_INVARIANT=1 (then a step of N sessions equals their solo steps bit for bit).
  bool use_mmq(std::span<const MatmulSeg> segs, int64_t rows) const;
  // q8_ sized for n rows of k and its two parts (and xh_ in a DQ step).
  Q8Buffers q8_for(int64_t n, int64_t k);
  // Grows q8_ (and in a DQ step xh_) for n rows of k.
  void ensure_q8(int64_t n, int64_t k);
  static size_t xh_bytes(int64_t n, int64_t k);  // xh_ for n rows of k
  void quantized(Act a) {
    q8_src_ = a.data;
    q8_rows_ = a.rows;
    q8_k_ = a.cols;
  }
  // Called by every op for the activation it writes: drops the quantized copy of that buffer.
  void wrote(Act a) {
    if (a.data == q8_src_) q8_src_ = nullptr;
  }

  Device device_;
  Compiler compiler_;
  CudaKernels kernels_;
  Stream stream_;
  Stream copy_stream_;  // host-to-device inputs (upload()); never captured
  std::unordered_map<const uint8_t*, DeviceWeight> weights_;  // by the tensor's host bytes
  // A layer's experts on the card (moe_ops.cpp): the gate, up and down tables of their device
  // addresses, by the layer's expert list; made (and every expert uploaded) on its first step.
  struct MoeTables {
    DeviceBuffer buf;      // [3][n_expert][2] u64
    DeviceBuffer bias[3];  // gate, up, down: [n_expert][rows] f32 (gpt-oss), or empty
    CudaKernels::ExpertTable gate, up, down;
  };
  std::unordered_map<const TensorInfo*, MoeTables> moe_tables_;
  const MoeTables& moe_tables(const MoeExperts& w);
  // Device copies of the model's host vectors (norm weights, biases), by the vector's data.
  std::unordered_map<const float*, DeviceBuffer> norms_;
  CUdeviceptr host_vector(const std::vector<float>& w);
  CUdeviceptr host_vector(const float* w, size_t n);  // n floats at w, kept by their address
  std::unordered_map<uint8_t*, DeviceBuffer> kv_pages_;        // host page -> device page
  int kv_first_layer_ = 0, kv_n_layers_ = -1;  // set_kv_layers(); -1: every layer
  size_t weight_bytes_ = 0;

  Batch batch_;
  KvLayout kv_;
  std::vector<DeviceBuffer> scratch_;  // i-th alloc() of a step, reused across steps
  size_t next_ = 0;
  DeviceBuffer q8_;      // quantized activation for the dp4a kernels
  DeviceBuffer xh_;      // f16 copy of the quantized activation for the DQ-MMA kernel (dq_mma.h)
  // q8_ holds q8_src_ ([q8_rows, q8_k]) quantized: Q, K and V (gate and up) read one activation,
  // which is quantized once for the three (two) matrices.
  const float* q8_src_ = nullptr;
  int64_t q8_rows_ = 0, q8_k_ = 0;
  bool dq_step_ = false;   // this step's q8 producers also write the f16 copy into xh_ (begin())
  DeviceBuffer tables_;  // per step: page tables, KV store rows, row -> table, n_kv
  CUdeviceptr pages_ = 0, store_rows_ = 0, row_pt_ = 0, n_kv_ = 0;
  // The step's RoPE tables ([n rows][n_rot] cos/sin), one per parameter set its layers use
  // (Gemma 3's sliding and global layers differ), each in a device buffer of its own: a layer's
  // kernels, launched before the next table is written, read their own.
  struct RopeTable {
    RopeParams params;
    DeviceBuffer cache;
    bool valid = false;
  };
  std::vector<RopeTable> ropes_;
  size_t rope_at_ = 0;  // the table of the last prepare_rope
  CUdeviceptr rope_table() const { return ropes_[rope_at_].cache.get(); }
  const RopeParams& rope_params() const { return ropes_[rope_at_].params; }
  std::vector<uint8_t> host_blob_;
  size_t page_capacity_ = 0;  // u64 slots for page addresses at the start of tables_

  enum class Mode { Direct, Capture, Replay };
  Mode mode_ = Mode::Direct;
  bool graphs_enabled_ = true;
  bool grew_ = false;            // a buffer was reallocated during this step
  // Decode graphs by row count and attention kernel (the split count of attention_splits).
  static int64_t graph_key(size_t rows, int splits) { return int64_t(rows) << 16 | splits; }
  int64_t last_direct_key_ = -1;  // graph_key of the last direct decode step without growth
  std::unordered_map<int64_t, CUgraphExec> graphs_;
  CUgraphExec current_graph_ = nullptr;
  int64_t graph_replays_ = 0;
  std::vector<float> host_rows_;
  // argmax_rows(): the kernel's counters and partials (CudaKernels::argmax_scratch_bytes), then
  // the ids [n] copied home.
  DeviceBuffer argmax_buf_;
  DeviceBuffer pick_buf_;  // pick_logits(): its inputs, then its results
  int64_t argmax_cap_ = 0;  // rows argmax_buf_ is laid out for
  std::chrono::steady_clock::time_point step_t0_;        // begin() of this step
  std::chrono::steady_clock::time_point step_launched_;  // its graph launch (replayed steps)
  double step_host_us_ = 0, step_wait_us_ = 0;
  int64_t timed_steps_ = 0;

  // gate_up_swiglu() in a DQ step: gate/up with DQ-MMA's SwiGLU + q8 epilogue (true), or nothing
  // (the step's buffers are too small to grow now). Its q8 output goes to q8_alt_, which then
  // becomes q8_ (the input it reads is in q8_); its f16 copy likewise into xh_alt_.
  bool launch_dq_swiglu(Act x, const Group& g, Act gate, Act up, Act out);
  DeviceBuffer q8_alt_, xh_alt_;
  // Split-K decode attention (attention_ops.cpp): JITLLM_CUDA_SPLITK (-1: automatic, 0: never,
  // S: always up to S splits), this step's choice (0: the single-CTA kernel), the query heads of
  // the last attention() (the cost model's CTA count), the partial softmax states.
  int splitk_env_ = -1;
  int step_splits_ = 0;
  int attn_heads_ = 0;
  int attention_splits(const Batch& batch) const;  // begin(): the split count for this step
  DeviceBuffer split_scratch_;
  bool fuse_ = true;  // JITLLM_CUDA_FUSE=0: the fused ops run as their plain twins
  // Replayed steps: the host inputs (page tables, embedding rows, RoPE table) are staged here and
  // copied, in pinned memory, on the compute stream right before the graph launch (no sync each).
  struct Staged {
    CUdeviceptr dst = 0;
    size_t offset = 0, bytes = 0;
  };
  std::vector<uint8_t> stage_host_;
  std::vector<Staged> staged_;
  std::unique_ptr<PinnedBuffer> stage_pinned_;
  // Prefill: matmuls of at least gemm_min_rows_ rows go to the tensor-core GEMM (null when
  // cuBLASLt is missing or JITLLM_CUDA_GEMM=0).
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<Mmq> mmq_;  // null: JITLLM_CUDA_MMQ=0 or JITLLM_BATCH_INVARIANT=1
  int64_t gemm_min_rows_ = 0;
  DeviceBuffer embed_ids_;  // prefill steps: token ids for the embedding lookup on the card
  // Prefill attention (steps of at least kFlashMinRows rows, f16 KV): the batch's tiles are
  // uploaded once per step, on the first layer (flash_tile_count_ < 0: not yet this step).
  std::unique_ptr<FlashAttention> flash_;
  DeviceBuffer flash_tiles_;
  int flash_tile_count_ = -1;
};

// "cuda" (the first card) or "cuda:N". Throws jitllm::Error naming the spec when there is no
// usable card or driver.
std::unique_ptr<Ops> make_cuda_ops(const std::string& devices);

}  // namespace jitllm::cuda
