// Chat requests into Jobs (see chat_job.h).
#include "server/chat_job.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/job_response.h"
#include "server/output_constraint.h"
#include "server/reasoning_parser.h"
#include "server/served_model.h"
#include "server/tool_syntax.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

namespace {

using ojson = nlohmann::ordered_json;

// The template variables a request sets: chat_template_kwargs, and reasoning_effort where the
// template reads what it asks for (otherwise it would be accepted and ignored: 400).
ojson template_globals(const ServedModel& m, const ChatRequest& r) {
  ojson globals = r.template_kwargs;
  if (r.thinking_disabled && m.thinks()) {
    if (!m.template_uses("enable_thinking"))
      throw invalid_request("thinking", "thinking {\"type\": \"disabled\"} is not honoured: this "
                                        "model's chat template cannot switch thinking off (it "
                                        "reads no enable_thinking)");
    globals["enable_thinking"] = false;
  }
  if (!r.reasoning_effort) return globals;
  const std::string& effort = *r.reasoning_effort;
  if (effort == "none") {
    // llama-server's reading: no thinking, for templates that can switch it off.
    if (!m.template_uses("enable_thinking"))
      throw invalid_request("reasoning_effort", "'reasoning_effort' none is not honoured: this "
                                                "model's chat template cannot switch thinking off "
                                                "(it reads no enable_thinking)");
    globals["enable_thinking"] = false;
  } else if (effort != "minimal" && m.template_uses("reasoning_effort")) {
    globals["reasoning_effort"] = effort;  // gpt-oss: "Reasoning: <effort>" in the system message
  } else {
    throw invalid_request("reasoning_effort",
                          fmt::format("'reasoning_effort' {} is not honoured: this model's chat "
                                      "template {}", effort,
                                      m.template_uses("reasoning_effort")
                                          ? "knows low, medium and high"
                                          : "reads no reasoning_effort"));
  }
  return globals;
}

// The text of the prompt's last tokens (where a generation prompt opens or closes <think>).
std::string prompt_tail(const ServedModel& m, const std::vector<int32_t>& prompt) {
  std::string tail;
  for (size_t i = prompt.size() - std::min<size_t>(prompt.size(), 8); i < prompt.size(); ++i)
    tail += m.tokenizer().piece(TokenId(prompt[i]));
  return tail;
}

}  // namespace

std::vector<int32_t> chat_prompt(const ServedModel& m, const ChatRequest& r,
                                 const std::string& continuation) {
  ojson messages = ojson::array();
  for (const ChatMessage& msg : r.messages) messages.push_back(ojson::parse(msg.raw.dump()));
  ojson template_tools = r.tools;
  adapt_conversation(m.tool_syntax(), r.tool_request, messages, template_tools);
  return m.tokenize_chat(messages, template_tools, r.parse_special_in_content, continuation,
                         template_globals(m, r));
}

std::shared_ptr<Job> make_chat_job(const ServedModel& m, const ChatRequest& r, ResponseInfo& info,
                                   const std::string& continuation) {
  GenerationOptions options = r.options;
  const bool harmony = m.tool_syntax() == ToolSyntax::Harmony;
  // gpt-oss's answer starts with a channel header the template does not write; a text placed
  // after "<|start|>assistant" would stand where the header belongs.
  if (harmony && !continuation.empty())
    throw invalid_request("messages", "a final assistant message (to be continued) is not "
                                      "supported for this model's harmony channels");
  std::vector<int32_t> prompt = chat_prompt(m, r, continuation);
  const std::string tail = prompt_tail(m, prompt);
  const bool thinking_open = !harmony && m.thinks() && prompt_opens_thinking(tail);
  const ReasoningFormat format = r.reasoning_format.value_or(m.reasoning_format());
  AnswerFormat& answer = info.answer;
  answer.harmony = harmony;
  answer.reasoning = format == ReasoningFormat::Deepseek ||
                     (format == ReasoningFormat::Auto && (m.thinks() || harmony));
  answer.starts_thinking = answer.reasoning && thinking_open;

  const ToolRequest& tools = r.tool_request;
  if (tools.calls_expected()) {
    // The calls are held to the tools' schemas: from the first token (required, named; a
    // thinking model may think first) or from where the model starts one (auto).
    if (options.grammar)
      throw invalid_request("tools",
                            "a grammar or response_format together with tools that "
                            "may be called is not supported (send tool_choice \"none\")");
    const ThinkingLead lead =
        !m.thinks() || harmony || prompt_closes_thinking(tail) ? ThinkingLead::None
        : thinking_open                                         ? ThinkingLead::Open
                                                                : ThinkingLead::Optional;
    // The calls are read out of what follows the thinking only; with the thinking left in the
    // content, a call drafted inside it (which the grammar never held) would be taken.
    if (lead != ThinkingLead::None && !answer.reasoning)
      throw invalid_request("reasoning_format",
                            "tools that may be called on a thinking model need its thinking "
                            "separated: reasoning_format none (or a continued assistant "
                            "message) with tool_choice other than \"none\" is not supported");
    const ToolGrammar g = tool_call_grammar(m.tool_syntax(), tools, lead);
    options.grammar = grammar_or_400(g.gbnf, "tools");
    options.grammar_triggers = g.triggers;
    options.triggers_after_thinking = m.thinks() && !harmony;
    options.starts_thinking = thinking_open;
    options.tool_calls = true;
    answer.tool_syntax = m.tool_syntax();
    for (const ToolDefinition& t : tools.tools)
      if (tools.choice != ToolChoice::Named || t.name == tools.named)
        answer.tool_names.push_back(t.name);
    if (m.tool_syntax() == ToolSyntax::GlmXml) answer.string_arguments = string_arguments(tools);
  }
  // A JSON shape (response_format, json_schema) held from the first token is the answer: it is
  // not read as the rest of a thinking the prompt opened; gpt-oss writes it in its final
  // channel, after an analysis if it likes.
  if (options.grammar_is_answer) answer.starts_thinking = false;
  if (options.grammar_is_answer && harmony)
    options.grammar = grammar_or_400(harmony_answer_gbnf(options.answer_gbnf), "response_format",
                                     "harmony-answer");
  return make_job(m, std::move(prompt), options, true, true);
}

}  // namespace jitllm::server
