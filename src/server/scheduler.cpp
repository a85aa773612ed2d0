// Scheduler implementation: admission with prefix reuse, ragged steps, sampling, stop strings,
// streaming events, cancellation, metrics.
#include "server/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "core/tuning.h"
#include "runtime/session_fork.h"
#include "sample/logprobs.h"
#include "server/reasoning_parser.h"
#include "server/scheduler_sequence.h"
#include "server/stop_matcher.h"
#include "sample/sampler_chain.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The scheduler's time by phase (counter scheduler_seconds_total{phase}): where an iteration
// goes besides the engine's step. Adds the time since `since` and restarts it.
void count_phase(Metrics& metrics, const char* phase, Clock::time_point& since) {
  const auto now = Clock::now();
  metrics.add_counter(labelled("scheduler_seconds_total", "phase", phase),
                      seconds_between(since, now));
  since = now;
}

}  // namespace

ApiError error_of(const std::exception& e) {
  if (const auto* api = dynamic_cast<const ApiError*>(&e)) return *api;
  // A grammar past the matcher's bounds at a state the output reached only now: the request's.
  if (dynamic_cast<const constrain::GrammarLimitError*>(&e))
    return ApiError(400, "invalid_request_error", e.what(), "grammar");
  if (dynamic_cast<const CapacityError*>(&e)) return server_busy(e);
  if (dynamic_cast<const ModelOutputError*>(&e))
    return ApiError(500, "server_error",
                    fmt::format("the model's output is not usable ({}); this request was stopped",
                                e.what()),
                    "", "model_output_invalid");
  return ApiError(500, "server_error", e.what());
}

Scheduler::Scheduler(Engine& engine, const Tokenizer& tokenizer, Metrics& metrics,
                     SchedulerOptions options)
    : engine_(engine), tokenizer_(tokenizer), metrics_(metrics), options_(std::move(options)),
      cache_(options_.cache_sessions) {
  if (options_.parallel <= 0) throw_error("-parallel must be positive, got {}", options_.parallel);
  if (options_.prefill_chunk <= 0) throw_error("prefill chunk must be positive");
  if (options_.mixed_step_rows <= 0) options_.mixed_step_rows = 1;
  // Positions past the training context are not served (RoPE scaling is the model's to set).
  if (options_.n_ctx > engine.config().n_ctx_train)
    log(LogLevel::Warn, "--ctx-size {} is past the model's training context; serving {} tokens "
        "per sequence", options_.n_ctx, engine.config().n_ctx_train);
  if (options_.n_ctx <= 0 || options_.n_ctx > engine.config().n_ctx_train)
    options_.n_ctx = engine.config().n_ctx_train;
  page_tokens_ = std::max<int64_t>(1, engine.options().kv_page_tokens);
  if (const size_t cap = engine.kv_pool().max_pages(); cap > 0) {
    kv_cap_pages_ = int64_t(cap);
    // A sequence alone always fits the budget (fit_step parks others, never the last one).
    if (options_.n_ctx > kv_cap_pages_ * page_tokens_) {
      log(LogLevel::Warn, "the KV cache holds {} tokens: serving at most that many per sequence",
          kv_cap_pages_ * page_tokens_);
      options_.n_ctx = kv_cap_pages_ * page_tokens_;
    }
  }
  // Logits past the tokenizer's last token (a padded head) are never sampled (sampler_chain.h).
  n_tokens_ = std::min<size_t>(tokenizer.n_vocab(), size_t(engine.config().n_vocab));
  // Pages taken outside the steps' planning (forks, /v1/systemone's sessions) come from cached
  // sessions first, as the steps' do (evict_for). Every acquire runs on this scheduler's thread.
  engine_.set_kv_reclaimer([this] { return cache_.evict_one(); });
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  stop(false);
  engine_.set_kv_reclaimer({});
}

int64_t Scheduler::n_ctx() const { return options_.n_ctx; }

void Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void Scheduler::run_exclusive(std::function<void(Engine&, PrefixCache&)> fn) {
  std::packaged_task<void()> task([this, fn = std::move(fn)] { fn(engine_, cache_); });
  std::future<void> done = task.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw ApiError(503, "server_error", "the server is shutting down");
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
  done.get();
}

