// ServedModel: one model the server answers for: the LoadedModel (app/loaded_model.h: its
// Engine, Tokenizer, chat template and text helpers) and the Scheduler thread that owns the
// engine once serving starts. HTTP threads use the text helpers before enqueueing; everything
// that runs the engine goes through the scheduler.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/loaded_model.h"
#include "app/systemone.h"
#include "runtime/engine.h"
#include "server/metrics.h"
#include "server/reasoning_parser.h"
#include "server/scheduler.h"
#include "server/tool_syntax.h"

namespace jitllm::server {

struct ModelOptions {
  std::string path;                // .gguf, .jlm or HF folder ("" = the bundled default model)
  std::string id;                  // name clients use ("" = the file's stem)
  std::string chat_template;       // a file or a built-in name: overrides the model's template
  std::string kernels;             // -kernels: EngineOptions::cpu_kernels ("" = the fastest)
  std::string devices = "cpu";     // cpu, cuda, cuda:N or a list (EngineOptions::devices)
  std::string vram_budget;         // per-card cap, e.g. "6G" (EngineOptions::vram_budget)
  std::string host_budget;         // host cap, e.g. "6G" (EngineOptions::host_budget)
  int gpu_layers = -1;             // at most this many layers on cards (EngineOptions::gpu_layers)
  // llama.cpp's -fa / -ctk / -ctv (runtime/attention_flags.h).
  std::string flash_attn = "auto", cache_type_k = "f16", cache_type_v = "f16";
  // --reasoning-format: where a thinking model's thoughts go (server/reasoning_parser.h).
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;
  // --pooling: how /v1/embeddings pools ("" = the model's <arch>.pooling_type).
  std::string pooling;
  SchedulerOptions scheduler;
  // --kv-tokens: the KV cache's size in tokens (0: EngineOptions::kv_sessions' default).
  int64_t kv_tokens = 0;
  // Found in a -models folder: a file that does not load is skipped (logged), not fatal.
  bool skip_if_unloadable = false;
  // The engine's loading progress (EngineOptions::progress), for /health while loading.
  std::function<void(const char* stage, int64_t done, int64_t total)> progress;
};

class ServedModel {
 public:
  ServedModel(ModelOptions options, Metrics& metrics);  // loads; throws jitllm::Error
  ~ServedModel();

  const std::string& id() const { return id_; }
  int64_t n_ctx() const { return scheduler_->n_ctx(); }
  // The ids a request may name (prompt ids, logit_bias) and the sampler may choose: the
  // tokenizer's tokens. A head padded past them (more logits than tokens) is masked.
  int32_t n_vocab() const;
  const Tokenizer& tokenizer() const { return model_->tokenizer(); }
  Scheduler& scheduler() { return *scheduler_; }
  const Engine& engine() const { return model_->engine(); }
  bool has_own_template() const { return model_->has_own_template(); }
  const std::vector<std::string>& implicit_stops() const { return model_->implicit_stops(); }
  const std::string& chat_template_source() const { return model_->chat_template_source(); }
  const std::string& path() const { return path_; }
  // How the model writes tool calls, read off its chat template once at load.
  ToolSyntax tool_syntax() const { return tool_syntax_; }
  // The template writes <think> blocks (its model thinks), and where the thinking goes when a
  // request does not say (--reasoning-format).
  bool thinks() const { return thinks_; }
  ReasoningFormat reasoning_format() const { return reasoning_format_; }
  // The template reads these variables (reasoning_effort and its "none" are honoured only then).
  bool template_uses(std::string_view variable) const {
    return chat_template_source().find(variable) != std::string::npos;
  }

  // The text helpers of app::LoadedModel (thread-safe).
  std::vector<int32_t> tokenize_prompt(const std::string& text) const {
    return model_->tokenize_prompt(text);
  }
  std::vector<int32_t> tokenize_raw_prompt(const std::string& text) const {
    return model_->tokenize_raw_prompt(text);
  }
  std::vector<int32_t> tokenize_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools,
                                     bool parse_special_in_content = false,
                                     const std::string& continuation = "",
                                     const nlohmann::ordered_json& globals = nullptr) const {
    return model_->tokenize_chat(messages, tools, parse_special_in_content, continuation, globals);
  }
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools) const {
    return model_->render_chat(messages, tools);
  }
  std::vector<int32_t> tokenize_rendered(const std::string& text) const {
    return model_->tokenize_rendered(text);
  }
  std::string detokenize(const std::vector<int32_t>& ids) const { return model_->detokenize(ids); }
  std::shared_ptr<const constrain::Vocabulary> grammar_vocabulary(bool tool_markers = false) const {
    return model_->grammar_vocabulary(tool_markers);
  }
  std::vector<int32_t> rendered_control_tokens() const { return model_->rendered_control_tokens(); }
  std::vector<int32_t> tokenize_text(const std::string& text, bool add_special,
                                     bool parse_special = false) const {
    return model_->tokenize_text(text, add_special, parse_special);
  }

  // Pooled embeddings or a reranker's scores of whole inputs (Engine::embed), on the scheduler
  // thread in groups of inputs (the running sequences get a step between two groups); throws
  // ApiError 499 when the client goes away. [inputs.size(), engine().embedding_width(pooling)].
  // `types`: each input's token types, or empty (Engine::embed).
  std::vector<float> run_embeddings(const std::vector<std::vector<int32_t>>& inputs,
                                    Pooling pooling, bool normalize,
                                    const std::vector<std::vector<int32_t>>& types = {});
  // The pooling /v1/embeddings uses (jitllmd --pooling, else the model's; may be unspecified).
  Pooling pooling() const { return pooling_; }
  // An encoder (BERT): embeddings and reranking only, no generation.
  bool is_encoder() const { return engine().is_encoder(); }
  const app::LoadedModel& loaded() const { return *model_; }

  // Answers System One questions (app/systemone_scoring.h): tokenized on the calling thread,
  // evaluated on the scheduler thread between steps, sharing the prefix cache.
  app::SystemOneResult run_systemone(const app::SystemOneRequest& request);

 private:
  std::string id_;
  ToolSyntax tool_syntax_ = ToolSyntax::Generic;
  bool thinks_ = false;
  ReasoningFormat reasoning_format_ = ReasoningFormat::Auto;
  Pooling pooling_ = Pooling::Unspecified;
  std::string path_;  // as given ("" = the bundled default model)
  std::unique_ptr<app::LoadedModel> model_;
  std::unique_ptr<Scheduler> scheduler_;  // declared last: stopped before the model goes
};

}  // namespace jitllm::server
