// libFuzzer target for the chat-template interpreter: the input is a template source (a model
// file's tokenizer.chat_template is untrusted). It is parsed and, when it parses, rendered with
// a small conversation under tight limits. Any outcome other than a rendered string or a
// jitllm::Error (a crash, a sanitizer report, another exception type, a hang) is a finding.
// Seeds: the oracle templates (shared/oracle/templates/*.jinja) and tests/chat/data/snippets.jinja.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/chat_template.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi ☕"},
    {"role": "assistant", "content": "Hello", "tool_calls": [{"id": "a1b2c3d4e", "type": "function",
      "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "tool_call_id": "a1b2c3d4e", "content": "{\"ok\": true}"},
    {"role": "user", "content": "Bye"}])");
  jitllm::chat::RenderLimits limits;
  limits.max_steps = 200000;           // keeps each run in milliseconds
  limits.max_string_bytes = 1 << 20;
  try {
    jitllm::chat::ChatTemplate tmpl(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>", limits);
    tmpl.set_clock([] { return std::time_t(1768478400); });
    jitllm::chat::ChatRenderOptions options;
    options.extra_globals["tools"] = nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}])");
    (void)tmpl.render(messages, options);
  } catch (const jitllm::Error&) {
  }
  return 0;
}