std::vector<SlotView> Scheduler::slots(size_t& queued) {
  std::vector<SlotView> out;
  run_exclusive([&](Engine&, PrefixCache&) {
    const auto now = Clock::now();
    for (const auto& s : active_) {
      if (s->done || !s->session) continue;
      SlotView v;
      v.choice = s->index;
      v.position = s->session->position();
      v.n_ctx = s->session->n_ctx();
      v.prompt_tokens = int64_t(s->run->job->prompt.size());
      v.generated = s->generated;
      v.prefilling = s->next < 0 && !s->pending.empty();
      v.age_s = seconds_between(s->run->job->arrived, now);
      out.push_back(v);
    }
    std::lock_guard lock(mutex_);
    queued = queue_.size();
  });
  return out;
}

size_t Scheduler::in_flight() const {
  std::lock_guard lock(mutex_);
  return queue_.size() + active_jobs_ + tasks_.size();
}

void Scheduler::stop(bool drain) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    drain_ = drain;
  }
  cv_.notify_all();
  thread_.join();
}

void Scheduler::loop() {
  while (true) {
    std::deque<std::packaged_task<void()>> tasks;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] {
        return stopping_ || !queue_.empty() || !tasks_.empty() || !active_.empty();
      });
      if (stopping_ && !drain_) {
        for (auto& job : queue_) job->cancelled = true;
        for (auto& seq : active_) seq->run->job->cancelled = true;
      }
      if (stopping_ && queue_.empty() && active_.empty() && tasks_.empty()) break;
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();  // exceptions land in the task's future
    // Faults of one sequence end that job where they happen (run_group); anything that still
    // gets here ends the running jobs, never the thread (and with it the process).
    try {
      const auto t0 = Clock::now();
      auto since = t0;
      drop_cancelled();
      retire_done();  // the cancelled sessions' pages and seats are free for what follows
      admit();
      count_phase(metrics_, "admit", since);
      const bool stepped = !active_.empty();
      const uint64_t steps_before = steps_run_;
      if (stepped) run_step();
      since = Clock::now();
      if (steps_run_ == steps_before) finish_pending_text();  // no step to go out beside
      retire_done();
      update_gauges();
      count_phase(metrics_, "retire", since);
      // iteration_seconds - step_seconds: the scheduler's own part of a token's latency.
      if (stepped) metrics_.observe("iteration_seconds", seconds_between(t0, Clock::now()));
    } catch (const std::exception& e) {
      fail_all(e.what());
    } catch (...) {
      fail_all("unknown error");
    }
  }
  // Pending jobs of a non-draining stop were cancelled above; answer them.
  std::lock_guard lock(mutex_);
  for (auto& job : queue_) job->finish({}, ApiError(503, "server_error", "the server stopped"));
  queue_.clear();
}

bool Scheduler::decoding(const Sequence& s) { return s.next >= 0 && s.pending_off >= s.pending.size(); }

size_t Scheduler::next_chunk(const Sequence& s) const {
  if (decoding(s)) return 1;
  // Up to the next chunk boundary, so a prompt always meets the same chunks (a warm run computes
  // what a cold one does).
  const int64_t pos = s.session->position();
  const int64_t to_boundary = options_.prefill_chunk - pos % options_.prefill_chunk;
  return size_t(std::min<int64_t>(to_boundary, int64_t(s.pending.size() - s.pending_off)));
}

