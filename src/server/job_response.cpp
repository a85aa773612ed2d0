// Jobs from requests and responses from jobs (see job_response.h).
#include "server/job_response.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "sample/sampling_params.h"
#include "server/access_log.h"
#include "server/api_error.h"
#include "server/event_stream.h"
#include "server/http_connection.h"
#include "server/served_model.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

}  // namespace

// Resolves the options a generation request asks for into a Job the scheduler can run.
std::shared_ptr<Job> make_job(const ServedModel& model, std::vector<int32_t> prompt,
                              const GenerationOptions& o, bool chat, bool add_implicit_stops) {
  const char* prompt_param = chat ? "messages" : "prompt";
  if (model.is_encoder())
    throw ApiError(400, "invalid_request_error",
                   fmt::format("model '{}' is an encoder: it embeds (/v1/embeddings) or reranks "
                               "(/v1/rerank), it does not generate", model.id()),
                   "model");
  if (prompt.empty()) throw invalid_request(prompt_param, "the prompt is empty");
  for (int32_t id : prompt)
    if (id < 0 || id >= model.n_vocab())
      throw invalid_request(prompt_param, fmt::format("token id {} is outside the vocabulary of {}",
                                                      id, model.n_vocab()));
  const int64_t n_ctx = model.n_ctx();
  if (int64_t(prompt.size()) >= n_ctx)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("this model's maximum context length is {} tokens; the prompt "
                               "has {} tokens (at least one more is needed to answer)",
                               n_ctx, prompt.size()),
                   prompt_param, "context_length_exceeded");
  const int parallel = const_cast<ServedModel&>(model).scheduler().options().parallel;
  if (o.n > parallel)
    throw invalid_request("n", fmt::format("'n' is {} but this server decodes at most {} "
                                           "sequences together (-parallel)", o.n, parallel));
  auto job = std::make_shared<Job>();
  if (o.max_tokens >= 0) {
    if (int64_t(prompt.size()) + o.max_tokens > n_ctx)
      throw ApiError(400, "invalid_request_error",
                     fmt::format("this model's maximum context length is {} tokens; the prompt "
                                 "has {} tokens and max_tokens asks for {} more",
                                 n_ctx, prompt.size(), o.max_tokens),
                     "max_tokens", "context_length_exceeded");
    job->max_tokens = o.max_tokens;
  } else {
    job->max_tokens = int(n_ctx - int64_t(prompt.size()));
  }
  SamplingParams& sp = job->sampling;
  sp.temperature = float(o.temperature);
  sp.top_k = o.top_k;
  sp.top_p = float(o.top_p);
  sp.min_p = float(o.min_p);
  sp.typical_p = float(o.typical_p);
  sp.presence_penalty = float(o.presence_penalty);
  sp.frequency_penalty = float(o.frequency_penalty);
  sp.repeat_penalty = float(o.repeat_penalty);
  sp.penalty_last_n = o.repeat_last_n;
  sp.logit_bias = o.logit_bias;
  if (o.ignore_eos)
    for (int32_t id : model.tokenizer().vocab().eog)
      sp.logit_bias[id] = -std::numeric_limits<float>::infinity();
  // The seed is 32 bits in the sampler; 0xFFFFFFFF means "random" there, so it is folded.
  if (o.seed) {
    sp.seed = uint32_t(*o.seed ^ (*o.seed >> 32));
    if (sp.seed == SamplingParams::kRandomSeed) sp.seed = 0;
  }
  try {
    validate_sampling_params(sp, model.n_vocab());
  } catch (const Error& e) {
    throw invalid_request(o.logit_bias.empty() ? "" : "logit_bias", e.what());
  }
  job->prompt = std::move(prompt);
  job->n = o.n;
  job->stop = o.stop;
  if (add_implicit_stops)
    for (const auto& s : model.implicit_stops()) job->stop.push_back(s);
  job->logprobs = o.logprobs;
  job->top_logprobs = o.top_logprobs;
  if (o.grammar) {
    try {
      job->matcher = std::make_shared<constrain::Matcher>(*o.grammar,
                                                          model.grammar_vocabulary(o.tool_calls));
    } catch (const Error& e) {
      throw invalid_request("grammar", e.what());
    }
    job->grammar_triggers = o.grammar_triggers;
    job->triggers_after_thinking = o.triggers_after_thinking;
    job->starts_thinking = o.starts_thinking;
    if (o.tool_calls) job->rendered_control_tokens = model.rendered_control_tokens();
  }
  return job;
}

void record_usage(const Job& job, const ResponseInfo& info) {
  AccessRecord& r = current_access();
  r.id = info.id;
  r.prompt_tokens = job.usage.prompt_tokens;
  r.completion_tokens = job.usage.completion_tokens;
  if (const int64_t us = job.first_token_us; us >= 0) r.ttft_ms = double(us) / 1000.0;
}

