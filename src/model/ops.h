// The backend-neutral op interface the block graphs (llama.cpp, later qwen.cpp, ...) are written
// against, plus what one forward step is given (`Batch`) and the KV page layout. A backend (CPU
// now, CUDA later) implements `Ops` over its own memory; the graph never touches data directly,
// so the same graph code runs everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "io/tensor_info.h"

namespace jitllm {

// A float activation matrix [rows, cols], row-major, in the backend's memory.
struct Act {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
};

// KV pages: each page holds `page_tokens` positions of one sequence for every layer,
// laid out [n_layer][2 (K, V)][page_tokens][kv_dim] elements of `type` (F16 or F32).
struct KvLayout {
  int n_layer = 0;
  int kv_dim = 0;
  int64_t page_tokens = 256;
  QuantType type = QuantType::F16;

  size_t row_bytes() const { return size_t(kv_dim) * (type == QuantType::F16 ? 2 : 4); }
  size_t plane_bytes() const { return row_bytes() * size_t(page_tokens); }
  size_t page_bytes() const { return plane_bytes() * 2 * size_t(n_layer); }
  // Rows of layer `il`'s K (which = 0) or V (which = 1) across a sequence's pages.
  PagedRows rows(uint8_t* const* pages, int il, int which) const {
    return PagedRows{pages, page_tokens, plane_bytes() * size_t(2 * il + which), row_bytes()};
  }
};

// One sequence's KV pages (owned by the runtime's session).
struct KvSeq {
  uint8_t* const* pages = nullptr;
  int64_t n_pages = 0;
};

// One forward step over a ragged batch: row i is token tokens[i] of sequence seq[i] at position
// pos[i]. Rows of one sequence are consecutive and in position order; every sequence has pages
// for all its positions. Logits are produced for `out_rows` (ascending row indices).
struct Batch {
  std::span<const int32_t> tokens;
  std::span<const int32_t> pos;
  std::span<const int32_t> seq;
  std::span<const KvSeq> seqs;
  std::span<const int32_t> out_rows;
  size_t n_rows() const { return tokens.size(); }
};

class Ops {
 public:
  virtual ~Ops() = default;

  // Starts a step: binds the batch (positions, token ids, KV) and recycles the scratch.
  virtual void begin(const Batch& batch, const KvLayout& kv) = 0;
  // Scratch activation valid until the next begin().
  virtual Act alloc(int64_t rows, int64_t cols) = 0;

  // out[i] = row batch.tokens[i] of `table` (the embedding lookup).
  virtual void embed(const TensorInfo& table, Act out) = 0;
  virtual void rms_norm(Act x, const std::vector<float>& w, float eps, Act out) = 0;
  // out = x . w^T : x [n, k], w [k, rows] (ne order), out [n, rows].
  virtual void matmul(const TensorInfo& w, Act x, Act out) = 0;
  // out_i = x . w_i^T for matrices that share their input (q/k/v, gate/up). One call lets a
  // backend quantize x once and run the matrices as one pass (one dispatch, no idle tail per
  // matrix); the default runs them one by one.
  struct MatmulOut {
    const TensorInfo* w;
    Act out;
  };
  virtual void matmul_group(Act x, std::span<const MatmulOut> outs) {
    for (const MatmulOut& o : outs) matmul(*o.w, x, o.out);
  }
  // In place, x: [n, n_heads * head_dim], positions from the batch.
  virtual void rope(Act x, int n_heads, int head_dim, const RopeParams& params) = 0;
  // Stores k, v ([n, kv_dim]) at the batch rows' positions in layer `il` of their sequences, then
  // causal attention of q [n, n_head * head_dim] over each row's sequence into out.
  virtual void attention(int il, Act q, Act k, Act v, Act out, int n_head, int n_head_kv,
                         int head_dim, float scale) = 0;
  virtual void swiglu(Act gate, Act up, Act out) = 0;  // out = silu(gate) * up
  virtual void add(Act acc, Act x) = 0;                // acc += x
  // out[j] = x[rows[j]].
  virtual void select_rows(Act x, std::span<const int32_t> rows, Act out) = 0;
  // Copies x to host memory (rows * cols floats).
  virtual void read(Act x, float* host) = 0;
  // Copies rows * cols floats from host memory into x: the residual stream arriving from another
  // device. Complete (or, in a replayed step, ordered before the step's work) when it returns.
  virtual void write(Act x, const float* host) = 0;
  // Called by the graph before it issues ops on this backend after ops on another one (a split
  // model): a backend that keeps per-thread state (a CUDA context) makes itself current.
  virtual void enter() {}
  // host[i] = the column of the largest value of row i of x (the greedy token of a logits row):
  // the lowest column among equal maxima, as std::max_element and the sampler's greedy pick
  // (rows holding NaN are not ordered). A backend that keeps x on a device can do this there
  // and bring home only the ids; this default reads x and scans it on the host.
  virtual void argmax_rows(Act x, int32_t* host);
  // Copies the KV this backend keeps for the positions of host page `from` into those of page
  // `to` (a forked session, runtime/session_fork.h), between steps. The default copies the host
  // page itself (kv.page_bytes()); a backend that keeps KV on a device copies its device pages.
  virtual void copy_kv_page(const uint8_t* from, uint8_t* to, const KvLayout& kv);
};

// Which backend runs each part of one model's graph (runtime/placement.h decides; the graph
// reads it in one place per layer). Several entries may point to the same Ops.
struct OpsRoute {
  Ops* embed = nullptr;      // the token embedding lookup
  std::vector<Ops*> layers;  // [n_layer] the whole block: norms, attention with its KV, FFN
  Ops* head = nullptr;       // output norm + output matrix
  // Everything on one backend.
  static OpsRoute single(Ops& ops, int n_layer) {
    return OpsRoute{&ops, std::vector<Ops*>(size_t(n_layer), &ops), &ops};
  }
  // Each backend once, in the order the graph first uses it.
  std::vector<Ops*> distinct() const {
    std::vector<Ops*> out;
    auto add = [&](Ops* o) {
      for (Ops* e : out)
        if (e == o) return;
      out.push_back(o);
    };
    add(embed);
    for (Ops* o : layers) add(o);
    add(head);
    return out;
  }
};

}  // namespace jitllm