void Scheduler::run_step() {
  std::vector<std::vector<Sequence*>> groups(1);
  if (!options_.deterministic) {
    // One step: every decoding row, then prompt chunks while the budget lasts (at least one
    // chunk, so a prompt always advances).
    int64_t prefill = 0;
    for (auto& s : active_)
      if (!s->done && !s->parked && decoding(*s)) groups[0].push_back(s.get());
    for (auto& s : active_) {
      if (s->done || s->parked || decoding(*s)) continue;
      s->chunk = next_chunk(*s);
      if (prefill > 0 && prefill + int64_t(s->chunk) > options_.step_prefill_tokens) {
        s->chunk = 0;  // next iteration
        continue;
      }
      prefill += int64_t(s->chunk);
      groups[0].push_back(s.get());
    }
  } else {
    // Groups of at most mixed_step_rows rows, each one Engine::step; a prefill chunk bigger than
    // that runs alone (one per iteration, so decoding streams keep flowing while a long prompt
    // loads).
    int64_t rows = 0;
    auto add = [&](Sequence* s, int64_t n) {
      if (rows + n > options_.mixed_step_rows && !groups.back().empty()) {
        groups.emplace_back();
        rows = 0;
      }
      groups.back().push_back(s);
      rows += n;
    };
    for (auto& s : active_)
      if (!s->done && !s->parked && decoding(*s)) add(s.get(), 1);
    Sequence* big = nullptr;
    for (auto& s : active_) {
      if (s->done || s->parked || decoding(*s)) continue;
      s->chunk = next_chunk(*s);
      if (int64_t(s->chunk) > options_.mixed_step_rows) {
        if (!big) big = s.get();
        else s->chunk = 0;  // next iteration
        continue;
      }
      add(s.get(), int64_t(s->chunk));
    }
    if (big) groups.push_back({big});
  }
  fit_step(groups);
  static const bool debug = tuning::core_knobs().sched_debug.on();
  if (debug) {
    for (const auto& g : groups) {
      std::string line;
      for (Sequence* q : g)
        line += fmt::format(" [{}:{}@{}]", q->index, decoding(*q) ? 1 : int64_t(q->chunk),
                            q->session->position());
      fmt::print(stderr, "group{}\n", line);
    }
  }
  for (const auto& g : groups)
    if (!g.empty()) run_group(g);
}

