// Engine: ragged steps over sessions, chunked prefill, decode.
#include "runtime/engine.h"

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "io/jlm_reader.h"
#include "runtime/cpu_kernels.h"
#include "runtime/model_loader.h"

namespace jitllm {

namespace {

// EngineOptions::kv_sessions: fills kv_tokens and max_kv_pages; returns the pool's cap.
size_t resolve_kv_budget(EngineOptions& o, const Model& model) {
  if (o.kv_sessions <= 0 || o.max_kv_pages > 0 || o.kv_page_tokens <= 0 || !model.family().lm_head)
    return o.max_kv_pages;
  const int64_t train = model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096;
  const int64_t n_ctx = o.kv_session_ctx > 0 ? std::min(o.kv_session_ctx, train) : train;
  if (o.kv_tokens <= 0)
    o.kv_tokens = std::max(n_ctx, int64_t(o.kv_sessions) * std::min<int64_t>(n_ctx, 4096));
  o.max_kv_pages = size_t((o.kv_tokens + o.kv_page_tokens - 1) / o.kv_page_tokens);
  return o.max_kv_pages;
}

}  // namespace

Engine::Engine(std::shared_ptr<const ModelFile> file, EngineOptions options)
    : options_(options),
      model_(create_model(std::move(file))),
      // An encoder's K and V live for one step (no session is continued): f32, as llama.cpp
      // keeps them, costs nothing that lasts
      // and pages of 16 positions, since every input of a step holds one.
      kv_layout_(model_->kv_layout(model_->family().lm_head ? options_.kv_page_tokens : 16,
                                   model_->family().lm_head ? options_.kv_type : QuantType::F32)),
      pool_(kv_layout_, resolve_kv_budget(options_, *model_)) {
  if (options_.n_batch <= 0) throw_error("batch size must be positive, got {}", options_.n_batch);
  if (is_encoder() && options_.devices != "cpu")
    throw_error("{} is an encoder, which runs on the CPU only here (--devices cpu)", config().arch);
  if (options_.kv_page_tokens <= 0)
    throw_error("KV page size must be positive, got {}", options_.kv_page_tokens);
  plan_host();
  backends_ = make_backends(*model_, options_);
  // Every layer on a card: the cards keep the KV in their copies of the pages, the host pages
  // are only their identities (a 64-byte stub each instead of page_bytes(), which for an 8B
  // model is 33.5 MB per 256 positions).
  host_kv_ = !backends_.cards || backends_.placement.n_layers_on_cards() < config().n_layer;
  if (!host_kv_) pool_.set_page_alloc_bytes(64);
  if (options_.warm_up) backends_.cards ? warm_up() : warm_up_host();
}

void Engine::plan_host() {
  // The experts' checksums (load_model_file leaves them): here when they stay resident (once
  // per opened file, however many engines share it), by the expert cache as each is read when
  // they are paged.
  const auto check_resident_experts = [&] {
    const ModelFile& f = model_->file();
    if (f.experts_verified || f.format != "jlm") return;
    std::call_once(*f.experts_checked,
                   [&] { JlmFile::open(f.path).check_data(JlmFile::Slices::Experts); });
  };
  if (options_.devices != "cpu") {
    if (!options_.host_budget.empty())
      log(LogLevel::Warn, "--host-budget applies to --devices cpu; with cards it is not used");
    return check_resident_experts();
  }
  const bool given = !options_.host_budget.empty();
  const uint64_t budget = resolve_host_budget(options_.host_budget);
  // The KV pages planned for: the pool's cap, else the positions asked for, else one session
  // at its context up to 4096 positions.
  const int64_t train = config().n_ctx_train > 0 ? config().n_ctx_train : 4096;
  const int64_t tokens = options_.max_kv_pages > 0
                             ? int64_t(options_.max_kv_pages) * options_.kv_page_tokens
                             : options_.kv_tokens > 0 ? options_.kv_tokens : std::min<int64_t>(train, 4096);
  const uint64_t pages = uint64_t((tokens + options_.kv_page_tokens - 1) / options_.kv_page_tokens);
  // Without --host-budget the budget is the machine's estimate: what cannot be planned under it
  // runs from the mapped file as before (slowly, a warning says so), and a GGUF is not
  // converted unasked (a .jlm is paged).
  const auto mapped = [&](const std::string& why) {
    log(LogLevel::Warn, "{} (running from the mapped file; pass --host-budget to plan it)", why);
    host_plan_.paged = false;
    expert_cache_.reset();
  };
  try {
    const CpuKernels& kernels = resolve_cpu_kernels(options_.cpu_kernels, options_.batch_invariant);
    host_plan_ = plan_host_memory(*model_, kernels, budget, pages * kv_layout_.page_bytes(),
                                  options_.n_batch);
    if (host_plan_.paged && model_->file().format != "jlm" && !given)
      mapped(fmt::format("the experts of {} do not fit in {:.1f} GiB", model_->file().path,
                         double(budget) / double(1ull << 30)));
    if (host_plan_.paged && model_->file().format != "jlm") {
      // Experts are paged from a .jlm's expert page groups: the GGUF converted once into the
      // model cache.
      std::unique_ptr<Model> converted = create_model(paged_container(model_->file().path));
      if (converted->kv_layout(kv_layout_.page_tokens, kv_layout_.type).page_bytes() !=
          kv_layout_.page_bytes())
        throw_error("{}: its conversion keeps another KV layout", model_->file().path);
      model_ = std::move(converted);
    }
    const uint64_t fixed = host_plan_.dense_bytes + host_plan_.kv_bytes + host_plan_.overhead;
    if (host_plan_.paged)
      expert_cache_ = std::make_unique<ExpertCache>(model_->file().path, *model_, budget - fixed);
  } catch (const Error& e) {
    if (given) throw;
    mapped(e.what());
  }
  if (!host_plan_.paged) return check_resident_experts();
  host_plan_.slots = expert_cache_->capacity();  // the file's own expert pages
  host_plan_.slot_bytes = expert_cache_->slot_bytes();
  model_->page_experts(expert_cache_.get());
  if (options_.print_placement) fmt::print(stderr, "{}\n", host_plan_.describe());
}

void Engine::copy_kv_pages(const KvSeq& from, const KvSeq& to, int64_t pages) {
  if (from.n_pages < pages || to.n_pages < pages)
    throw_error("KV copy: {} pages asked, the sessions hold {} and {}", pages, from.n_pages, to.n_pages);
  for (const auto& ops : backends_.owned) {
    if (ops == backends_.owned.front() && !host_kv_) continue;  // the host keeps no KV
    ops->enter();
    for (int64_t p = 0; p < pages; ++p) ops->copy_kv_page(from.pages[p], to.pages[p], kv_layout_);
  }
}

std::unique_ptr<Session> Engine::new_session(int64_t n_ctx) {
  return std::make_unique<Session>(pool_, n_ctx > 0 ? n_ctx : config().n_ctx_train);
}

std::vector<float> Engine::step(std::span<const StepInput> inputs) {
  std::vector<float> logits;
  run_step(inputs, &logits, nullptr);
  return logits;
}

std::vector<int32_t> Engine::step_greedy(std::span<const StepInput> inputs) {
  std::vector<int32_t> ids;
  run_step(inputs, nullptr, &ids);
  return ids;
}

std::vector<PickedLogits> Engine::step_picked(std::span<const StepInput> inputs,
                                              std::span<const LogitsPick> picks, int64_t cols) {
  if (cols <= 0 || cols > config().n_vocab)
    throw_error("step: picks over {} columns of {} logits", cols, config().n_vocab);
  for (const LogitsPick& p : picks) check_pick(p, cols);
  std::vector<PickedLogits> out(picks.size());
  const LogitsPicks want{cols, picks, out.data()};
  run_step(inputs, nullptr, nullptr, nullptr, &want);
  return out;
}

size_t Engine::run_step(std::span<const StepInput> inputs, std::vector<float>* logits,
                        std::vector<int32_t>* argmax, std::vector<float>* hidden,
                        const LogitsPicks* picks) {
  if (!hidden && !model_->family().lm_head)
    throw_error("{} is an encoder: it gives embeddings (jitllm embed, /v1/embeddings), not logits",
                config().name.empty() ? config().arch : config().name);
  std::vector<int32_t> tokens, pos, seq, out_rows, types;
  std::vector<KvSeq> seqs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const StepInput& in = inputs[i];
    if (!in.session) throw_error("step: input {} has no session", i);
    for (size_t j = 0; j < i; ++j)
      if (inputs[j].session == in.session)
        throw_error("step: a session appears twice in one step (inputs {} and {})", j, i);
  }
  // Reserve every session's pages before running, so an overflow leaves all sessions untouched.
  for (const StepInput& in : inputs) {
    Session& s = *in.session;
    const int64_t room = s.n_ctx() - s.position();
    if (!in.types.empty() && in.types.size() != in.tokens.size())
      throw_error("step: {} token types for {} tokens", in.types.size(), in.tokens.size());
    if (int64_t(in.tokens.size()) > room)
      throw_error("context overflow: {} tokens in the session + {} new exceed the context size "
                  "of {}", s.position(), in.tokens.size(), s.n_ctx());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const StepInput& in = inputs[i];
    if (in.tokens.empty()) continue;
    Session& s = *in.session;
    s.reserve(int64_t(in.tokens.size()));
    const int32_t sid = int32_t(seqs.size());
    for (size_t t = 0; t < in.tokens.size(); ++t) {
      if (in.all_logits || (t + 1 == in.tokens.size() && !in.no_logits))
        out_rows.push_back(int32_t(tokens.size()));
      tokens.push_back(in.tokens[t]);
      types.push_back(in.types.empty() ? 0 : in.types[t]);
      pos.push_back(int32_t(s.position() + int64_t(t)));
      seq.push_back(sid);
    }
    seqs.push_back(s.kv());
  }
  if (logits) logits->assign(out_rows.size() * size_t(config().n_vocab), 0.0f);
  if (argmax) argmax->assign(out_rows.size(), 0);
  if (hidden) hidden->assign(out_rows.size() * size_t(config().n_embd), 0.0f);
  if (picks && picks->rows.size() != out_rows.size())
    throw_error("step: {} picks for {} requested rows", picks->rows.size(), out_rows.size());
  if (tokens.empty()) return 0;
  bool typed = false;
  for (const StepInput& in : inputs) typed |= !in.types.empty();
  Batch b{tokens, pos, seq, seqs, out_rows};
  if (typed) b.types = types;
  model_->forward(backends_.route, b, kv_layout_, logits ? logits->data() : nullptr,
                  argmax ? argmax->data() : nullptr, hidden ? hidden->data() : nullptr, picks);
  // Positions advance only after the step succeeded.
  for (const StepInput& in : inputs)
    in.session->append(in.tokens.data(), int64_t(in.tokens.size()));
  return out_rows.size();
}

