// ServedModel: loading (the engine options from the server's flags, the LoadedModel, the
// scheduler) and System One on the scheduler thread.
#include "server/served_model.h"

#include "app/systemone_scoring.h"
#include "core/log.h"
#include "runtime/attention_flags.h"
#include "server/api_error.h"
#include "server/http_connection.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

ServedModel::ServedModel(ModelOptions options, Metrics& metrics)
    : id_(options.id.empty() ? app::model_name_of(options.path) : options.id), path_(options.path) {
  app::LoadOptions lo;
  lo.path = options.path;
  lo.chat_template = options.chat_template;
  EngineOptions& eo = lo.engine;
  eo.devices = options.devices;
  eo.vram_budget = options.vram_budget;
  eo.host_budget = options.host_budget;
  eo.gpu_layers = options.gpu_layers;
  eo.kv_type = kv_cache_type(options.cache_type_k, options.cache_type_v);
  check_flash_attn(options.flash_attn);
  // The KV budget (EngineOptions::kv_sessions): placement plans room for it and the pool stops
  // there; the scheduler parks sequences rather than run out. It counts the running sequences
  // and the finished ones kept for prefix reuse (without room for those, the budget would evict
  // them early and lose their reuse).
  eo.kv_sessions = options.scheduler.parallel + int(options.scheduler.cache_sessions);
  eo.kv_session_ctx = options.scheduler.n_ctx;
  eo.kv_tokens = options.kv_tokens;
  eo.cpu_kernels = options.kernels;
  eo.batch_invariant = options.scheduler.deterministic;
  eo.warm_sessions = options.scheduler.parallel;  // the running batch's sizes, warmed before ready
  eo.progress = options.progress;
  pooling_ = options.pooling.empty() ? Pooling::Unspecified : parse_pooling(options.pooling);
  model_ = std::make_unique<app::LoadedModel>(lo);
  if (is_encoder())
    log(LogLevel::Info, "{}: an encoder ({} pooling): /v1/embeddings{}", id_,
        pooling_name(pooling_ != Pooling::Unspecified ? pooling_ : engine().config().pooling),
        engine().rank_classes() == 1 ? " and /v1/rerank" : "");
  if (!model_->has_own_template())
    log(LogLevel::Warn, "{}: the model has no chat template; /v1/chat/completions uses a "
        "ChatML-like default (pass --chat-template FILE to choose one)", id_);
  tool_syntax_ = detect_tool_syntax(model_->chat_template_source());
  log(LogLevel::Info, "{}: tool calls in the {} syntax", id_, tool_syntax_name(tool_syntax_));
  thinks_ = template_thinks(model_->chat_template_source());
  reasoning_format_ = options.reasoning_format;
  if (thinks_ || tool_syntax_ == ToolSyntax::Harmony)
    log(LogLevel::Info, "{}: the template thinks ({}); reasoning format {}", id_,
        tool_syntax_ == ToolSyntax::Harmony ? "harmony analysis channel" : "<think>",
        reasoning_format_name(reasoning_format_));
  options.scheduler.model_id = id_;
  scheduler_ = std::make_unique<Scheduler>(model_->engine(), model_->tokenizer(), metrics,
                                           options.scheduler);
}

int32_t ServedModel::n_vocab() const { return int32_t(model_->tokenizer().n_vocab()); }

ServedModel::~ServedModel() {
  if (scheduler_) scheduler_->stop(false);
}

std::vector<float> ServedModel::run_embeddings(const std::vector<std::vector<int32_t>>& inputs,
                                              Pooling pooling, bool normalize,
                                              const std::vector<std::vector<int32_t>>& types) {
  const int64_t width = engine().embedding_width(pooling);
  // A few steps' worth of tokens per visit to the scheduler thread.
  const int64_t group_tokens = 4 * engine().options().n_batch;
  std::vector<float> out;
  out.reserve(inputs.size() * size_t(width));
  Connection* client = Connection::current();
  for (size_t i = 0; i < inputs.size();) {
    if (client && client->peer_closed()) throw ApiError(499, "cancelled", "the client went away");
    size_t end = i + 1;
    int64_t tokens = int64_t(inputs[i].size());
    while (end < inputs.size() && tokens + int64_t(inputs[end].size()) <= group_tokens)
      tokens += int64_t(inputs[end++].size());
    const std::span<const std::vector<int32_t>> group(inputs.data() + i, end - i);
    const std::span<const std::vector<int32_t>> group_types =
        types.empty() ? std::span<const std::vector<int32_t>>() : std::span(types.data() + i, end - i);
    std::vector<float> part;
    scheduler_->run_exclusive([&](Engine& engine, PrefixCache&) {
      part = engine.embed(group, pooling, normalize, group_types);
    });
    out.insert(out.end(), part.begin(), part.end());
    i = end;
  }
  return out;
}

app::SystemOneResult ServedModel::run_systemone(const app::SystemOneRequest& r) {
  const app::SystemOnePlan plan = app::plan_systemone(r, *model_);
  const int64_t ctx = n_ctx();
  const int64_t chunk = scheduler_->options().prefill_chunk;
  // One piece (a chunk of the state, or one question) per visit to the scheduler thread: the
  // running sequences get a step between two pieces instead of waiting for the whole request.
  std::unique_ptr<app::SystemOneEvaluation> eval;
  auto on_scheduler = [&](auto fn) {
    scheduler_->run_exclusive([&](Engine& engine, PrefixCache& cache) { fn(engine, cache); });
  };
  Connection* client = Connection::current();
  try {
    on_scheduler([&](Engine& engine, PrefixCache& cache) {
      eval = std::make_unique<app::SystemOneEvaluation>(plan, engine, &cache, ctx, chunk);
    });
    for (bool more = true; more;) {
      if (client && client->peer_closed())
        throw ApiError(499, "cancelled", "the client went away");
      on_scheduler([&](Engine&, PrefixCache&) { more = eval->step(); });
    }
    app::SystemOneResult result;
    on_scheduler([&](Engine&, PrefixCache&) {
      result = eval->finish();
      eval.reset();
    });
    return result;
  } catch (...) {
    // Its sessions hold pages of the engine's pool: they go on the thread that owns it.
    if (eval) {
      try {
        on_scheduler([&](Engine&, PrefixCache&) { eval.reset(); });
      } catch (...) {
        // The scheduler is gone (stopping): nothing else uses the pool any more.
      }
      eval.reset();
    }
    throw;
  }
}

}  // namespace jitllm::server
