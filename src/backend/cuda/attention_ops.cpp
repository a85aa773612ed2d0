// CudaOps::attention (see cuda_ops.h): the KV store of a step's rows, then flash attention for
// prompt steps, the paged decode kernel, or split-K decode attention for long contexts; and
// attention_splits, which of the last two a step takes (decided in begin(), before a decode graph
// is looked up or captured, so each graph holds one of them).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/flash_attention.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

// Steps of at least this many rows, 8 or more per sequence on average, run attention as flash
// attention (f16 KV, head sizes that flash_supported() accepts); decode steps keep the paged
// kernel.
constexpr size_t kFlashMinRows = 16;

// The most splits per row when the choice is automatic: 32 chunks of 256 keys cover 8192
// positions at the chunk size; longer rows get longer chunks.
constexpr int kAutoSplits = 32;

}  // namespace

int CudaOps::splitk_setting(const char* value) {
  const std::optional<int> n = CudaKnobs::splitk_value(value ? value : "");
  if (!n) throw_error("JITLLM_CUDA_SPLITK: '{}' is not {}", value, knobs().splitk.allowed());
  return *n;
}

int CudaOps::attention_splits(const Batch& batch) const {
  if (splitk_env_ >= 0) return splitk_env_;
  int64_t max_n_kv = 0;
  for (const int32_t p : batch.pos) max_n_kv = std::max<int64_t>(max_n_kv, int64_t(p) + 1);
  // attn_heads_ is 0 until a step has run attention on this card (the first steps are prompts).
  return CudaKernels::attention_splits_that_pay(int64_t(batch.n_rows()), attn_heads_, max_n_kv,
                                                device_.sm_count(), kAutoSplits);
}

int CudaOps::card_layer(int il, const AttnSpec& spec) const {
  // Sliding windows, soft-capping and sinks are implemented; unequal K/V widths and V read from
  // the K rows (MLA's latent cache) are not.
  if (spec.head_dim_k != spec.head_dim_v || !spec.causal || spec.v_in_k) {
    AttnSpec rest = spec;
    rest.window = 0;
    rest.softcap = 0.0f;
    rest.sinks = nullptr;
    refuse_unplain_attention(rest, "CUDA attention");
  }
  if (spec.n_head_kv * spec.head_dim_k != kv_.kv_dim)
    throw_error("CUDA attention: {} KV heads of {} do not match the KV rows of {}", spec.n_head_kv,
                spec.head_dim_k, kv_.kv_dim);
  // The card's pages hold only its own layers (set_kv_layers).
  const int kl = il - kv_first_layer_;
  if (kl < 0 || (kv_n_layers_ >= 0 && kl >= kv_n_layers_))
    throw_error("CUDA attention: layer {} is not one of this card's layers ({} + {})", il,
                kv_first_layer_, kv_n_layers_);
  return kl;
}

void CudaOps::attention(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec) {
  attend(il, q, k, v, out, spec, KvStore::Store);
}

