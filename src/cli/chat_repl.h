// `jitllm run --chat`: an interactive conversation with the model's chat template (or
// --chat-template FILE|NAME). Commands: /help, /bye, /clear, /save FILE, /load FILE. When the
// conversation outgrows the context, the oldest turns are dropped (the system message stays)
// with a notice, instead of ending the chat.
#pragma once

#include <string>
#include <vector>

namespace jitllm {
class Engine;
class Session;
class Tokenizer;
class SamplerChain;
}  // namespace jitllm

namespace jitllm::cli {

struct ChatOptions {
  std::string system;         // the system message ("" = none)
  std::string chat_template;  // a file or a built-in name ("" = the model's)
  std::string history_file;   // input history on a terminal ("" = none)
  int n_predict = 128;        // most tokens per answer
  std::vector<std::string> stop_texts;  // -r: an answer ends before one of these
};

int run_chat(const ChatOptions& options, Engine& engine, Session& session, const Tokenizer& tok,
             SamplerChain& sampler);

}  // namespace jitllm::cli