void Scheduler::run_group(const std::vector<Sequence*>& group) {
  auto since = Clock::now();
  // A sequence that an earlier group of this iteration ended (its job failed, a stop string in
  // its text) takes no step: its session may be gone.
  std::vector<Sequence*> owners;
  for (Sequence* s : group)
    if (!s->done) owners.push_back(s);
  if (owners.empty()) return;
  // Only rows whose logits choose a token ask for them: decoding rows and a prompt's last chunk
  // (the chunks before it only store KV).
  std::vector<StepInput> inputs;
  std::vector<size_t> row_of(owners.size(), SIZE_MAX);  // owner -> its requested row
  std::vector<LogitsPick> picks;
  std::vector<Sequence*> picking;  // the owners whose rows come back, in row order
  for (size_t i = 0; i < owners.size(); ++i) {
    Sequence* s = owners[i];
    const bool decode = decoding(*s);
    StepInput in{s->session.get(),
                 decode ? std::span<const int32_t>(&s->next, 1)
                        : std::span<const int32_t>(s->pending.data() + s->pending_off, s->chunk),
                 false};
    // A returning parked sequence recomputes its KV without logits (its next token is known).
    in.no_logits = !decode && (s->next >= 0 || s->pending_off + s->chunk < s->pending.size());
    if (!in.no_logits) {
      row_of[i] = picking.size();
      picking.push_back(s);
    }
    inputs.push_back(in);
  }
  // The picks; a drawn token under a grammar computes its mask here, so with several of them the
  // picks run on the pool (each touches only its own sequence; the matchers are thread-safe).
  picks.resize(picking.size());
  bool masks = false;
  for (const Sequence* s : picking) masks |= s->run->job->matcher && s->grammar_on;
  std::vector<std::exception_ptr> pick_faults(picking.size());
  auto pick_range = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      try {
        picks[size_t(k)] = pick_for(*picking[size_t(k)]);
      } catch (...) {
        pick_faults[size_t(k)] = std::current_exception();
      }
    }
  };
  if (masks && picking.size() > 1) ThreadPool::global().parallel_for(int64_t(picking.size()), 1, pick_range);
  else pick_range(0, int64_t(picking.size()));
  for (const std::exception_ptr& f : pick_faults)
    if (f) std::rethrow_exception(f);
  metrics_.observe("batch_size", double(inputs.size()));
  count_phase(metrics_, "picks", since);
  std::vector<PickedLogits> logits;
  start_pending_text();  // the last step's text goes out beside this one
  try {
    fault("step");
    logits = engine_.step_picked(inputs, picks, int64_t(n_tokens_));
    metrics_.observe("step_seconds", seconds_between(since, Clock::now()));
    ++steps_run_;
  } catch (const std::exception& e) {
    finish_pending_text();
    log(LogLevel::Error, "step of {} sequences failed: {}", inputs.size(), e.what());
    // Every choice of those jobs ends, parked or in another group too.
    for (Sequence* s : owners)
      if (!s->done) fail_job(*s, error_of(e));
    return;
  }
  finish_pending_text();  // the last step's texts: their stops and faults apply now
  count_phase(metrics_, "step", since);
  auto row = [&](size_t i) -> const PickedLogits& { return logits[row_of[i]]; };
  // Sequences whose choices are all running draw their tokens in parallel (the sampler of each
  // is its own); a prompt that just finished forks its choices first, on this thread.
  std::vector<size_t> drawing;
  for (size_t i = 0; i < owners.size(); ++i) {
    Sequence& s = *owners[i];
    if (decoding(s)) {
      s.next = -1;
    } else {
      s.pending_off += s.chunk;
      s.chunk = 0;
      if (s.pending_off < s.pending.size()) continue;  // more prompt to run
      s.pending.clear();
      s.pending_off = 0;
      if (s.next >= 0) continue;  // a parked sequence's KV is back: it decodes `next` next
    }
    if (s.done) continue;  // a sibling choice failed its job earlier in this loop
    if (s.run->forked) {
      drawing.push_back(i);
      continue;
    }
    try {
      on_logits(s, row(i));
    } catch (const std::exception& e) {
      log(LogLevel::Error, "a sequence failed: {}", e.what());
      fail_job(s, error_of(e));
    }
  }
  std::vector<Draw> draws(drawing.size());
  std::vector<std::exception_ptr> faults(drawing.size());
  auto draw_range = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      try {
        draws[size_t(k)] = draw_token(*owners[drawing[size_t(k)]], row(drawing[size_t(k)]));
      } catch (...) {
        faults[size_t(k)] = std::current_exception();
      }
    }
  };
  if (drawing.size() > 1) ThreadPool::global().parallel_for(int64_t(drawing.size()), 1, draw_range);
  else draw_range(0, int64_t(drawing.size()));
  count_phase(metrics_, "draw", since);
  for (size_t k = 0; k < drawing.size(); ++k) {
    Sequence& s = *owners[drawing[k]];
    if (s.done) continue;
    try {
      if (faults[k]) std::rethrow_exception(faults[k]);
      emit_token(s, std::move(draws[k]));
    } catch (const std::exception& e) {
      log(LogLevel::Error, "a sequence failed: {}", e.what());
      fail_job(s, error_of(e));
    }
  }
  count_phase(metrics_, "emit", since);
}

void Scheduler::fail_job(Sequence& seq, const ApiError& error) {
  const JobRun* run = seq.run.get();
  for (auto& other : active_) {
    if (other->run.get() != run) continue;
    other->done = true;
    other->session.reset();  // its KV may hold what failed: not for the prefix cache
  }
  seq.done = true;
  seq.session.reset();
  if (!seq.run->job->finished) seq.run->job->finish(seq.run->usage, error);
}

void Scheduler::fail_all(const std::string& what) {
  log(LogLevel::Error, "scheduler step failed, ending {} sequences: {}", active_.size(), what);
  const ApiError error(500, "server_error", what);
  if (text_started_) {
    text_worker_.wait();
    text_started_ = false;
  }
  pending_text_.clear();
  for (auto& seq : active_) {
    seq->done = true;
    seq->session.reset();
    if (!seq->run->job->finished) seq->run->job->finish(seq->run->usage, error);
  }
  try {
    retire_done();
  } catch (const std::exception& e) {
    log(LogLevel::Error, "retiring failed sequences: {}", e.what());
  }
}

