// Scheduler admission and the KV budget (see scheduler.h): jobs join the running batch when
// their seats and their prompt's KV pages are free; a step that would need more pages than the
// pool has left first evicts the prefix cache's sessions, then parks the sequences admitted last
// (their KV dropped, recomputed when pages are free again).
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "core/log.h"
#include "server/scheduler.h"
#include "server/scheduler_sequence.h"

namespace jitllm::server {

void Scheduler::admit() {
  // Sequences parked for pages come back first; while one waits, no new job takes its pages.
  if (!unpark()) return;
  while (true) {
    std::shared_ptr<Job> job;
    int64_t pages = 0;  // the prompt's pages (and its choices' copies) and the first token's
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;
      // Seats, not jobs: n choices run as n sequences. A job larger than -parallel is refused
      // at the door (make_job); one that fits waits until its seats are free.
      const int need = std::max(1, queue_.front()->n);
      if (seats_ > 0 && seats_ + need > options_.parallel) return;
      job = queue_.front();
      pages = pages_for(int64_t(job->prompt.size()) + 1) * need;
    }
    // Only the scheduler takes from the queue, so its front is still this job. The pages the
    // running sequences are still owed (prompts not yet in) are not free; one page is kept free
    // beyond the prompt's where the cache has it, so an admission does not preempt at once.
    // The cached session this prompt would reuse leaves the cache first (cut to what it reuses),
    // so making room evicts the others before it; it goes back if that is not enough.
    PrefixCache::Match hit;
    int64_t keep = 0;
    if (!job->cancelled) {
      hit = cache_.take_longest(job->prompt, options_.min_reuse_tokens);
      keep = reused_tokens(hit, *job);
      if (hit.session && keep == 0) {
        cache_.put(std::move(hit.session));
        hit = {};
      }
      if (hit.session) hit.session->truncate(keep);
    }
    if (pages <= kv_cap_pages_) {
      const int64_t need = owed_pages() + std::min(pages + 1, kv_cap_pages_);
      if (!evict_for(need - (hit.session ? pages_for(keep) : 0))) {
        if (hit.session) cache_.put(std::move(hit.session));
        hit = {};
        keep = 0;
        if (!evict_for(need)) return;  // after running ones end
      }
    }
    {
      std::lock_guard lock(mutex_);
      queue_.pop_front();
      ++active_jobs_;
      seats_ += std::max(1, job->n);
    }
    auto run = std::make_shared<JobRun>();
    run->job = job;
    run->usage.prompt_tokens = int64_t(job->prompt.size());
    auto seq = std::make_unique<Sequence>();
    seq->run = run;
    try {
      if (job->cancelled) throw ApiError(499, "cancelled", "the client went away");
      if (pages > kv_cap_pages_)
        throw ApiError(400, "invalid_request_error",
                       fmt::format("the prompt of {} tokens{} needs {} KV pages of {} tokens; the KV "
                                   "cache holds {} (jitllmd --kv-tokens)",
                                   job->prompt.size(),
                                   job->n > 1 ? fmt::format(" with its {} choices", job->n) : "",
                                   pages, page_tokens_, kv_cap_pages_),
                       "", "context_length_exceeded");
      if (hit.session) {
        seq->session = std::move(hit.session);
        if (keep > 0) {
          metrics_.add_counter("prefix_cache_hits_total");
          metrics_.add_counter("prompt_tokens_cached_total", double(keep));
        }
      } else {
        seq->session = engine_.new_session(options_.n_ctx);
      }
      run->usage.cached_tokens = keep;
      seq->pending.assign(job->prompt.begin() + keep, job->prompt.end());
      SamplingParams sp = job->sampling;
      seq->sampler.emplace(sp, int32_t(n_tokens_));
      for (int32_t t : job->prompt) seq->sampler->accept(t);
      // The decoder sees the prompt first (its text dropped), so the first generated token
      // keeps its leading space as a continuation of the prompt (as `jitllm run` prints it).
      seq->decoder.emplace(tokenizer_, job->rendered_control_tokens);
      for (int32_t t : job->prompt) seq->decoder->push(t);
      seq->grammar_on = job->grammar_triggers.empty();
      if (!seq->grammar_on && job->triggers_after_thinking) seq->thinking.emplace(job->starts_thinking);
      seq->stop.emplace(job->stop);
      metrics_.add_counter("prompt_tokens_total", double(job->prompt.size() - size_t(keep)));
      active_.push_back(std::move(seq));
    } catch (const std::exception& e) {
      if (hit.session) cache_.put(std::move(hit.session));  // unused: kept for others
      job->finish(run->usage, error_of(e));
      std::lock_guard lock(mutex_);
      --active_jobs_;
      seats_ -= std::max(1, job->n);
    }
  }
}

