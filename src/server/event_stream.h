// The SSE stream every streaming route answers with (chat and completions, /v1/responses,
// /v1/messages): httplib pulls events from `provide(state, sink)` until it returns false. The
// job is cancelled when the provider throws (httplib runs it outside the handler's try: nothing
// may escape) and when the stream ends before the state says it `ended` (the client left).
// `in_flight` counts open streams (the drain on shutdown waits for them).
#pragma once

#include <httplib.h>

#include <atomic>
#include <exception>
#include <memory>
#include <string>

#include "core/log.h"

namespace jitllm::server {

// State: has `job` (a shared_ptr<Job>), `info.id` and `ended`.
template <class State>
void start_event_stream(httplib::Response& res, std::shared_ptr<State> st,
                        bool (*provide)(State&, httplib::DataSink&), std::atomic<int>& in_flight) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  ++in_flight;
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, provide](size_t, httplib::DataSink& sink) {
        try {
          return provide(*st, sink);
        } catch (const std::exception& e) {
          log(LogLevel::Error, "stream {} failed: {}", st->info.id, e.what());
          st->job->cancelled = true;
          return false;
        }
      },
      [st, &in_flight](bool success) {
        if (!success || !st->ended) st->job->cancelled = true;
        --in_flight;
      });
}

// The end of one pull of a provider: writes `out` (the events this pull made) and, when `done`,
// ends the stream. False stops it: the client went away (a failed write, or a socket no longer
// writable while there was nothing to send), and its job is cancelled to free the session.
template <class State>
bool write_events(State& st, httplib::DataSink& sink, const std::string& out, bool done) {
  if (!out.empty() && !sink.write(out.data(), out.size())) {
    st.job->cancelled = true;
    return false;
  }
  if (!done && out.empty() && sink.is_writable && !sink.is_writable()) {
    st.job->cancelled = true;
    return false;
  }
  if (done) {
    st.ended = true;
    sink.done();
  }
  return true;
}

}  // namespace jitllm::server