void CudaOps::attend(int il, Act q, Act k, Act v, Act out, const AttnSpec& spec, KvStore store) {
  const int kl = card_layer(il, spec);
  const int n_head = spec.n_head, n_head_kv = spec.n_head_kv, head_dim = spec.head_dim_k;
  const size_t n = batch_.n_rows();
  const bool f16 = kv_.type == QuantType::F16;
  attn_heads_ = n_head;
  const uint64_t koff = kv_.plane_bytes() * uint64_t(2 * kl);
  const uint64_t voff = kv_.plane_bytes() * uint64_t(2 * kl + 1);
  // The decode attention kernel also writes its output quantized for the wo matvec.
  const bool out_q8 = fuse_ && head_dim % 32 == 0;
  if (out_q8) ensure_q8(out.rows, out.cols);
  wrote(out);
  if (!launching()) {
    if (out_q8) quantized(out);
    return;
  }
  // With the automatic choice the split kernels are compiled in the first (direct) steps, the
  // engine's warm-up, so the first long context after "ready" compiles nothing.
  if (splitk_env_ < 0 && mode_ == Mode::Direct) kernels_.prepare_split(head_dim, f16);
  // The split's scratch is sized in every step that chose it, also one that goes to flash
  // attention (direct steps only), so the step capturing the same graph key grows nothing; with
  // the automatic choice for the most splits and at least a decode graph's rows, so neither a
  // session's context nor sessions joining grows it again (each growth drops the graphs).
  if (step_splits_ > 0) {
    const int64_t rows = splitk_env_ < 0 ? int64_t(std::max(n, kDecodeGraphRows)) : int64_t(n);
    const int splits = splitk_env_ < 0 ? kAutoSplits : step_splits_;
    ensure(split_scratch_, CudaKernels::split_scratch_bytes(rows, n_head, head_dim, splits));
  }
  // K and V of every row first: rows of one sequence attend to each other causally.
  if (store == KvStore::RopeStore) {  // q and k are rotated on the way (one kernel)
    CudaKernels::RopeStoreCall c;
    c.q = ptr(q);
    c.k = ptr(k);
    c.v = ptr(v);
    c.cache = rope_table();
    c.rows = store_rows_;
    c.koff = koff;
    c.voff = voff;
    c.n = int64_t(n);
    c.n_head = n_head;
    c.n_head_kv = n_head_kv;
    c.head_dim = head_dim;
    c.n_rot = rope_params().n_rot;
    c.neox = rope_params().mode == RopeMode::Neox;
    c.f16 = f16;
    kernels_.rope_store(c, stream_);
  } else if (store == KvStore::Store) {
    kernels_.store_kv(ptr(k), store_rows_, koff, int64_t(n), kv_.kv_dim, f16, stream_);
    kernels_.store_kv(ptr(v), store_rows_, voff, int64_t(n), kv_.kv_dim, f16, stream_);
  }
  CudaKernels::AttentionCall a;
  a.q = ptr(q);
  a.out = ptr(out);
  a.pages = pages_;
  a.row_pt = row_pt_;
  a.n_kv = n_kv_;
  a.koff = koff;
  a.voff = voff;
  a.page_tokens = int(kv_.page_tokens);
  a.row_bytes = int(kv_.row_bytes());
  a.n_rows = int64_t(n);
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = head_dim;
  a.scale = spec.scale;
  a.window = spec.window;
  a.softcap = spec.softcap;
  if (spec.sinks) a.sinks = host_vector(spec.sinks, size_t(n_head));
  a.kv_f16 = f16;
  if (flash_ && n >= kFlashMinRows && mode_ == Mode::Direct && flash_supported(head_dim, f16)) {
    if (flash_tile_count_ < 0) {  // first layer of the step: the batch's tiles
      const std::vector<FlashTile> tiles = flash_tiles(batch_.seq);
      flash_tile_count_ = 0;
      // Many sequences of a row or two each (batched decode) leave most of a 64-row tile idle:
      // those steps keep the paged kernel.
      if (tiles.size() * 8 <= n) {
        ensure(flash_tiles_, tiles.size() * sizeof(FlashTile));
        upload(flash_tiles_.get(), tiles.data(), tiles.size() * sizeof(FlashTile));
        flash_tile_count_ = int(tiles.size());
      }
    }
    if (flash_tile_count_ > 0) {
      flash_->run(a, flash_tiles_.get(), flash_tile_count_, stream_);
      return;
    }
  }
  // Split-K decode attention where begin() chose it for this step (attention_splits): a row's
  // keys over up to step_splits_ CTAs per head (split_attention.cpp); rows of at most 256 keys give
  // the bits of the one-key attention loop (JITLLM_CUDA_ATTN_KEYS=1).
  if (out_q8) {
    a.q8 = q8_for(out.rows, out.cols);
    quantized(out);
  }
  if (step_splits_ > 0) {
    kernels_.attention_split(a, step_splits_, split_scratch_.get(), stream_);
    return;
  }
  kernels_.attention(a, stream_);
}

}  // namespace jitllm::cuda
