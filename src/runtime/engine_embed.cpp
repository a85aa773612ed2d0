// Engine::embed: whole inputs to one vector each (pooled hidden states), or a cross-encoder's
// scores. Inputs share steps (every weight read once for all of them); each has a throwaway
// session whose pages go back to the pool when it is done.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quant/quant.h"
#include "runtime/engine.h"

namespace jitllm {

namespace {

// Inputs sharing one step: each holds a KV page for the step (pages are pooled, never freed), so
// this bounds the memory many tiny inputs could take (64 pages of 16 positions: 80 MB for
// BERT-base's F32 K/V).
constexpr size_t kMaxEmbedInputsPerStep = 64;

// x . w^T + b for one row, w a [k, rows] matrix of any format (the classification head: two
// small matrices applied to one row per input, so plain host loops).
std::vector<float> host_affine(const TensorInfo& w, const std::vector<float>& b, const float* x) {
  const int64_t k = w.row_length(), rows = w.rows();
  std::vector<float> row(static_cast<size_t>(k)), out(static_cast<size_t>(rows));
  const size_t row_size = row_bytes(w.type, k);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(w.type, w.data + size_t(r) * row_size, row.data(), k);
    double acc = 0.0;
    for (int64_t i = 0; i < k; ++i) acc += double(row[size_t(i)]) * double(x[i]);
    out[size_t(r)] = float(acc) + (b.empty() ? 0.0f : b[size_t(r)]);
  }
  return out;
}

}  // namespace

int64_t Engine::rank_classes() const {
  const TensorInfo* out = model_->weights().cls_out;
  return out ? out->rows() : 0;
}

int64_t Engine::embedding_width(Pooling pooling) const {
  const ModelWeights& w = model_->weights();
  if (pooling == Pooling::Rank) {
    if (!w.cls_out) throw_error("rank pooling: the model has no classification head (cls.output.weight)");
    return w.cls_out->rows();
  }
  return config().n_embd;
}

std::vector<float> Engine::embed(std::span<const std::vector<int32_t>> inputs, Pooling pooling,
                                 bool normalize, std::span<const std::vector<int32_t>> types) {
  if (!types.empty() && types.size() != inputs.size())
    throw_error("embeddings: token types for {} of {} inputs", types.size(), inputs.size());
  auto types_of = [&](size_t i) {
    return types.empty() ? std::span<const int32_t>() : std::span<const int32_t>(types[i]);
  };
  if (pooling == Pooling::None || pooling == Pooling::Unspecified)
    throw_error("embeddings need a pooling (mean, cls, last or rank); the model names {}",
                pooling_name(pooling));
  const int64_t width = embedding_width(pooling);
  const int64_t n_embd = config().n_embd;
  const bool causal = config().causal;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) throw_error("embeddings: input {} has no tokens", i);
    if (int64_t(inputs[i].size()) > config().n_ctx_train)
      throw_error("embeddings: input {} has {} tokens, more than the model's context of {}", i,
                  inputs[i].size(), config().n_ctx_train);
  }
  // Which hidden rows pooling reads: every token's (mean, and cls, whose first row is one of
  // them), or the last's.
  const bool every_row = pooling != Pooling::Last;
  std::vector<float> out(inputs.size() * size_t(width), 0.0f);
  std::vector<double> sum(static_cast<size_t>(n_embd));
  std::vector<float> pooled(static_cast<size_t>(n_embd));
  // Input i's embedding from the sum of its pooled rows (`count` of them).
  auto finish = [&](size_t i, const std::vector<double>& acc, int64_t count) {
    for (int64_t d = 0; d < n_embd; ++d) pooled[size_t(d)] = float(acc[size_t(d)] / double(count));
    float* dst = out.data() + i * size_t(width);
    if (pooling == Pooling::Rank) {
      const ModelWeights& w = model_->weights();
      std::vector<float> h(pooled);
      if (w.cls) {  // the pooler (HF's; llama.cpp's files may not have it)
        h = host_affine(*w.cls, w.cls_b, pooled.data());
        for (float& v : h) v = std::tanh(v);
      }
      const std::vector<float> scores = host_affine(*w.cls_out, w.cls_out_b, h.data());
      std::copy(scores.begin(), scores.end(), dst);
      return;
    }
    std::copy(pooled.begin(), pooled.end(), dst);
    if (normalize) {
      double norm = 0.0;
      for (int64_t d = 0; d < n_embd; ++d) norm += double(dst[d]) * double(dst[d]);
      const float inv = norm > 0.0 ? float(1.0 / std::sqrt(norm)) : 0.0f;
      for (int64_t d = 0; d < n_embd; ++d) dst[d] *= inv;
    }
  };
  auto add_rows = [&](const float* rows, int64_t n, std::vector<double>& acc) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t d = 0; d < n_embd; ++d) acc[size_t(d)] += double(rows[r * n_embd + d]);
  };

  const int64_t budget = options_.n_batch;
  std::vector<float> hidden;
  for (size_t i = 0; i < inputs.size();) {
    const int64_t len = int64_t(inputs[i].size());
    if (len > budget && causal) {  // alone, in chunks: its KV carries the earlier ones
      auto session = new_session(len);
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t off = 0; off < len; off += budget) {
        const int64_t n = std::min(budget, len - off);
        const bool last_chunk = off + n == len;
        StepInput in{session.get(), std::span<const int32_t>(inputs[i]).subspan(size_t(off), size_t(n)),
                     every_row};
        if (!types_of(i).empty()) in.types = types_of(i).subspan(size_t(off), size_t(n));
        in.no_logits = !every_row && !last_chunk;
        run_step(std::span<const StepInput>(&in, 1), nullptr, nullptr, &hidden);
        if (pooling == Pooling::Cls || pooling == Pooling::Rank) {
          if (off == 0) add_rows(hidden.data(), 1, sum);
        } else {
          add_rows(hidden.data(), int64_t(hidden.size()) / n_embd, sum);
        }
      }
      finish(i, sum, pooling == Pooling::Mean ? len : 1);
      ++i;
      continue;
    }
    // Inputs i..end together (a bidirectional input longer than the budget alone, whole).
    size_t end = i + 1;
    int64_t total = len;
    while (end < inputs.size() && end - i < kMaxEmbedInputsPerStep &&
           total + int64_t(inputs[end].size()) <= budget)
      total += int64_t(inputs[end++].size());
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<StepInput> step_in;
    for (size_t j = i; j < end; ++j) {
      sessions.push_back(new_session(int64_t(inputs[j].size())));
      step_in.push_back({sessions.back().get(), inputs[j], every_row});
      step_in.back().types = types_of(j);
    }
    run_step(step_in, nullptr, nullptr, &hidden);
    const float* rows = hidden.data();
    for (size_t j = i; j < end; ++j) {
      const int64_t n = every_row ? int64_t(inputs[j].size()) : 1;
      std::fill(sum.begin(), sum.end(), 0.0);
      if (pooling == Pooling::Mean || pooling == Pooling::Last)
        add_rows(rows, n, sum);
      else
        add_rows(rows, 1, sum);  // cls, rank: the first token's
      finish(j, sum, pooling == Pooling::Mean ? n : 1);
      rows += n * n_embd;
    }
    i = end;
  }
  return out;
}

}  // namespace jitllm