void Scheduler::on_logits(Sequence& seq, const PickedLogits& logits) {
  JobRun& run = *seq.run;
  if (!run.forked) {
    // The prompt is in: choices 1..n-1 start from a copy of its KV, each with its own seed.
    run.forked = true;
    for (int i = 1; i < run.job->n; ++i) {
      auto other = std::make_unique<Sequence>();
      other->run = seq.run;
      other->index = i;
      other->session = fork_session(engine_, *seq.session);
      SamplingParams sp = run.job->sampling;
      if (sp.seed != SamplingParams::kRandomSeed) sp.seed += uint32_t(i);
      other->sampler.emplace(sp, int32_t(n_tokens_));
      for (int32_t t : run.job->prompt) other->sampler->accept(t);
      other->decoder.emplace(tokenizer_, run.job->rendered_control_tokens);
      for (int32_t t : run.job->prompt) other->decoder->push(t);
      other->grammar_on = run.job->grammar_triggers.empty();
      if (!other->grammar_on && run.job->triggers_after_thinking)
        other->thinking.emplace(run.job->starts_thinking);
      other->stop.emplace(run.job->stop);
      // In active_ before its first token, so a fault in it is retired like any sequence.
      ++run.live;
      Sequence& choice = *other;
      active_.push_back(std::move(other));
      emit_token(choice, logits);
    }
  }
  emit_token(seq, logits);
}

Scheduler::Draw Scheduler::draw_reduced(Sequence& seq, const PickedLogits& logits) const {
  // The reduced row: the best values and the touched tokens (some may be among the best).
  const Job& job = *seq.run->job;
  std::vector<Candidate> row;
  row.reserve(logits.top_ids.size() + logits.extra.size());
  for (size_t i = 0; i < logits.top_ids.size(); ++i)
    row.push_back({logits.top_ids[i], logits.top_values[i], 0.0f});
  std::vector<int32_t> best(logits.top_ids);  // sorted, to find the touched among them
  std::sort(best.begin(), best.end());
  const std::vector<int32_t>& touched = seq.touched;
  for (size_t i = 0; i < touched.size(); ++i)
    if (!std::binary_search(best.begin(), best.end(), touched[i]))
      row.push_back({touched[i], logits.extra[i], 0.0f});
  Draw d;
  const auto t0 = Clock::now();
  d.token = seq.sampler->sample_reduced(row, seq.allowed);
  if (!seq.allowed.empty()) d.grammar_seconds = seq.mask_seconds + seconds_between(t0, Clock::now());
  if (job.logprobs && !tokenizer_.vocab().is_eog(d.token)) {
    // log p = x - max - log(sum exp(x - max)) over the whole row, as sample/logprobs.h computes it.
    auto logprob = [&](float x) {
      return float(double(x) - double(logits.max) - logits.log_sum);
    };
    TokenLogprobInfo info;
    info.id = d.token;
    info.text = tokenizer_.piece(d.token);
    for (const Candidate& c : row)
      if (c.id == d.token) info.logprob = logprob(c.logit);
    const size_t n = std::min(size_t(job.top_logprobs), logits.top_ids.size());
    for (size_t i = 0; i < n; ++i)
      info.top.emplace_back(tokenizer_.piece(logits.top_ids[i]), logprob(logits.top_values[i]));
    d.logprob = std::move(info);
  }
  return d;
}

