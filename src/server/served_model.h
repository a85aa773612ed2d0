// ServedModel: one model the server answers for: its Engine, Tokenizer and chat template, the
// Scheduler thread that owns the engine, and the text <-> ids helpers HTTP threads use before
// enqueueing. A model without a chat template gets a ChatML-like default (with a warning) and
// "<|im_end|>" as an implicit stop string.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/systemone.h"

namespace jitllm {
class Tokenizer;
namespace chat {
class ChatTemplate;
}
}  // namespace jitllm

namespace jitllm::server {

struct ModelOptions {
  std::string path;                // .gguf, .jlm or HF folder ("" = the bundled default model)
  std::string id;                  // name clients use ("" = the file's stem)
  std::string chat_template_file;  // overrides the model's template
  std::string kernels;             // -kernels: EngineOptions::cpu_kernels ("" = the fastest)
  std::string devices = "cpu";     // cpu, cuda, cuda:N or a list (EngineOptions::devices)
  std::string vram_budget;         // per-card cap, e.g. "6G" (EngineOptions::vram_budget)
  int gpu_layers = -1;             // at most this many layers on cards (EngineOptions::gpu_layers)
  SchedulerOptions scheduler;
};

// The ChatML-like template used when a model ships none.
extern const char* const kDefaultChatTemplate;

class ServedModel {
 public:
  ServedModel(ModelOptions options, Metrics& metrics);  // loads; throws jitllm::Error
  ~ServedModel();

  const std::string& id() const { return id_; }
  int64_t n_ctx() const { return scheduler_->n_ctx(); }
  int32_t n_vocab() const { return int32_t(engine_->config().n_vocab); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Scheduler& scheduler() { return *scheduler_; }
  const Engine& engine() const { return *engine_; }
  bool has_own_template() const { return own_template_; }
  const std::vector<std::string>& implicit_stops() const { return implicit_stops_; }

  // Plain prompt text -> ids, BOS added when the vocabulary asks for it (as `jitllm run`).
  std::vector<int32_t> tokenize_prompt(const std::string& text) const;
  // Chat messages rendered with the template (add_generation_prompt) and tokenized with special
  // tokens parsed; BOS is not added twice when the template writes it. Throws ApiError 400 when
  // the template refuses the conversation.
  std::vector<int32_t> tokenize_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::json& tools) const;
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::json& tools) const;
  // Text that came out of the template -> ids (special tokens parsed, BOS unless it is there).
  std::vector<int32_t> tokenize_rendered(const std::string& text) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;

  // Answers System One questions on the scheduler thread (between steps, sharing the prefix
  // cache). Prompts go through the model's own chat template when it has one, else plain text.
  SystemOneResult run_systemone(const SystemOneRequest& request);

 private:
  std::string id_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<chat::ChatTemplate> template_;
  bool own_template_ = true;
  std::vector<std::string> implicit_stops_;
  mutable std::mutex text_mutex_;  // tokenizer and template calls from HTTP threads
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace jitllm::server
