// Engine::warm_up: runs, on a throwaway session, the step shapes a first prompt and its decode
// use, so that before the engine reports ready every kernel variant they need is compiled (or read
// from the cubin cache) and every weight sits on its device. The issue asks that nothing compiles
// after "ready"; llama.cpp's tools run a similar warm-up decode at load.
//
// Why run steps instead of listing kernels: which variant a step takes (GEMM or matvec tiles,
// flash or paged attention, a decode graph) is decided inside the backend from the step's shape;
// running the shapes keeps this file right whatever those rules become.
#include <algorithm>
#include <memory>
#include <vector>

#include "core/log.h"
#include "runtime/engine.h"

namespace jitllm {

namespace {
// warm_up_together: the throwaway sessions take their 1-token prompts in one step together, then
// step kTogetherSteps times with logits and kTogetherSteps times greedily (a direct step, the
// capture, a replay), then once with the logits pick.
constexpr int kTogetherSteps = 3;
constexpr int64_t kTogetherCtx = 2 + 2 * kTogetherSteps;

// JITLLM_DUMP writes nothing for the warm-up's throwaway steps.
struct DumpPause {
  explicit DumpPause(Model& m) : model(m) { model.pause_dump(true); }
  ~DumpPause() { model.pause_dump(false); }
  Model& model;
};
}  // namespace

void Engine::warm_up() {
  // Shapes: one 16-row prompt step (the prefill GEMM and flash-attention path), one 15-row step
  // (matvec tiles of 8, 4, 2 and 1 rows, paged attention over an earlier prompt), one 7-row step
  // (a single tile: q/k/v take the RoPE + KV-store epilogue there, as a short prompt tail does),
  // then three one-token decode steps (a direct step, the step that captures the decode graph, a
  // replay), once returning logits and once only the greedy token (its own kernels and graph).
  constexpr int64_t kPrompt = 16, kTail = 15, kSmall = 7, kDecode = 3;
  const int64_t n_ctx = kPrompt + kTail + kSmall + 2 * kDecode;
  if (config().n_ctx_train > 0 && config().n_ctx_train < n_ctx) return;  // a toy model: nothing to gain
  const DumpPause no_dumps(*model_);
  // Sessions decoding together, up to warm_sessions: the counts whose kernels differ. Below 8
  // rows the matvec takes tiles of 2, 4 or 8 rows (2, 4, 7); from 8 to 64 the batched tensor-core
  // kernels take tiles of 8 rows (every multiple of 8, and warm_sessions itself); larger steps
  // take the prefill GEMM, which the 16-row prompt below warms.
  const int64_t top = std::min<int64_t>(options_.warm_sessions, 64);
  std::vector<int64_t> counts;
  for (int64_t c : {2, 4, 7})
    if (c <= top) counts.push_back(c);
  for (int64_t c = 8; c <= top; c += 8) counts.push_back(c);
  if (top > 1 && std::find(counts.begin(), counts.end(), top) == counts.end()) counts.push_back(top);
  // Progress in parts: the three prompt steps, the two decode runs, each count together.
  const int64_t parts = 5 + int64_t(counts.size());
  int64_t done = 0;
  auto tick = [&] {
    if (options_.progress) options_.progress("warm-up", done, parts);
    ++done;
  };
  tick();
  auto session = new_session(n_ctx);
  // Any valid ids serve; spread them so the embedding lookup reads several rows.
  std::vector<int32_t> ids(size_t(kPrompt + kTail + kSmall));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919) % size_t(config().n_vocab));
  const std::span<const int32_t> all(ids);
  prefill(*session, all.first(kPrompt), false, std::min<int64_t>(kPrompt, options_.n_batch));
  tick();
  prefill(*session, all.subspan(kPrompt, kTail), false, std::min<int64_t>(kTail, options_.n_batch));
  tick();
  prefill(*session, all.subspan(kPrompt + kTail), false, std::min<int64_t>(kSmall, options_.n_batch));
  tick();
  for (int64_t i = 0; i < kDecode; ++i) decode(*session, ids[size_t(i)]);
  tick();
  for (int64_t i = 0; i < kDecode; ++i) decode_greedy(*session, ids[size_t(i)]);
  session.reset();
  for (int64_t c : counts) {
    tick();
    // A pool capped below c throwaway sessions' pages cannot serve c sessions together either.
    const size_t cap = pool_.max_pages();
    const int64_t per_session = (kTogetherCtx + options_.kv_page_tokens - 1) / options_.kv_page_tokens;
    if (cap && pool_.pages_in_use() + size_t(c * per_session) > cap) {
      log(LogLevel::Warn, "warm-up of {} sessions together skipped: the KV pool holds {} pages", c, cap);
      break;
    }
    warm_up_together(c);
  }
  if (options_.progress) options_.progress("warm-up", parts, parts);
}

void Engine::warm_up_host() {
  const DumpPause no_dumps(*model_);
  if (options_.progress) options_.progress("warm-up", 0, 1);
  if (!model_->family().lm_head) {  // an encoder's steps give hidden states only
    const std::vector<int32_t> one{0};
    embed(std::span<const std::vector<int32_t>>(&one, 1), Pooling::Mean, false);
  } else {
    auto session = new_session(1);
    const int32_t id = 0;
    prefill(*session, std::span<const int32_t>(&id, 1), false);
  }
  if (options_.progress) options_.progress("warm-up", 1, 1);
}

void Engine::warm_up_together(int64_t n) {
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::vector<StepInput> step_in;
  for (int64_t i = 0; i < n; ++i) {
    ids[size_t(i)] = int32_t((i * 7919 + 13) % config().n_vocab);
    sessions.push_back(new_session(kTogetherCtx));
    step_in.push_back({sessions[size_t(i)].get(), std::span<const int32_t>(&ids[size_t(i)], 1), false});
  }
  // The sessions' one-token prompts go in one step of the decode shape (a step per session made
  // the warm-up of 64 sessions together run 301 steps before the ones that matter).
  for (int i = 0; i < 1 + kTogetherSteps; ++i) step(step_in);
  for (int i = 0; i < kTogetherSteps; ++i) step_greedy(step_in);
  // A server's sampled steps: the logits pick (its kernel compiled now, not at the first request).
  const std::vector<int32_t> extra{0};
  std::vector<uint64_t> mask(size_t((config().n_vocab + 63) / 64), ~uint64_t(0));
  const int32_t top = int32_t(std::min<int64_t>(40, config().n_vocab));
  std::vector<LogitsPick> picks(static_cast<size_t>(n), LogitsPick{top, extra, true});
  picks[0].allowed = mask;
  step_picked(step_in, picks, config().n_vocab);
}

}  // namespace jitllm
