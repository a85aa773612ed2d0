// The response object and its events (see responses_format.h).
#include "server/responses_format.h"

#include <fmt/format.h>

#include <mutex>
#include <random>

namespace jitllm::server {

namespace {

using ojson = nlohmann::ordered_json;

// Bytes at the end of `s` that start a UTF-8 character whose continuation bytes are missing.
size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// Log probabilities not yet sent, moved into the message's list (for a delta event).
ojson take_pending(ojson& pending, ojson& sent) {
  ojson out = ojson::array();
  out.swap(pending);
  for (const ojson& lp : out) sent.push_back(lp);
  return out;
}

}  // namespace

std::string new_responses_id(const char* prefix) {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mutex);
  const uint64_t a = rng(), b = rng();
  return fmt::format("{}{:016x}{:08x}", prefix, a, uint32_t(b));
}

ojson responses_usage(const Usage& u, int64_t reasoning_tokens) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

std::string sse_event(const std::string& type, const ojson& data) {
  return "event: " + type + "\ndata: " +
         data.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n\n";
}

ResponseWriter::ResponseWriter(std::string id, int64_t created_at, std::string model, ojson echo)
    : id_(std::move(id)), model_(std::move(model)), created_at_(created_at), echo_(std::move(echo)) {}

std::string ResponseWriter::event(const char* type, ojson fields) {
  ojson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  return sse_event(type, e);
}

ojson ResponseWriter::response() const {
  ojson r = {{"id", id_},
             {"object", "response"},
             {"created_at", created_at_},
             {"status", status_},
             {"error", error_},
             {"incomplete_details", incomplete_details_},
             {"model", model_},
             {"output", output_}};
  if (open_message_ >= 0) {
    ojson& part = r["output"][size_t(open_message_)]["content"][0];
    part["logprobs"] = message_logprobs_;
    part["text"] = message_text_;
  }
  if (open_reasoning_ >= 0) r["output"][size_t(open_reasoning_)]["content"][0]["text"] = reasoning_text_;
  for (const auto& [key, value] : echo_.items()) r[key] = value;
  r["usage"] = usage_;
  return r;
}

std::string ResponseWriter::begin() {
  std::string out = event("response.created", {{"response", response()}});
  return out + event("response.in_progress", {{"response", response()}});
}

std::string ResponseWriter::reasoning(std::string_view delta) {
  std::string s = reasoning_tail_;
  s += delta;
  const size_t keep = incomplete_utf8_tail(s);
  reasoning_tail_ = s.substr(s.size() - keep);
  s.resize(s.size() - keep);
  if (s.empty()) return "";
  std::string out;
  if (open_reasoning_ < 0) {
    out = close_message("completed");
    open_reasoning_ = int(output_.size());
    const std::string item_id = new_responses_id("rs_");
    output_.push_back({{"id", item_id},
                       {"type", "reasoning"},
                       {"status", "in_progress"},
                       {"summary", ojson::array()},
                       {"content", ojson::array()}});
    out += event("response.output_item.added",
                 {{"output_index", open_reasoning_}, {"item", output_.back()}});
    const ojson part = {{"type", "reasoning_text"}, {"text", ""}};
    output_.back()["content"].push_back(part);
    out += event("response.content_part.added", {{"item_id", item_id},
                                                 {"output_index", open_reasoning_},
                                                 {"content_index", 0},
                                                 {"part", part}});
  }
  reasoning_text_ += s;
  all_reasoning_ += s;
  const std::string& item_id = output_[size_t(open_reasoning_)]["id"].get_ref<const std::string&>();
  return out + event("response.reasoning_text.delta", {{"item_id", item_id},
                                                        {"output_index", open_reasoning_},
                                                        {"content_index", 0},
                                                        {"delta", s}});
}

std::string ResponseWriter::close_reasoning(const char* status) {
  if (open_reasoning_ < 0) return "";
  const size_t at = size_t(open_reasoning_);
  const std::string item_id = output_[at]["id"];
  std::string out;
  if (!reasoning_tail_.empty()) {
    // The output ended inside a character: its bytes go out as they are (replaced in JSON).
    reasoning_text_ += reasoning_tail_;
    all_reasoning_ += reasoning_tail_;
    out += event("response.reasoning_text.delta", {{"item_id", item_id},
                                                   {"output_index", open_reasoning_},
                                                   {"content_index", 0},
                                                   {"delta", reasoning_tail_}});
    reasoning_tail_.clear();
  }
  ojson& item = output_[at];
  item["status"] = status;
  item["content"][0]["text"] = reasoning_text_;
  out += event("response.reasoning_text.done", {{"item_id", item_id},
                                                {"output_index", open_reasoning_},
                                                {"content_index", 0},
                                                {"text", reasoning_text_}});
  out += event("response.content_part.done", {{"item_id", item_id},
                                              {"output_index", open_reasoning_},
                                              {"content_index", 0},
                                              {"part", item["content"][0]}});
  out += event("response.output_item.done", {{"output_index", open_reasoning_}, {"item", item}});
  open_reasoning_ = -1;
  reasoning_text_.clear();
  return out;
}