LogitsPick Scheduler::pick_for(Sequence& seq) const {
  LogitsPick whole;  // top -1: the whole row
  seq.touched.clear();
  seq.allowed.clear();
  seq.mask_seconds = 0;
  const Job& job = *seq.run->job;
  if (seq.generated >= job.max_tokens) return LogitsPick{0};  // nothing is drawn
  if (!seq.run->forked && job.n > 1) return whole;             // n choices draw from this row
  // Greedy under a grammar tries the best token first and needs a mask only when the grammar
  // refuses it (draw_token): the whole row, so most steps compute no mask.
  const bool masked = job.matcher && seq.grammar_on;
  if (masked && job.sampling.temperature <= 0.0f) return whole;
  // Logprobs are the raw row's (sample/logprobs.h): a masked pick would list allowed tokens only.
  if (masked && job.logprobs) return whole;
  const std::optional<SamplerChain::Reduction> r = seq.sampler->reduction(kMaxPickTop);
  if (!r) return whole;
  LogitsPick pick{r->top};
  if (job.logprobs) {
    pick.top = std::max(pick.top, job.top_logprobs);
    if (pick.top > kMaxPickTop || pick.top >= int32_t(n_tokens_)) return whole;
    pick.log_norm = true;
  }
  if (masked) {
    // A drawn token under a grammar: the mask (computed for every such draw anyway) goes with
    // the pick, which selects among the allowed tokens where the logits are.
    try {
      const auto t0 = Clock::now();
      const std::span<const uint64_t> m = job.matcher->mask(seq.grammar);
      seq.allowed.assign(m.begin(), m.end());
      seq.mask_seconds = seconds_between(t0, Clock::now());
    } catch (const std::exception&) {
      seq.allowed.clear();
      return whole;  // draw_token meets the same fault and ends this job alone
    }
    pick.allowed = seq.allowed;
  }
  seq.touched = r->touched;
  pick.extra = seq.touched;
  return pick;
}

Scheduler::Draw Scheduler::draw_token(Sequence& seq, const PickedLogits& logits) const {
  Draw d;
  const Job& job = *seq.run->job;
  if (seq.generated >= job.max_tokens) return d;  // d.token < 0: the length is reached
  fault("sample");
  if (logits.bad >= 0)
    throw ModelOutputError(fmt::format("sampling: logits[{}] is {}", logits.bad,
                                       std::isnan(logits.bad_value) ? "NaN" : "+inf"));
  if (logits.row.empty()) return draw_reduced(seq, logits);
  const std::span<const float> candidates(logits.row);
  if (job.matcher && seq.grammar_on) {
    // Greedy: the best token stands when the grammar allows it (then it is also the best of the
    // allowed ones), so most steps need no mask. Drawn: the draw is over the allowed tokens.
    const auto t0 = Clock::now();
    if (job.sampling.temperature <= 0.0f) {
      d.token = seq.sampler->sample(candidates);
      if (!job.matcher->allows(seq.grammar, d.token))
        d.token = seq.sampler->sample(candidates, job.matcher->mask(seq.grammar));
    } else {
      d.token = seq.sampler->sample(candidates, job.matcher->mask(seq.grammar));
    }
    d.grammar_seconds = seconds_between(t0, Clock::now());
  } else {
    d.token = seq.sampler->sample(candidates);
  }
  if (job.logprobs && !tokenizer_.vocab().is_eog(d.token)) {
    TokenLogprobInfo info;
    info.id = d.token;
    info.text = tokenizer_.piece(d.token);
    info.logprob = logprobs(candidates, d.token);
    for (const TokenLogprob& t : top_logprobs(candidates, size_t(job.top_logprobs)))
      info.top.emplace_back(tokenizer_.piece(t.id), t.logprob);
    d.logprob = std::move(info);
  }
  return d;
}

void Scheduler::emit_token(Sequence& seq, const PickedLogits& logits) {
  emit_token(seq, draw_token(seq, logits));
}