void Scheduler::drop_cancelled() {
  for (auto& seq : active_) {
    if (seq->done || !seq->run->job->cancelled) continue;
    seq->done = true;
    metrics_.add_counter("sessions_cancelled_total");
  }
}

int64_t Scheduler::reused_tokens(const PrefixCache::Match& hit, const Job& job) const {
  if (!hit.session) return 0;
  // The last prompt token always runs again: its logits choose the first new token.
  // Deterministic steps cut at a chunk boundary, so the rest runs in the chunks a cold run would
  // use (a warm answer equals a cold one bitwise); otherwise all that is shared is reused, to the
  // token (a chat's next turn reuses its whole history).
  int64_t keep = std::min<int64_t>(hit.common, int64_t(job.prompt.size()) - 1);
  if (options_.deterministic) keep -= keep % options_.prefill_chunk;
  return keep < options_.min_reuse_tokens ? 0 : keep;
}

int64_t Scheduler::pages_for(int64_t tokens) const {
  return (tokens + page_tokens_ - 1) / page_tokens_;
}

int64_t Scheduler::owed_pages() const {
  if (kv_cap_pages_ == INT64_MAX) return 0;
  int64_t owed = 0;
  for (const auto& s : active_) {
    if (s->done || s->parked || !s->session) continue;
    const int64_t pos = s->session->position();
    const int64_t rest = int64_t(s->pending.size() - std::min(s->pending_off, s->pending.size()));
    owed += pages_for(pos + rest + 1) - pages_for(pos);
  }
  return owed;
}

int64_t Scheduler::free_pages() const {
  if (kv_cap_pages_ == INT64_MAX) return INT64_MAX;
  return kv_cap_pages_ - int64_t(engine_.kv_pool().pages_in_use());
}

bool Scheduler::evict_for(int64_t need) {
  while (free_pages() < need)
    if (!cache_.evict_one()) return false;
  return true;
}

void Scheduler::fit_step(std::vector<std::vector<Sequence*>>& groups) {
  if (kv_cap_pages_ == INT64_MAX) return;
  while (true) {
    int64_t need = 0;
    for (const auto& g : groups)
      for (const Sequence* s : g) {
        const int64_t pos = s->session->position(), n = int64_t(next_chunk(*s));
        need += pages_for(pos + n) - pages_for(pos);
        // A prompt that ends in this step forks its other choices after it: copies of its KV.
        const Job& job = *s->run->job;
        if (!s->run->forked && job.n > 1 && s->next < 0 && s->pending_off + size_t(n) >= s->pending.size())
          need += int64_t(job.n - 1) * pages_for(pos + n);
      }
    if (evict_for(need)) return;
    // Park the sequence admitted last (the back of active_) that still runs, unless it is the
    // only one: a lone sequence fits, as the budget holds at least one full context.
    Sequence* victim = nullptr;
    int running = 0;
    for (auto& s : active_) {
      if (s->done || s->parked) continue;
      ++running;
      victim = s.get();
    }
    if (running <= 1) return;  // the step fails alone if even this does not fit
    park(*victim);
    for (auto& g : groups) g.erase(std::remove(g.begin(), g.end(), victim), g.end());
  }
}

void Scheduler::park(Sequence& seq) {
  // Everything its KV held, then the prompt still to run; `next` stays (fed after them).
  std::vector<int32_t> tokens = seq.session->tokens();
  tokens.insert(tokens.end(), seq.pending.begin() + std::ptrdiff_t(seq.pending_off), seq.pending.end());
  seq.pending = std::move(tokens);
  seq.pending_off = 0;
  seq.chunk = 0;
  seq.session.reset();
  seq.parked = true;
  metrics_.add_counter("sequences_preempted_total");
  log(LogLevel::Debug, "parked a sequence of {} tokens: the KV cache is full", seq.pending.size());
}

bool Scheduler::unpark() {
  for (auto& s : active_) {
    if (s->done || !s->parked) continue;
    if (!evict_for(owed_pages() + pages_for(int64_t(s->pending.size()) + 1))) return false;
    s->session = engine_.new_session(options_.n_ctx);
    s->parked = false;
  }
  return true;
}

}  // namespace jitllm::server