std::vector<float> Engine::prefill(Session& session, std::span<const int32_t> tokens,
                                   bool all_logits, int64_t chunk) {
  if (chunk <= 0) chunk = options_.n_batch;
  if (session.position() + int64_t(tokens.size()) > session.n_ctx())
    throw_error("context overflow: {} tokens in the session + {} new exceed the context size of {}",
                session.position(), tokens.size(), session.n_ctx());
  std::vector<float> all;
  std::vector<float> last;
  for (size_t off = 0; off < tokens.size(); off += size_t(chunk)) {
    const size_t len = std::min(size_t(chunk), tokens.size() - off);
    StepInput in{&session, tokens.subspan(off, len), all_logits};
    // Only the chunk holding the last token asks for its logits: the others only store KV (on a
    // card that saves the head, the copy home and a wait per chunk).
    in.no_logits = !all_logits && off + len < tokens.size();
    std::vector<float> out = step(std::span<const StepInput>(&in, 1));
    if (all_logits)
      all.insert(all.end(), out.begin(), out.end());
    else
      last = std::move(out);
  }
  return all_logits ? all : last;
}

std::vector<float> Engine::decode(Session& session, int32_t token) {
  StepInput in{&session, std::span<const int32_t>(&token, 1), false};
  return step(std::span<const StepInput>(&in, 1));
}

int32_t Engine::decode_greedy(Session& session, int32_t token) {
  StepInput in{&session, std::span<const int32_t>(&token, 1), false};
  return step_greedy(std::span<const StepInput>(&in, 1)).at(0);
}

}  // namespace jitllm
