// Scheduler: the one thread that owns a model's Engine. HTTP threads submit Jobs; between steps
// the scheduler admits queued jobs into the running batch (reusing the longest cached prefix),
// drops sessions whose clients went away, then runs every active sequence in one ragged
// Engine::step: decoding sequences add one token, prefilling ones a chunk of their prompt. A
// finished sequence leaves the batch at once and its session goes to the prefix cache.
// Backend-agnostic: it only sees Engine, Session and logits.
#pragma once

#include <climits>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"
#include "server/side_worker.h"

namespace jitllm {
class Tokenizer;
}

namespace jitllm::server {

struct SchedulerOptions {
  int parallel = 4;                 // sequences in the running batch at most
  int64_t n_ctx = 0;                // per-session context (0: the model's)
  // Prompts are prefilled in chunks starting at multiples of prefill_chunk, and reused prefixes
  // are cut at such a multiple, so a prompt always meets the same chunks: a warm (cached) run
  // computes exactly what a cold one does.
  int64_t prefill_chunk = 64;
  // Batch-invariant steps (jitllmd --deterministic): a sequence's numbers, and so its greedy
  // answer, do not depend on what it is batched with. The CPU attention switches arithmetic (F16
  // one-chunk -> f32 tiles) at 64 rows per step, like llama.cpp's ubatch rule, so steps then
  // hold at most mixed_step_rows rows and a bigger prefill chunk runs in a step alone. Off (the
  // default), every running sequence decodes in one step, with prompt chunks mixed in up to
  // step_prefill_tokens.
  bool deterministic = false;
  int64_t mixed_step_rows = 63;
  int64_t step_prefill_tokens = 256;
  size_t cache_sessions = 8;        // finished sessions kept for prefix reuse
  int64_t min_reuse_tokens = 2;     // a shorter reused prefix (e.g. only BOS) is not a hit
  std::string model_id;             // label of this model's gauges in /metrics
  // Test-only fault injection: called with "step", "sample" or "detokenize" just before each;
  // a hook that throws stands for a fault there (tests/server/scheduler_fault_test.cpp). The
  // server never sets it. "detokenize" may come from the text side thread while "step" runs, so
  // the hook must be thread-safe.
  std::function<void(std::string_view where)> fault_hook;
};

// One running sequence as /slots shows it (no prompt text: the view is for operators).
struct SlotView {
  int choice = 0;               // index among its job's n choices
  int64_t position = 0;         // tokens in its KV
  int64_t n_ctx = 0;
  int64_t prompt_tokens = 0;
  int generated = 0;
  bool prefilling = false;      // still running its prompt
  double age_s = 0;             // since its request arrived
};

class Scheduler {
 public:
  Scheduler(Engine& engine, const Tokenizer& tokenizer, Metrics& metrics, SchedulerOptions options);
  ~Scheduler();  // cancels what is left and joins
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerOptions& options() const { return options_; }
  int64_t n_ctx() const;

  void submit(std::shared_ptr<Job> job);
  // Runs `fn` on the scheduler thread between two steps, with the engine and the prefix cache to
  // itself; blocks until it returned and rethrows what it threw.
  void run_exclusive(std::function<void(Engine&, PrefixCache&)> fn);
  // Jobs queued or running (0 = idle).
  size_t in_flight() const;
  // The running sequences, taken between two steps; `queued` gets the jobs still waiting.
  std::vector<SlotView> slots(size_t& queued);
  // Ends the thread after the jobs in flight finished (drain) or after cancelling them.
  void stop(bool drain);

