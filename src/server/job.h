// Job: one generation request on its way through the scheduler, and the channel its HTTP thread
// reads the results from. The HTTP thread fills the input part and enqueues the job; from then on
// the scheduler thread only pushes events and the HTTP thread only pops them (and may set
// `cancelled` when its client goes away). Everything shared is behind the job's mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "constrain/matcher.h"
#include "sample/sampling_params.h"
#include "server/grammar_trigger.h"
#include "server/api_error.h"

namespace jitllm::server {

using Clock = std::chrono::steady_clock;

struct TokenLogprobInfo {
  int32_t id = 0;
  std::string text;  // the token's piece (bytes, possibly part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // most likely first
};

// A piece of one choice's output. `text` may be empty (e.g. held back by a stop string).
struct JobEvent {
  int index = 0;                       // choice index
  std::string text;
  std::vector<TokenLogprobInfo> tokens;  // when logprobs were asked for
  std::optional<std::string> finish_reason;  // "stop" | "length" once the choice is done
  // The stop string that ended the choice (finish_reason "stop"), the request's or an implicit
  // one; none when the model's end token or a finished grammar ended it.
  std::optional<std::string> stop_sequence;
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

struct Job {
  // Input (set before enqueue, read-only afterwards).
  std::vector<int32_t> prompt;  // token ids, BOS included when the vocabulary adds one
  int max_tokens = -1;          // resolved: >= 0
  int n = 1;
  SamplingParams sampling;      // the seed of choice i is sampling.seed + i
  std::vector<std::string> stop;
  int top_logprobs = 0;
  bool logprobs = false;
  // The grammar the output must match (null: free text), shared by the job's choices; each
  // sequence keeps its own state in it.
  std::shared_ptr<constrain::Matcher> matcher;
  // Empty: the matcher holds from the first token; else from where one of these texts first
  // shows in the output (GenerationOptions::grammar_triggers).
  std::vector<GrammarTrigger> grammar_triggers;
  // Triggers count only in the answer after a leading <think>...</think> (a thinking model's
  // auto calls: a call's start written while thinking is part of the thought); the output
  // starts inside the thinking when the prompt opened it.
  bool triggers_after_thinking = false;
  bool starts_thinking = false;
  // Control tokens the decoder writes as text (tool-call markers) when the grammar holds calls.
  std::vector<int32_t> rendered_control_tokens;
  Clock::time_point arrived = Clock::now();
  // Microseconds from arrival to the first token (-1 until then); set by the scheduler thread.
  std::atomic<int64_t> first_token_us{-1};

  // Set by the HTTP thread when its client disconnected; the scheduler frees the sessions at
  // the next step.
  std::atomic<bool> cancelled{false};

  // Output.
  void push(JobEvent event) {
    {
      std::lock_guard lock(mutex);
      events.push_back(std::move(event));
    }
    cv.notify_all();
  }
  void finish(Usage u, std::optional<ApiError> err = std::nullopt) {
    {
      std::lock_guard lock(mutex);
      usage = u;
      error = std::move(err);
      finished = true;
    }
    cv.notify_all();
  }
  // Waits up to `timeout` for events or the end; returns the events taken (possibly none).
  std::deque<JobEvent> take(std::chrono::milliseconds timeout, bool& done) {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, timeout, [&] { return !events.empty() || finished; });
    std::deque<JobEvent> out;
    out.swap(events);
    done = finished;  // every event is pushed before finish(), so none can follow
    return out;
  }

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<JobEvent> events;
  bool finished = false;
  Usage usage;
  std::optional<ApiError> error;
};

}  // namespace jitllm::server
