// The scheduler's running state, shared by its files (scheduler.cpp: steps and draws;
// scheduler_admission.cpp: admission and the KV budget). Scheduler thread only.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampler_chain.h"
#include "server/reasoning_parser.h"
#include "server/scheduler.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

// What a fault while running a job tells its client: the request's own errors keep their
// status; the model's unusable output and everything unexpected are the server's (500).
ApiError error_of(const std::exception& e);

// What a job's sequences share: the job, its usage so far, how many sequences are still live.
struct JobRun {
  std::shared_ptr<Job> job;
  Usage usage;
  int live = 1;
  bool forked = false;      // choices 1..n-1 created (after the prompt was prefilled)
  bool first_token = false;  // time to first token observed
};

struct Scheduler::Sequence {
  std::shared_ptr<JobRun> run;
  int index = 0;
  std::unique_ptr<Session> session;
  std::optional<SamplerChain> sampler;
  std::optional<StreamDecoder> decoder;
  std::optional<StopMatcher> stop;
  std::vector<int32_t> pending;  // prompt tokens still to prefill
  size_t pending_off = 0;
  size_t chunk = 0;              // tokens of `pending` fed in the current step
  int32_t next = -1;             // sampled token to feed in the next step
  constrain::Matcher::State grammar = 0;  // where the output is in the job's grammar (if any)
  bool grammar_on = true;  // false until a trigger shows (Job::grammar_triggers)
  std::string recent;      // the output's last bytes, searched for a trigger while it is off
  bool blank_so_far = true;  // the output before `recent` is whitespace (start-only triggers)
  // The thinking split off before triggers are looked for (Job::triggers_after_thinking).
  std::optional<ReasoningParser> thinking;
  int generated = 0;
  bool done = false;
  // Preempted for KV pages (Scheduler::park): no session; `pending` holds every token its KV
  // held (and the prompt still to run), recomputed without logits when it comes back; `next`
  // (if any) is fed after them.
  bool parked = false;
  Clock::time_point last_token;
  // The tokens this step's pick brought home beyond the best (pick_for): the logit bias's and
  // the penalty window's.
  std::vector<int32_t> touched;
  // The grammar's mask that went with this step's pick (a drawn token under a grammar), and the
  // time computing it took.
  std::vector<uint64_t> allowed;
  double mask_seconds = 0;
};

}  // namespace jitllm::server
