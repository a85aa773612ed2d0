// HttpServer's /v1/responses (OpenAI's Responses API) on the chat path: the request read into a
// chat request (responses_request.h), one chat Job through the scheduler, its output written as
// a response object or as the response's events (responses_format.h). Nothing is stored, so
// GET / DELETE /v1/responses/{id}, its input_items and cancel answer 404 as OpenAI does for an
// id it does not know.
#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <optional>

#include "core/log.h"
#include "server/api_error.h"
#include "server/chat_job.h"
#include "server/http_reply.h"
#include "server/http_server.h"
#include "server/event_stream.h"
#include "server/job_response.h"
#include "server/responses_format.h"
#include "server/responses_request.h"
#include "server/served_model.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_ordered(httplib::Response& res, const ojson& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, ojson::error_handler_t::replace), "application/json");
}

// How many tokens the reasoning took (its text tokenized again: the split between reasoning
// and answer is made on text, not on tokens).
int64_t reasoning_tokens(const ServedModel& m, const ResponseWriter& writer) {
  const std::string& text = writer.reasoning_text();
  return text.empty() ? 0 : int64_t(m.tokenize_text(text, false).size());
}

// The whole response: the chat path's collected answer (reasoning, content, parsed calls)
// written out.
ojson whole_response(const ServedModel& m, Job& job, const ResponseInfo& info, ResponseWriter& writer) {
  const json chat = collect(job, info, 1, "");
  const json& choice = chat.at("choices").at(0);
  const json& message = choice.at("message");
  if (auto r = message.find("reasoning_content"); r != message.end())
    writer.reasoning(r->get<std::string>());
  ojson logprobs = ojson::array();
  if (const json& lp = choice.at("logprobs"); lp.is_object())
    logprobs = ojson::parse(lp.at("content").dump());
  if (message.at("content").is_string()) writer.text(message["content"].get<std::string>(), logprobs);
  std::vector<ToolCall> calls;
  if (auto it = message.find("tool_calls"); it != message.end())
    for (const json& c : *it)
      calls.push_back({c.at("id").get<std::string>(), c.at("function").at("name").get<std::string>(),
                       c.at("function").at("arguments").get<std::string>()});
  writer.calls(calls);
  writer.finish(choice.at("finish_reason").get<std::string>(), job.usage,
                reasoning_tokens(m, writer));
  return writer.response();
}

// What a streamed response's provider keeps between calls.
struct ResponsesStream {
  const ServedModel* model;
  std::shared_ptr<Job> job;
  ResponseInfo info;
  ResponseWriter writer;
  std::optional<AnswerParser> parser;  // when the text is parsed (calls, harmony)
  std::string finish_reason = "stop";
  bool begun = false, ended = false;
};

// One call of the provider: the events of what the job produced since the last call.
bool provide_events(ResponsesStream& st, httplib::DataSink& sink) {
  if (st.ended) return false;
  std::string out;
  bool done = false;
  if (!st.begun) {
    // response.created goes out at once, before the first token.
    out = st.writer.begin();
    st.begun = true;
  } else {
    for (JobEvent& ev : st.job->take(std::chrono::milliseconds(200), done)) {
      std::vector<ToolCall> calls;
      std::string text = std::move(ev.text);
      if (st.parser) {
        AnswerPiece a = st.parser->push(text);
        if (ev.finish_reason) {
          AnswerPiece rest = st.parser->finish();
          a.reasoning += rest.reasoning;
          a.content += rest.content;
          for (ToolCall& c : rest.calls) a.calls.push_back(std::move(c));
        }
        out += st.writer.reasoning(a.reasoning);
        text = std::move(a.content);
        calls = std::move(a.calls);
      }
      ojson logprobs = ojson::array();
      if (st.info.logprobs && !ev.tokens.empty())
        logprobs = ojson::parse(logprobs_json(true, ev.tokens).at("content").dump());
      out += st.writer.text(text, logprobs);
      out += st.writer.calls(calls);
      if (ev.finish_reason) st.finish_reason = *ev.finish_reason;
    }
    if (done) {
      record_usage(*st.job, st.info);
      out += st.job->error ? st.writer.fail(*st.job->error)
                           : st.writer.finish(st.finish_reason, st.job->usage,
                                              reasoning_tokens(*st.model, st.writer));
    }
  }
  return write_events(st, sink, out, done);
}

