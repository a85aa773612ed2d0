// ServedModel: loading (the engine options from the server's flags, the LoadedModel, the
// scheduler) and System One on the scheduler thread.
#include "server/served_model.h"

#include "app/systemone_scoring.h"
#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

ServedModel::ServedModel(ModelOptions options, Metrics& metrics)
    : id_(options.id.empty() ? app::model_name_of(options.path) : options.id) {
  app::LoadOptions lo;
  lo.path = options.path;
  lo.chat_template_file = options.chat_template_file;
  EngineOptions& eo = lo.engine;
  eo.devices = options.devices;
  eo.vram_budget = options.vram_budget;
  eo.gpu_layers = options.gpu_layers;
  // KV for every parallel sequence at its full context (0: the training context).
  if (options.scheduler.n_ctx > 0) eo.kv_tokens = options.scheduler.n_ctx * options.scheduler.parallel;
  eo.cpu_kernels = options.kernels;
  eo.warm_sessions = options.scheduler.parallel;  // the running batch's sizes, warmed before ready
  model_ = std::make_unique<app::LoadedModel>(lo);
  if (!model_->has_own_template())
    log(LogLevel::Warn, "{}: the model has no chat template; /v1/chat/completions uses a "
        "ChatML-like default (pass -chat-template FILE to choose one)", id_);
  options.scheduler.model_id = id_;
  scheduler_ = std::make_unique<Scheduler>(model_->engine(), model_->tokenizer(), metrics,
                                           options.scheduler);
}

int32_t ServedModel::n_vocab() const { return int32_t(model_->tokenizer().n_vocab()); }

ServedModel::~ServedModel() {
  if (scheduler_) scheduler_->stop(false);
}

app::SystemOneResult ServedModel::run_systemone(const app::SystemOneRequest& r) {
  const app::SystemOnePlan plan = app::plan_systemone(r, *model_);
  app::SystemOneResult result;
  const int64_t ctx = n_ctx();
  const int64_t chunk = scheduler_->options().prefill_chunk;
  scheduler_->run_exclusive([&](Engine& engine, PrefixCache& cache) {
    result = app::evaluate_systemone(plan, engine, &cache, ctx, chunk);
  });
  return result;
}

}  // namespace jitllm::server
