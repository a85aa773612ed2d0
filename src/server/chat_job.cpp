// Chat requests into Jobs (see chat_job.h).
#include "server/chat_job.h"

#include "server/api_error.h"
#include "server/job_response.h"
#include "server/output_constraint.h"
#include "server/served_model.h"
#include "server/tool_syntax.h"

namespace jitllm::server {

std::vector<int32_t> chat_prompt(const ServedModel& m, const ChatRequest& r,
                                 const std::string& continuation) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const ChatMessage& msg : r.messages)
    messages.push_back(nlohmann::ordered_json::parse(msg.raw.dump()));
  nlohmann::ordered_json template_tools = r.tools;
  adapt_conversation(m.tool_syntax(), r.tool_request, messages, template_tools);
  return m.tokenize_chat(messages, template_tools, r.parse_special_in_content, continuation);
}

std::shared_ptr<Job> make_chat_job(const ServedModel& m, const ChatRequest& r, ResponseInfo& info,
                                   const std::string& continuation) {
  GenerationOptions options = r.options;
  const ToolRequest& tools = r.tool_request;
  if (tools.calls_expected()) {
    // The calls are held to the tools' schemas: from the first token (required, named) or
    // from where the model starts one (auto).
    if (options.grammar)
      throw invalid_request("tools",
                            "a grammar or response_format together with tools that "
                            "may be called is not supported (send tool_choice \"none\")");
    const ToolGrammar g = tool_call_grammar(m.tool_syntax(), tools);
    options.grammar = grammar_or_400(g.gbnf, "tools");
    options.grammar_triggers = g.triggers;
    options.tool_calls = true;
    info.tool_syntax = m.tool_syntax();
    for (const ToolDefinition& t : tools.tools)
      if (tools.choice != ToolChoice::Named || t.name == tools.named)
        info.tool_names.push_back(t.name);
  }
  return make_job(m, chat_prompt(m, r, continuation), options, true, true);
}

}  // namespace jitllm::server
