// Tool calls read out of a model's output as it streams: text before the first call is the
// message's content, each call is handed out once its text is complete (name and arguments, the
// arguments as the compact JSON text OpenAI's `function.arguments` carries), and a call cut
// short (max_tokens) goes back into the content as the text it was.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_syntax.h"

namespace jitllm::server {

struct ToolCall {
  std::string id;         // "call_..." (new_tool_call_id)
  std::string name;
  std::string arguments;  // a JSON object's text
};

class ToolCallParser {
 public:
  // `names`: the functions the request offers; a call of any other is not taken for one.
  // `strings`: the string-typed arguments of each (string_arguments(), for GlmXml).
  ToolCallParser(ToolSyntax syntax, std::vector<std::string> names,
                 std::map<std::string, std::set<std::string>> strings = {});

  // Feeds more output. Returns the content that can be shown now (text that might begin a call
  // is held back, as is whitespace that might end the content), and appends the calls
  // completed by this text to `calls`.
  std::string push(std::string_view text, std::vector<ToolCall>& calls);
  // The output ended: the rest of the content (an unfinished call's text included).
  std::string finish(std::vector<ToolCall>& calls);

  size_t n_calls() const { return n_calls_; }

 private:
  // Parses complete calls from parsed_; false when the text there is not a call.
  bool parse_calls(std::vector<ToolCall>& calls, bool final);
  // Finds and reads calls, then returns the content that can be shown.
  std::string advance(std::vector<ToolCall>& calls, bool final);

  ToolSyntax syntax_;
  std::vector<std::string> names_;
  std::map<std::string, std::set<std::string>> strings_;
  std::string text_;             // all output so far
  size_t shown_ = 0;             // content handed out: text_[0, shown_)
  size_t calls_at_ = std::string::npos;  // where the calls begin (a trigger), once seen
  size_t parsed_ = 0;            // calls' text consumed: text_[calls_at_, parsed_)
  size_t n_calls_ = 0;
  size_t search_from_ = 0;       // where the next trigger is looked for
};

// End of the first JSON value in `s` (after leading whitespace), or npos while it is incomplete.
// Throws nothing; a malformed value is found by the parser that follows.
size_t json_value_end(std::string_view s);

}  // namespace jitllm::server