void Scheduler::emit_token(Sequence& seq, Draw draw) {
  Job& job = *seq.run->job;
  const auto now = Clock::now();
  if (draw.token < 0) return finish_sequence(seq, "length", "");
  const int32_t tok = draw.token;
  if (!seq.run->first_token) {
    seq.run->first_token = true;
    metrics_.observe("time_to_first_token_seconds", seconds_between(job.arrived, now));
    job.first_token_us =
        std::chrono::duration_cast<std::chrono::microseconds>(now - job.arrived).count();
  } else if (seq.generated > 0) {
    metrics_.observe("inter_token_latency_seconds", seconds_between(seq.last_token, now));
  }
  seq.last_token = now;
  if (job.matcher && seq.grammar_on) metrics_.observe("grammar_seconds", draw.grammar_seconds);
  if (tokenizer_.vocab().is_eog(tok)) return finish_sequence(seq, "stop", "");
  bool grammar_done = false;
  if (job.matcher && seq.grammar_on) {
    seq.grammar = job.matcher->advance(seq.grammar, tok);
    if (seq.grammar == constrain::Matcher::kDead)
      throw Error(fmt::format("the sampled token {} is outside the grammar", tok));
    grammar_done = job.matcher->finished(seq.grammar);
  } else if (job.matcher) {
    grammar_done = watch_for_trigger(seq, tok);
  }
  seq.sampler->accept(tok);
  ++seq.generated;
  ++seq.run->usage.completion_tokens;
  metrics_.add_counter("generated_tokens_total");
  const bool full = seq.session->position() + 1 > seq.session->n_ctx();
  const bool ends = seq.generated >= job.max_tokens || full || grammar_done;
  static const bool overlap = tuning::core_knobs().sched_overlap.on();
  if (overlap && !ends && !job.matcher && seq.generated > 1) {
    seq.next = tok;  // fed next; its text goes out during that step
    pending_text_.push_back(PendingText{&seq, tok, std::move(draw.logprob)});
    return;
  }

  JobEvent ev;
  ev.index = seq.index;
  if (draw.logprob) ev.tokens.push_back(std::move(*draw.logprob));
  fault("detokenize");
  ev.text = seq.stop->push(seq.decoder->push(tok));
  if (seq.stop->stopped()) {
    ev.finish_reason = "stop";
    ev.stop_sequence = seq.stop->matched_stop();
    seq.done = true;
    job.push(std::move(ev));
    return;
  }
  if (ends) {
    // The text still held back (an unfinished character or a possible stop) is released now.
    // A grammar that cannot go on ends the output as the end token would.
    std::string tail = seq.stop->push(seq.decoder->finish());
    ev.finish_reason = seq.stop->stopped() || grammar_done ? "stop" : "length";
    if (seq.stop->stopped()) ev.stop_sequence = seq.stop->matched_stop();
    else tail += seq.stop->flush();
    ev.text += tail;
    seq.done = true;
    job.push(std::move(ev));
    return;
  }
  seq.next = tok;
  if (!ev.text.empty() || !ev.tokens.empty()) job.push(std::move(ev));
}

void Scheduler::stream_text(PendingText& item) const {
  Sequence& seq = *item.seq;
  try {
    fault("detokenize");
    JobEvent ev;
    ev.index = seq.index;
    if (item.logprob) ev.tokens.push_back(std::move(*item.logprob));
    ev.text = seq.stop->push(seq.decoder->push(item.token));
    if (seq.stop->stopped()) {
      ev.finish_reason = "stop";
      ev.stop_sequence = seq.stop->matched_stop();
      item.stopped = true;
    }
    if (item.stopped || !ev.text.empty() || !ev.tokens.empty()) seq.run->job->push(std::move(ev));
  } catch (...) {
    item.fault = std::current_exception();
  }
}

void Scheduler::start_pending_text() {
  // Texts of sequences that ended since their draw (cancelled, failed) are dropped.
  std::erase_if(pending_text_, [](const PendingText& p) { return p.seq->done; });
  if (pending_text_.empty()) return;
  text_started_ = true;
  text_worker_.start([this] {
    for (PendingText& p : pending_text_) stream_text(p);
  });
}

void Scheduler::finish_pending_text() {
  if (text_started_) {
    text_worker_.wait();  // stream_text keeps its faults in the items
    text_started_ = false;
  } else {
    for (PendingText& p : pending_text_)
      if (!p.seq->done) stream_text(p);
  }
  std::vector<PendingText> items = std::move(pending_text_);
  pending_text_.clear();
  for (PendingText& p : items) {
    Sequence& seq = *p.seq;
    if (seq.done) continue;
    if (p.fault) {
      try {
        std::rethrow_exception(p.fault);
      } catch (const std::exception& e) {
        log(LogLevel::Error, "a sequence failed: {}", e.what());
        fail_job(seq, error_of(e));
      }
    } else if (p.stopped) {
      seq.done = true;  // the step it took meanwhile is dropped
    }
  }
}