 private:
  struct Sequence;
  void loop();
  // Admission and the KV budget (scheduler_admission.cpp). With a capped KV pool (jitllmd's
  // --kv-tokens) a job is admitted when its prompt's pages are free (the prefix cache's sessions
  // give way first); a step that would need more pages than are free first evicts cached
  // sessions, then preempts the sequences admitted last: their KV is dropped and recomputed
  // (prompt and output so far, no logits) when pages are free again, before any new job is
  // admitted. So a step never runs out of pages and no request fails for KV.
  void admit();
  void drop_cancelled();
  // The prompt tokens `job` reuses of a cached session (0: none worth it).
  int64_t reused_tokens(const PrefixCache::Match& hit, const Job& job) const;
  // Pages a sequence of `tokens` positions holds; free pages of the pool (no cap: INT64_MAX).
  int64_t pages_for(int64_t tokens) const;
  int64_t free_pages() const;
  // Pages the running sequences will still take for what they have to feed (prompt chunks, a
  // returning sequence's KV) and their next token: not free for admission.
  int64_t owed_pages() const;
  // Evicts cached sessions until `need` pages are free; true when they are.
  bool evict_for(int64_t need);
  // Fits the step's sequences (`groups`) into the free pages: evicts cached sessions, then parks
  // sequences from the back of active_ (never the last one left), dropping them from `groups`.
  void fit_step(std::vector<std::vector<Sequence*>>& groups);
  void park(Sequence& seq);
  // Brings parked sequences back (earliest first) while their pages are free; false when one
  // still waits (then no new job is admitted).
  bool unpark();
  // The tokens `seq` feeds in its next step: one when decoding, else its next prompt chunk.
  size_t next_chunk(const Sequence& seq) const;
  static bool decoding(const Sequence& seq);
  void run_step();
  void run_group(const std::vector<Sequence*>& group);
  void on_logits(Sequence& seq, const PickedLogits& logits);
  // What `seq`'s next draw needs of its logits row: the reduced row its sampler chain asks for
  // (SamplerChain::reduction, with the logprobs the job wants; under a grammar with its mask), or
  // the whole row (greedy under a grammar, a grammar with logprobs, a prompt about to fork into
  // n choices, a chain that needs it). The pick's extra columns and mask live in seq.touched and
  // seq.allowed until its draw.
  LogitsPick pick_for(Sequence& seq) const;
  // A sequence's next token and the logprobs its job asked for (token < 0: the length is
  // reached, nothing was drawn). Touches only that sequence's sampler: runs on pool threads.
  struct Draw {
    int32_t token = -1;
    std::optional<TokenLogprobInfo> logprob;
    double grammar_seconds = 0;  // choosing under the job's grammar (masks, checks)
  };
  Draw draw_token(Sequence& seq, const PickedLogits& logits) const;
  // draw_token over a reduced row (the sampler's sample_reduced; logprobs from the pick's
  // log-normaliser).
  Draw draw_reduced(Sequence& seq, const PickedLogits& logits) const;
  void emit_token(Sequence& seq, Draw draw);  // the scheduler thread's part: events, stops
  void emit_token(Sequence& seq, const PickedLogits& logits);
  // A decoding token's text, streamed while the next step runs (JITLLM_SCHED_OVERLAP): the
  // token was accepted and is fed next; its text (detokenised, stop strings, the event) waits in
  // pending_text_ and goes out on text_worker_ during the engine's next step, the only time the
  // scheduler thread touches no sequence. A stop string found there ends the sequence after
  // that step (whose extra token is dropped). Tokens that end a sequence, first tokens and
  // grammar-constrained jobs are streamed at once, on the scheduler thread.
  struct PendingText {
    Sequence* seq = nullptr;
    int32_t token = -1;
    std::optional<TokenLogprobInfo> logprob;
    bool stopped = false;      // a stop string matched in this token's text
    std::exception_ptr fault;  // detokenising failed
  };
  void stream_text(PendingText& item) const;  // any thread: touches only item.seq's text state
  void start_pending_text();   // just before a step: the pending texts go out beside it
  void finish_pending_text();  // after the step (or when none follows): stops and faults applied
  std::vector<PendingText> pending_text_;
  bool text_started_ = false;
  uint64_t steps_run_ = 0;
  // A lazily applied grammar (tool_choice auto): switches it on when the output shows one of
  // the job's triggers; true when the grammar is then already complete.
  bool watch_for_trigger(Sequence& seq, int32_t tok);
  void finish_sequence(Sequence& seq, const char* reason, std::string tail);
  // Ends every sequence of the job `seq` belongs to with `error`; the others run on.
  void fail_job(Sequence& seq, const ApiError& error);
  // The last resort of the loop: every running job ends with a 500, the thread lives on.
  void fail_all(const std::string& what);
  void fault(std::string_view where) const {
    if (options_.fault_hook) options_.fault_hook(where);
  }
  void retire_done();
  void update_gauges();

  Engine& engine_;
  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  SchedulerOptions options_;
  PrefixCache cache_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stopping_ = false, drain_ = true;
  size_t active_jobs_ = 0;  // jobs admitted and not finished (guarded by mutex_)

  std::vector<std::unique_ptr<Sequence>> active_;  // scheduler thread only
  // Sequences the admitted jobs hold or will hold once forked (a job of n choices takes n seats
  // at admission): at most options_.parallel. Scheduler thread only.
  int seats_ = 0;
  size_t n_tokens_ = 0;  // logits a sequence samples from: the tokenizer's tokens
  int64_t page_tokens_ = 1;            // positions a KV page holds
  int64_t kv_cap_pages_ = INT64_MAX;   // the KV pool's cap (INT64_MAX: none)
  SideWorker text_worker_;
  std::thread thread_;
};

}  // namespace jitllm::server
