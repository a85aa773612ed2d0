// Engine: a loaded model ready to run: the Model (config, weights, graph), the backend Ops, and
// the KV page pool its sessions draw from. `step` advances several sessions as one ragged batch
// (each row its own position and KV; every weight matrix read once for all rows); `prefill` runs
// a prompt in chunks of matrix-matrix steps; `decode` runs one token.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/reference_kernels.h"  // CpuKernels (EngineOptions::kernels)
#include "model/model.h"
#include "runtime/backends.h"
#include "runtime/expert_cache.h"
#include "runtime/host_budget.h"
#include "runtime/kv_pages.h"
#include "runtime/session.h"

namespace jitllm {

struct EngineOptions {
  QuantType kv_type = QuantType::F16;  // F16 (llama.cpp's default) or F32
  int64_t kv_page_tokens = 256;
  int64_t n_batch = 256;               // prefill chunk (tokens per step)
  size_t max_kv_pages = 0;             // 0 = no cap
  // CPU kernels by name (runtime/cpu_kernels.h): "" = $JITLLM_KERNELS, else jit when the CPU has
  // AVX2; "jit", "jit-avx2", "jit-avxvnni", "jit-avx512", "reference". A bad name throws.
  std::string cpu_kernels;
  // Kernels whose results for a row do not depend on the rest of its step (no AMX tiles; see
  // resolve_cpu_kernels): set for jitllmd --deterministic.
  bool batch_invariant = false;
  // Where the model runs (runtime/placement.h): cpu, cuda (every visible card), cuda:N, or a
  // list (cuda:0,cuda:1). Blocks that do not fit on the cards run on the host.
  std::string devices = "cpu";
  std::string vram_budget;             // --vram-budget: per-card cap ("6G" or "6G,4G"); "" = none
  int gpu_layers = -1;                 // --gpu-layers: at most this many layers on cards (-1: any)
  size_t vram_reserve = size_t(512) << 20;  // per card: left free for the driver and others
  int64_t kv_tokens = 0;               // KV positions planned for on the cards (sessions x n_ctx);
                                       // 0 = max_kv_pages' tokens, else the training context
  // A server's KV budget: with kv_sessions > 0 and no max_kv_pages, a decoder's KV is planned
  // (kv_tokens, unless given) and capped (max_kv_pages) at every session at its context up to
  // 4096 tokens (longer contexts share the pages), but at least one whole context; the context
  // is kv_session_ctx (0: the training context). Sessions take pages as they grow.
  int kv_sessions = 0;
  int64_t kv_session_ctx = 0;
  // --host-budget (runtime/host_budget.h): most host memory for the model with --devices cpu
  // ("6G"; "" = what the machine can spare). MoE experts that do not fit are paged from the
  // .jlm (with a given budget a GGUF is converted once into the cache); a given budget that
  // cannot hold the rest is refused at load, the machine's estimate falls back to the mapped
  // file with a warning.
  std::string host_budget;
  bool print_placement = true;         // the placement table on stderr at load (cards only)
  // With a card: run warm_up() before the constructor returns, so "ready" means every kernel a
  // first prompt needs is compiled and every weight is on its card. Without: warm_up_host() (the
  // host's decode copies of the weights made at load).
  bool warm_up = true;
  // warm_up() also steps up to this many sessions together (every count the backend tiles
  // differently), so a server's batched decode compiles nothing after "ready" either (jitllmd
  // passes -parallel). 1: single sessions only.
  int warm_sessions = 1;
  // Called on the loading thread while warm_up() runs: its stage ("warm-up"), the parts done and
  // the parts in all (jitllmd's /health shows it while loading). Empty: nothing is reported.
  std::function<void(const char* stage, int64_t done, int64_t total)> progress;
};

struct StepInput {
  Session* session = nullptr;
  std::span<const int32_t> tokens;  // appended at the session's position
  bool all_logits = false;          // logits for every token (else only the last)
  bool no_logits = false;           // without all_logits: no logits at all (a prefill chunk)
  std::span<const int32_t> types;   // an encoder's token types, one per token (empty: all 0)
};

class Engine {
 public:
  Engine(std::shared_ptr<const ModelFile> file, EngineOptions options = {});

  const Config& config() const { return model_->config(); }
  const Model& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }
  const KvPagePool& kv_pool() const { return pool_; }
  // KvPagePool::set_reclaimer: who frees pages when the pool's cap is reached (a server's
  // prefix cache); empty to stop.
  void set_kv_reclaimer(std::function<bool()> reclaim) { pool_.set_reclaimer(std::move(reclaim)); }
  // How the host budget was spent, and the expert cache when the experts are paged (else null).
  const HostPlan& host_plan() const { return host_plan_; }
  ExpertCache* expert_cache() const { return expert_cache_.get(); }
  // Which device runs each block (all on the host for --devices cpu).
  const Placement& placement() const { return backends_.placement; }
  // The CPU kernels options().cpu_kernels resolved to ("jit-avx2", "reference", ...).
  const char* cpu_kernels_name() const { return backends_.cpu_kernels_name; }