std::vector<ChoiceText> collect_choices(Job& job, const ResponseInfo& info, int n) {
  std::vector<ChoiceText> choices(static_cast<size_t>(n));
  Connection* client = Connection::current();
  bool done = false;
  while (!done) {
    // A client that went away cancels its job, as a stream's does (the scheduler then finishes
    // it with 499 at its next step).
    if (client && !job.cancelled && client->peer_closed()) job.cancelled = true;
    for (JobEvent& ev : job.take(std::chrono::milliseconds(200), done)) {
      ChoiceText& c = choices.at(size_t(ev.index));
      c.text += ev.text;
      for (auto& t : ev.tokens) c.tokens.push_back(std::move(t));
      if (ev.finish_reason) c.finish_reason = *ev.finish_reason;
      if (ev.stop_sequence) c.stop_sequence = ev.stop_sequence;
    }
  }
  record_usage(job, info);
  if (job.error) throw *job.error;
  if (info.answer.parsed())
    for (ChoiceText& c : choices) {
      AnswerParser parser(info.answer);
      AnswerPiece a = parser.push(c.text);
      AnswerPiece rest = parser.finish();
      c.reasoning = a.reasoning + rest.reasoning;
      c.text = a.content + rest.content;
      c.tool_calls = std::move(a.calls);
      for (ToolCall& call : rest.calls) c.tool_calls.push_back(std::move(call));
      if (!c.tool_calls.empty() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
    }
  return choices;
}

json collect(Job& job, const ResponseInfo& info, int n, const std::string& prefix) {
  const std::vector<ChoiceText> choices = collect_choices(job, info, n);
  return full_response(info, choices, job.usage, prefix);
}

namespace {

// What a streaming response's provider needs between calls.
struct StreamState {
  std::shared_ptr<Job> job;
  ResponseInfo info;
  std::vector<bool> started;
  bool include_usage = false;
  std::vector<JobEvent> held;  // finishing chunks wait for the usage of the last one
  bool ended = false;
  std::vector<AnswerParser> parsers;  // [n] when the answer is parsed (info.answer)
};

// A choice's text through its answer parser: a chunk of its reasoning, of its content and of
// the calls it completed (each when there is any). `final`: the choice's output ended.
std::string answer_chunks(StreamState& st, JobEvent& ev, bool first, bool final) {
  AnswerParser& parser = st.parsers.at(size_t(ev.index));
  const size_t before = parser.n_calls();
  AnswerPiece a = parser.push(ev.text);
  if (final) {
    AnswerPiece rest = parser.finish();
    a.reasoning += rest.reasoning;
    a.content += rest.content;
    for (ToolCall& c : rest.calls) a.calls.push_back(std::move(c));
  }
  std::string out;
  if (!a.reasoning.empty()) {
    out += sse(reasoning_chunk(st.info, ev.index, a.reasoning, first));
    first = false;
  }
  if (!a.content.empty() || !ev.tokens.empty() || first) {
    JobEvent content = ev;
    content.text = std::move(a.content);
    content.finish_reason.reset();
    out += sse(stream_chunk(st.info, content, first));
  }
  if (!a.calls.empty()) out += sse(tool_calls_chunk(st.info, ev.index, a.calls, before));
  ev.text.clear();
  ev.tokens.clear();
  if (final && parser.n_calls() > 0 && ev.finish_reason == "stop") ev.finish_reason = "tool_calls";
  return out;
}

// One call of the stream's provider: the chunks of what the job produced since the last call.
bool provide_chunk(StreamState& st, httplib::DataSink& sink) {
  if (st.ended) return false;
  bool done = false;
  auto events = st.job->take(std::chrono::milliseconds(200), done);
  std::string out;
  for (JobEvent& ev : events) {
    const bool first = !st.started.at(size_t(ev.index));
    st.started[size_t(ev.index)] = true;
    if (ev.finish_reason) {
      // The choice's last text goes out now; its finishing chunk waits.
      if (!st.parsers.empty()) out += answer_chunks(st, ev, first, true);
      st.held.push_back(std::move(ev));
      continue;
    }
    if (!st.parsers.empty()) {
      out += answer_chunks(st, ev, first, false);
      continue;
    }
    if (ev.text.empty() && ev.tokens.empty() && !first) continue;
    out += sse(stream_chunk(st.info, ev, first));
  }
  if (done) {
    record_usage(*st.job, st.info);
    if (st.job->error) {
      out += sse(st.job->error->body());  // the stream's error event (status is already 200)
    } else {
      for (size_t i = 0; i < st.held.size(); ++i) {
        json chunk = stream_chunk(st.info, st.held[i], false);
        if (i + 1 == st.held.size() && !st.include_usage) chunk["usage"] = usage_json(st.job->usage);
        out += sse(chunk);
      }
      if (st.include_usage) out += sse(usage_chunk(st.info, st.job->usage));
    }
    out += "data: [DONE]\n\n";
  }
  return write_events(st, sink, out, done);
}

}  // namespace

void start_stream(httplib::Response& res, std::shared_ptr<Job> job, ResponseInfo info,
                  bool include_usage, std::atomic<int>& in_flight) {
  auto st = std::make_shared<StreamState>();
  st->job = std::move(job);
  st->info = std::move(info);
  st->started.assign(size_t(st->job->n), false);
  st->include_usage = include_usage;
  if (st->info.answer.parsed())
    for (int i = 0; i < st->job->n; ++i) st->parsers.emplace_back(st->info.answer);
  start_event_stream<StreamState>(res, st, provide_chunk, in_flight);
}

}  // namespace jitllm::server
