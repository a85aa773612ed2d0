// The Anthropic Messages routes of HttpServer: POST /v1/messages (a message, or its SSE events)
// and POST /v1/messages/count_tokens. Requests go through anthropic_format.h into the chat
// path's ChatRequest and Job (chat_job.h); only the wire format is Anthropic's. Errors on these
// paths are written in Anthropic's shape by HttpServer::answer.
#include <httplib.h>

#include <algorithm>
#include <optional>
#include <random>

#include "core/log.h"
#include "server/anthropic_format.h"
#include "server/chat_job.h"
#include "server/http_reply.h"
#include "server/http_server.h"
#include "server/event_stream.h"
#include "server/job_response.h"
#include "server/served_model.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

// "msg_" + 24 letters and digits, as Anthropic's ids look.
std::string message_id() {
  static constexpr char kAlnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "msg_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

AnthropicRequest parse_body(const std::string& text, bool count_tokens) {
  const json body = parse_json_body(text);
  // Tool schemas keep the order their properties were written in (the grammar follows it).
  std::optional<nlohmann::ordered_json> ordered;
  if (body.is_object() && body.contains("tools")) ordered = nlohmann::ordered_json::parse(text);
  return parse_anthropic_request(body, ordered ? &*ordered : nullptr, count_tokens);
}

// The chat path names tool schemas as OpenAI's requests hold them; a client of this route wrote
// tools[i].input_schema.
template <typename F>
auto with_anthropic_names(F&& f) {
  try {
    return f();
  } catch (const ApiError& e) {
    static const std::string openai = ".function.parameters", ours = ".input_schema";
    auto rename = [](std::string s) {
      for (size_t at; (at = s.find(openai)) != std::string::npos;)
        s.replace(at, openai.size(), ours);
      return s;
    };
    const nlohmann::json b = e.body()["error"];
    const std::string message = e.what();
    if (message.find(openai) == std::string::npos) throw;
    throw ApiError(e.status(), b["type"].get<std::string>(), rename(message),
                   b["param"].is_string() ? rename(b["param"].get<std::string>()) : "",
                   b["code"].is_string() ? b["code"].get<std::string>() : "");
  }
}

struct MessageStreamState {
  std::shared_ptr<Job> job;
  ResponseInfo info;
  AnthropicStream events;
  bool started = false;
  bool ended = false;
};

// One call of the stream's provider: message_start at once, then what the job produced.
bool provide_events(MessageStreamState& st, httplib::DataSink& sink) {
  if (st.ended) return false;
  std::string out;
  bool done = false;
  if (!st.started) {
    st.started = true;
    out = st.events.start();
  } else {
    for (const JobEvent& ev : st.job->take(std::chrono::milliseconds(200), done))
      out += st.events.push(ev);
  }
  if (done) {
    record_usage(*st.job, st.info);
    out += st.job->error ? st.events.fail(*st.job->error) : st.events.finish(st.job->usage);
  }
  return write_events(st, sink, out, done);
}

void start_message_stream(httplib::Response& res, std::shared_ptr<Job> job, ResponseInfo info,
                          AnthropicEnding ending, std::atomic<int>& in_flight) {
  const int64_t input_tokens = int64_t(job->prompt.size());
  auto st = std::make_shared<MessageStreamState>(MessageStreamState{
      std::move(job), info, AnthropicStream(info, std::move(ending), input_tokens)});
  start_event_stream<MessageStreamState>(res, st, provide_events, in_flight);
}

}  // namespace

void HttpServer::install_anthropic_routes() {
  post_route("/v1/messages", [this](const httplib::Request&, const std::string& text,
                                    httplib::Response& res) {
    AnthropicRequest a = parse_body(text, false);
    ServedModel& m = model_for(a.chat.model);
    ResponseInfo info;
    info.id = message_id();
    info.model = m.id();
    info.chat = true;
    // max_tokens is required here, and clients send a generous one whatever the model: the
    // output may run to the end of the context, and then says so (Anthropic's
    // model_context_window_exceeded) instead of a 400.
    const int requested = a.chat.options.max_tokens;
    a.chat.options.max_tokens = -1;
    auto job = with_anthropic_names([&] { return make_chat_job(m, a.chat, info, a.continuation); });
    const bool context_bound = job->max_tokens < requested;
    job->max_tokens = std::min(job->max_tokens, requested);
    m.scheduler().submit(job);
    const AnthropicEnding ending{a.chat.options.stop, context_bound};
    if (a.chat.options.stream)
      return start_message_stream(res, job, info, ending, requests_in_flight_);
    const std::vector<ChoiceText> choices = collect_choices(*job, info, 1);
    res.set_content(anthropic_message(info, choices.at(0), job->usage, ending)
                        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
  });

  // {"input_tokens": N}: the prompt /v1/messages would run for the same body.
  post_route("/v1/messages/count_tokens", [this](const httplib::Request&, const std::string& text,
                                                 httplib::Response& res) {
    const AnthropicRequest a = parse_body(text, true);
    ServedModel& m = model_for(a.chat.model);
    const size_t n =
        with_anthropic_names([&] { return chat_prompt(m, a.chat, a.continuation).size(); });
    send_json(res, 200, {{"input_tokens", n}});
  });
}

}  // namespace jitllm::server