void start_responses_stream(httplib::Response& res, const ServedModel& model, std::shared_ptr<Job> job,
                            ResponseInfo info, ResponseWriter writer, std::atomic<int>& in_flight) {
  auto st = std::make_shared<ResponsesStream>(ResponsesStream{&model, std::move(job), std::move(info),
                                                              std::move(writer), std::nullopt});
  if (st->info.answer.parsed()) st->parser.emplace(st->info.answer);
  start_event_stream<ResponsesStream>(res, st, provide_events, in_flight);
}

bool context_exceeded(const ApiError& e) {
  return e.body()["error"]["code"] == "context_length_exceeded";
}

// The request's Job; with truncation "auto", a conversation too long for the context (prompt
// and max_output_tokens) loses as few of its oldest turns as make it fit, found by bisection
// (fewer turns never make a longer prompt), so a long history costs O(log turns) renderings.
std::shared_ptr<Job> make_responses_job(ServedModel& m, const ResponsesRequest& r, ResponseInfo& info) {
  const ResponseInfo base = info;
  // The Job of `q`, or null (its refusal in `refused`) when it does not fit and may be cut.
  auto attempt = [&](const ResponsesRequest& q, std::optional<ApiError>& refused) {
    info = base;  // make_chat_job records the tools' parsing in it
    try {
      return make_chat_job(m, q.chat, info);
    } catch (const ApiError& e) {
      if (!r.truncate || !context_exceeded(e)) throw responses_error(e, q.message_origin);
      refused = responses_error(e, q.message_origin);
      return std::shared_ptr<Job>();
    }
  };
  std::optional<ApiError> refused;
  if (auto job = attempt(r, refused)) return job;
  // Candidates: the conversation from starts[j] on; the last (its final turn alone) must fit.
  const std::vector<size_t> starts = truncation_starts(r.chat.messages);
  if (starts.empty()) throw *refused;
  std::shared_ptr<Job> best = attempt(truncated(r, starts.back()), refused);
  if (!best) throw *refused;
  size_t lo = 0, hi = starts.size() - 1;  // from starts[hi] on fits; the answer is in [lo, hi]
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (auto job = attempt(truncated(r, starts[mid]), refused)) {
      best = std::move(job);
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return best;  // (what make_chat_job put in `info` depends on the tools only, not the turns)
}

}  // namespace

void HttpServer::install_responses_routes() {
  post_route("/v1/responses", [this](const httplib::Request&, const std::string& text,
                                     httplib::Response& res) {
    parse_json_body(text);  // nesting depth and syntax, refused with the byte offset
    const ResponsesRequest r = parse_responses_request(ojson::parse(text));
    ServedModel& m = model_for(r.chat.model);
    ResponseInfo info;
    info.id = new_responses_id("resp_");
    info.created = unix_now();
    info.model = m.id();
    info.chat = true;
    info.logprobs = r.chat.options.logprobs;
    std::shared_ptr<Job> job = make_responses_job(m, r, info);
    ResponseWriter writer(info.id, info.created, m.id(), r.echo);
    m.scheduler().submit(job);
    if (r.stream)
      return start_responses_stream(res, m, std::move(job), std::move(info), std::move(writer),
                                    requests_in_flight_);
    send_ordered(res, whole_response(m, *job, info, writer));
  });

  // Responses are not kept: every id is unknown here.
  auto not_stored = [](const httplib::Request& req) {
    return ApiError(404, "invalid_request_error",
                    fmt::format("Response with id '{}' not found: this server does not store "
                                "responses (each is answered once, as with store: false)",
                                req.matches[1].str()));
  };
  auto answer_not_stored = [this, not_stored](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&] { throw not_stored(req); });
  };
  GuardedHttpServer& s = *http_;
  s.Get(R"(/v1/responses/([^/]+))", answer_not_stored);
  s.Delete(R"(/v1/responses/([^/]+))", answer_not_stored);
  s.Get(R"(/v1/responses/([^/]+)/input_items)", answer_not_stored);
  post_route(R"(/v1/responses/([^/]+)/cancel)",
             [not_stored](const httplib::Request& req, const std::string&, httplib::Response&) {
               throw not_stored(req);
             });
}

}  // namespace jitllm::server