std::string ResponseWriter::open_message() {
  if (open_message_ >= 0) return "";
  std::string closed = close_reasoning("completed");
  open_message_ = int(output_.size());
  const std::string item_id = new_responses_id("msg_");
  output_.push_back({{"id", item_id},
                     {"type", "message"},
                     {"status", "in_progress"},
                     {"role", "assistant"},
                     {"content", ojson::array()}});
  std::string out = closed + event("response.output_item.added",
                                   {{"output_index", open_message_}, {"item", output_.back()}});
  const ojson part = {{"type", "output_text"},
                      {"annotations", ojson::array()},
                      {"logprobs", ojson::array()},
                      {"text", ""}};
  output_.back()["content"].push_back(part);
  return out + event("response.content_part.added", {{"item_id", item_id},
                                                      {"output_index", open_message_},
                                                      {"content_index", 0},
                                                      {"part", part}});
}

std::string ResponseWriter::text(std::string_view delta, const ojson& logprobs) {
  for (const ojson& lp : logprobs) pending_logprobs_.push_back(lp);
  std::string s = utf8_tail_;
  s += delta;
  const size_t keep = incomplete_utf8_tail(s);
  utf8_tail_ = s.substr(s.size() - keep);
  s.resize(s.size() - keep);
  if (s.empty()) return "";
  std::string out = open_message();
  message_text_ += s;
  const std::string& item_id = output_[size_t(open_message_)]["id"].get_ref<const std::string&>();
  return out + event("response.output_text.delta", {{"item_id", item_id},
                                                     {"output_index", open_message_},
                                                     {"content_index", 0},
                                                     {"delta", s},
                                                     {"logprobs", take_pending(pending_logprobs_,
                                                                               message_logprobs_)}});
}

std::string ResponseWriter::close_message(const char* status) {
  if (open_message_ < 0) return "";
  std::string out;
  const size_t at = size_t(open_message_);
  const std::string item_id = output_[at]["id"];
  if (!utf8_tail_.empty()) {
    // The output ended inside a character: its bytes go out as they are (replaced in JSON).
    message_text_ += utf8_tail_;
    out += event("response.output_text.delta",
                 {{"item_id", item_id},
                  {"output_index", open_message_},
                  {"content_index", 0},
                  {"delta", utf8_tail_},
                  {"logprobs", take_pending(pending_logprobs_, message_logprobs_)}});
    utf8_tail_.clear();
  }
  take_pending(pending_logprobs_, message_logprobs_);  // tokens whose text was held back
  ojson& item = output_[at];
  item["status"] = status;
  item["content"][0]["logprobs"] = message_logprobs_;
  item["content"][0]["text"] = message_text_;
  out += event("response.output_text.done", {{"item_id", item_id},
                                             {"output_index", open_message_},
                                             {"content_index", 0},
                                             {"text", message_text_},
                                             {"logprobs", message_logprobs_}});
  out += event("response.content_part.done", {{"item_id", item_id},
                                              {"output_index", open_message_},
                                              {"content_index", 0},
                                              {"part", item["content"][0]}});
  out += event("response.output_item.done", {{"output_index", open_message_}, {"item", item}});
  open_message_ = -1;
  message_text_.clear();
  message_logprobs_ = ojson::array();
  return out;
}

std::string ResponseWriter::calls(const std::vector<ToolCall>& calls) {
  std::string out = calls.empty() ? "" : close_reasoning("completed") + close_message("completed");
  for (const ToolCall& c : calls) {
    const size_t at = output_.size();
    const std::string item_id = new_responses_id("fc_");
    output_.push_back({{"id", item_id},
                       {"type", "function_call"},
                       {"status", "in_progress"},
                       {"arguments", ""},
                       {"call_id", c.id},
                       {"name", c.name}});
    out += event("response.output_item.added", {{"output_index", at}, {"item", output_[at]}});
    // A call is handed out once its text is complete: its arguments are one delta.
    out += event("response.function_call_arguments.delta",
                 {{"item_id", item_id}, {"output_index", at}, {"delta", c.arguments}});
    out += event("response.function_call_arguments.done", {{"item_id", item_id},
                                                           {"output_index", at},
                                                           {"name", c.name},
                                                           {"arguments", c.arguments}});
    output_[at]["arguments"] = c.arguments;
    output_[at]["status"] = "completed";
    out += event("response.output_item.done", {{"output_index", at}, {"item", output_[at]}});
  }
  return out;
}

std::string ResponseWriter::finish(const std::string& finish_reason, const Usage& usage,
                                   int64_t reasoning_tokens) {
  const bool cut = finish_reason == "length";
  // A response says something: an empty answer is one message with empty text (after the
  // reasoning, when the output ended inside it).
  std::string out = output_.empty() || (open_reasoning_ >= 0 && !cut) ? open_message() : "";
  out += close_reasoning(cut ? "incomplete" : "completed");
  out += close_message(cut ? "incomplete" : "completed");
  status_ = cut ? "incomplete" : "completed";
  if (cut) incomplete_details_ = {{"reason", "max_output_tokens"}};
  usage_ = responses_usage(usage, reasoning_tokens);
  return out + event(cut ? "response.incomplete" : "response.completed", {{"response", response()}});
}

std::string ResponseWriter::fail(const ApiError& error) {
  std::string out = close_reasoning("incomplete") + close_message("incomplete");
  const ojson e = ojson::parse(error.body()["error"].dump());
  const ojson code = e["code"].is_null() ? e["type"] : e["code"];
  status_ = "failed";
  error_ = {{"code", code}, {"message", e["message"]}};
  out += event("error", {{"code", code}, {"message", e["message"]}, {"param", e["param"]}});
  return out + event("response.failed", {{"response", response()}});
}

}  // namespace jitllm::server