  // A new empty session; n_ctx <= 0 means the model's training context.
  std::unique_ptr<Session> new_session(int64_t n_ctx = 0);

  // One forward step over all inputs together (each session at most once). Returns the logits
  // of the requested rows, in input order: [rows, n_vocab].
  std::vector<float> step(std::span<const StepInput> inputs);
  // The same step for callers that sample greedily: the argmax token of each requested row (the
  // lowest id among equal maxima, as the sampler's greedy pick), in input order, instead of the
  // logits; a backend on a device brings home only these ids (Ops::argmax_rows).
  std::vector<int32_t> step_greedy(std::span<const StepInput> inputs);
  // The same step for callers that sample with a chain that needs only part of each row
  // (SamplerChain::reduction): picks[i] says what to bring home of requested row i, among the
  // first `cols` columns (the tokenizer's tokens); a backend on a device selects there
  // (Ops::pick_logits). Returns one PickedLogits per requested row, in input order.
  std::vector<PickedLogits> step_picked(std::span<const StepInput> inputs,
                                        std::span<const LogitsPick> picks, int64_t cols);

  // Runs `tokens` on `session` in steps of at most `chunk` tokens (0 = options().n_batch).
  // Returns the logits of every token ([n, n_vocab]) or of the last one ([1, n_vocab]).
  std::vector<float> prefill(Session& session, std::span<const int32_t> tokens, bool all_logits,
                             int64_t chunk = 0);
  // One token; returns its logits [n_vocab].
  std::vector<float> decode(Session& session, int32_t token);
  // One token; returns the greedy next token (step_greedy).
  int32_t decode_greedy(Session& session, int32_t token);

  // Embeddings of whole inputs (engine_embed.cpp): each input on a throwaway session, several
  // together in steps of at most options().n_batch tokens (a longer input alone: in chunks for a
  // causal model, whole for a bidirectional one, up to its training context). Returns
  // [inputs.size(), n_embd]: each input's final hidden states pooled (mean over its tokens, its
  // first's for cls, its last's for last), divided by their Euclidean norm when `normalize`.
  // Pooling::Rank gives a cross-encoder's scores instead, [inputs.size(), n_class]: its
  // classification head over the first token. Throws for none/unspecified and for rank on a
  // model without the head.
  // `types`: each input's token types (a cross-encoder's segments), or empty (all type 0).
  std::vector<float> embed(std::span<const std::vector<int32_t>> inputs, Pooling pooling,
                           bool normalize, std::span<const std::vector<int32_t>> types = {});
  // The width of each row embed() returns for `pooling`.
  int64_t embedding_width(Pooling pooling) const;
  // An encoder (BERT): steps give hidden states only, no logits.
  bool is_encoder() const { return !model_->family().lm_head; }
  // A cross-encoder's classes (0: no classification head) and the token types it embeds.
  int64_t rank_classes() const;
  int64_t token_types() const { return model_->weights().n_token_types; }
  // Copies the KV of the first `pages` pages of `from` into those of `to` on every backend (the
  // host pages and each card's copies of them): fork_session's copy, between steps.
  void copy_kv_pages(const KvSeq& from, const KvSeq& to, int64_t pages);

  // Runs the step shapes of a first prompt and its decode on a throwaway session, and of
  // options().warm_sessions sessions decoding together (see engine_warmup.cpp); sessions and the
  // KV pool are left as they were.
  void warm_up();

 private:
  // warm_up()'s decode steps of n throwaway sessions together (direct, capture, replay; logits
  // and greedy ids).
  void warm_up_together(int64_t n);
  // Without cards (the constructor's warm-up): one decode-sized step on a throwaway session, so
  // the host kernels make their decode copies of the weights at load rather than in the first
  // token (CpuOps::prepared).
  void warm_up_host();
  // step() and step_greedy(): writes the logits of the requested rows to `logits` or, with
  // `argmax` set, their greedy tokens there, or with `hidden` set their final hidden states
  // ([rows, n_embd], embed()), or with `picks` set what picks->rows ask of each row there.
  // Returns the number of requested rows.
  size_t run_step(std::span<const StepInput> inputs, std::vector<float>* logits,
                  std::vector<int32_t>* argmax, std::vector<float>* hidden = nullptr,
                  const LogitsPicks* picks = nullptr);

  // With --devices cpu: plans the host budget and, when the experts do not fit, opens the
  // expert cache (over a cached .jlm of a GGUF) and pages the model's experts through it.
  void plan_host();
  EngineOptions options_;
  std::unique_ptr<Model> model_;
  Backends backends_;  // the host and the cards, and the route of each layer over them
  KvLayout kv_layout_;
  KvPagePool pool_;
  bool host_kv_ = true;  // the host runs a layer, so its pages hold KV (else 64-byte stubs)
  HostPlan host_plan_;
  std::unique_ptr<ExpertCache> expert_cache_;  // model_ pages its experts through it
};

}  // namespace jitllm