bool Scheduler::watch_for_trigger(Sequence& seq, int32_t tok) {
  const Job& job = *seq.run->job;
  // The text as the decoder writes it (the rendered markers, no other control token).
  const auto& shown = job.rendered_control_tokens;
  std::string text = tokenizer_.piece(tok, std::find(shown.begin(), shown.end(), tok) != shown.end());
  if (seq.thinking) {
    // Only the answer after the thinking counts (a trigger inside it is part of the thought).
    std::string thought, answer;
    seq.thinking->push(text, thought, answer);
    text = std::move(answer);
  }
  seq.recent += text;
  size_t longest = 0;
  for (const GrammarTrigger& t : job.grammar_triggers) longest = std::max(longest, t.text.size());
  for (size_t from = 0;;) {
    const size_t at = find_trigger(seq.recent, from, job.grammar_triggers, seq.blank_so_far);
    if (at == std::string::npos) break;
    // The grammar holds from the trigger on, the rest of this token's text included.
    const auto state = job.matcher->advance_bytes(job.matcher->start(), std::string_view(seq.recent).substr(at));
    if (state != constrain::Matcher::kDead) {
      seq.grammar_on = true;
      seq.grammar = state;
      seq.recent.clear();
      return job.matcher->finished(state);
    }
    // The token brought text past the trigger that no call can have: not a call, text.
    metrics_.add_counter("grammar_triggers_refused_total");
    from = at + 1;
  }
  if (seq.recent.size() >= longest) {
    const size_t drop = seq.recent.size() - (longest - 1);
    if (seq.recent.find_first_not_of(" \t\r\n") < drop) seq.blank_so_far = false;
    seq.recent.erase(0, drop);
  }
  return false;
}

void Scheduler::finish_sequence(Sequence& seq, const char* reason, std::string tail) {
  JobEvent ev;
  ev.index = seq.index;
  std::string rest = seq.stop->push(seq.decoder->finish());
  if (!seq.stop->stopped()) rest += seq.stop->flush();
  ev.text = tail + rest;
  ev.finish_reason = reason;
  if (seq.stop->stopped()) ev.stop_sequence = seq.stop->matched_stop();
  seq.done = true;
  seq.run->job->push(std::move(ev));
}

void Scheduler::retire_done() {
  std::erase_if(pending_text_, [](const PendingText& p) { return p.seq->done; });
  for (auto it = active_.begin(); it != active_.end();) {
    Sequence& s = **it;
    if (!s.done) {
      ++it;
      continue;
    }
    if (s.session) cache_.put(std::move(s.session));
    JobRun& run = *s.run;
    // A cancelled job's choices are all marked done in the same pass (drop_cancelled).
    if (--run.live == 0) {
      if (!run.job->finished) {
        if (run.job->cancelled)
          run.job->finish(run.usage, ApiError(499, "cancelled", "the client went away"));
        else
          run.job->finish(run.usage);
      }
      seats_ -= std::max(1, run.job->n);
      std::lock_guard lock(mutex_);
      --active_jobs_;
    }
    it = active_.erase(it);
  }
}

void Scheduler::update_gauges() {
  auto gauge = [&](const char* name, double value) {
    metrics_.set_gauge(labelled(name, "model", options_.model_id), value);
  };
  const KvPagePool& pool = engine_.kv_pool();
  gauge("kv_pages_used", double(pool.pages_in_use()));
  gauge("kv_pages_total", double(pool.pages_allocated()));
  gauge("sessions_active", double(active_.size()));
  gauge("prefix_cache_sessions", double(cache_.size()));
  if (const ExpertCache* experts = engine_.expert_cache()) {  // paged experts (monotonic)
    const ExpertCacheStats e = experts->stats();
    gauge("expert_cache_hits_total", double(e.hits));
    gauge("expert_cache_misses_total", double(e.misses));
    gauge("expert_read_bytes_total", double(e.bytes_read));
    gauge("expert_read_wait_seconds_total", e.wait_seconds);
  }
  std::lock_guard lock(mutex_);
  gauge("requests_queued", double(queue_.size()));
}

}  // namespace jitllm::server
