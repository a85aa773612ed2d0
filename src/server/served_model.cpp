// ServedModel: loading (model file, kernels, tokenizer, template) and prompt tokenization.
#include "server/served_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "chat/interpreter.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/model_loader.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::server {

const char* const kDefaultChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot read the chat template file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string stem_of(const std::string& path) {
  if (path.empty()) return "default";
  std::filesystem::path p(path);
  if (p.filename().empty()) p = p.parent_path();
  return p.has_extension() ? p.stem().string() : p.filename().string();
}

std::string token_text(const Tokenizer& tok, int32_t id) {
  return id >= 0 && size_t(id) < tok.n_vocab() ? tok.piece(id) : std::string();
}

}  // namespace

ServedModel::ServedModel(ModelOptions options, Metrics& metrics)
    : id_(options.id.empty() ? stem_of(options.path) : options.id) {
  EngineOptions eo;
  eo.devices = options.devices;
  eo.vram_budget = options.vram_budget;
  eo.gpu_layers = options.gpu_layers;
  // KV for every parallel sequence at its full context (0: the training context).
  if (options.scheduler.n_ctx > 0) eo.kv_tokens = options.scheduler.n_ctx * options.scheduler.parallel;
  eo.cpu_kernels = options.kernels;
  eo.warm_sessions = options.scheduler.parallel;  // the running batch's sizes, warmed before ready
  engine_ = std::make_unique<Engine>(load_model_file(options.path), eo);
  const Metadata& md = engine_->model().file().metadata;
  tokenizer_ = std::make_unique<Tokenizer>(md);
  if (int64_t(tokenizer_->n_vocab()) > engine_->config().n_vocab)
    throw_error("{}: the tokenizer has {} tokens but the model only {} logits", options.path,
                tokenizer_->n_vocab(), engine_->config().n_vocab);
  const std::string bos = token_text(*tokenizer_, tokenizer_->vocab().bos);
  const std::string eos = token_text(*tokenizer_, tokenizer_->vocab().eos);
  if (!options.chat_template_file.empty()) {
    template_ = std::make_unique<chat::ChatTemplate>(read_text_file(options.chat_template_file),
                                                     bos, eos);
  } else if (md.has("tokenizer.chat_template")) {
    template_ = std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::from_metadata(md));
  } else {
    log(LogLevel::Warn, "{}: the model has no chat template; /v1/chat/completions uses a "
        "ChatML-like default (pass -chat-template FILE to choose one)", id_);
    template_ = std::make_unique<chat::ChatTemplate>(kDefaultChatTemplate, bos, eos);
    own_template_ = false;
    implicit_stops_.push_back("<|im_end|>");
  }
  options.scheduler.model_id = id_;
  scheduler_ = std::make_unique<Scheduler>(*engine_, *tokenizer_, metrics, options.scheduler);
}

ServedModel::~ServedModel() {
  if (scheduler_) scheduler_->stop(false);
}

std::vector<int32_t> ServedModel::tokenize_prompt(const std::string& text) const {
  std::lock_guard lock(text_mutex_);
  return tokenizer_->encode(text, /*add_special=*/true);
}

std::string ServedModel::render_chat(const nlohmann::ordered_json& messages,
                                     const nlohmann::json& tools) const {
  chat::ChatRenderOptions ro;
  ro.merge_system_if_rejected = true;
  if (!tools.is_null()) ro.extra_globals["tools"] = nlohmann::ordered_json::parse(tools.dump());
  std::lock_guard lock(text_mutex_);
  try {
    return template_->render(messages, ro);
  } catch (const chat::TemplateRaised& e) {
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the model's chat template refused the messages: {}", e.what()),
                   "messages", "template_error");
  }
}

std::vector<int32_t> ServedModel::tokenize_chat(const nlohmann::ordered_json& messages,
                                                const nlohmann::json& tools) const {
  return tokenize_rendered(render_chat(messages, tools));
}

std::vector<int32_t> ServedModel::tokenize_rendered(const std::string& text) const {
  std::lock_guard lock(text_mutex_);
  const std::string& bos = template_->bos_token();
  const bool has_bos = !bos.empty() && text.rfind(bos, 0) == 0;
  return tokenizer_->encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

std::string ServedModel::detokenize(const std::vector<int32_t>& ids) const {
  std::lock_guard lock(text_mutex_);
  return tokenizer_->decode(ids);
}

SystemOneResult ServedModel::run_systemone(const SystemOneRequest& r) {
  const bool chat = own_template_;
  auto prompt_of = [&](const SystemOneQuestion& q) {
    const std::string question = systemone_question_text(q);
    if (!chat) return systemone_plain_prompt(r.state, question);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", r.state + "\n\nQuestion: " + question}});
    return render_chat(messages, nullptr);
  };
  auto tokenize = [&](const std::string& text) {
    return chat ? tokenize_rendered(text) : tokenize_prompt(text);
  };
  const SystemOnePlan plan = plan_systemone(r, prompt_of, tokenize);
  SystemOneResult result;
  const int64_t ctx = n_ctx();
  const int64_t chunk = scheduler_->options().prefill_chunk;
  scheduler_->run_exclusive([&](Engine& engine, PrefixCache& cache) {
    result = evaluate_systemone(plan, engine, &cache, ctx, chunk);
  });
  return result;
}

}  // namespace jitllm::server
