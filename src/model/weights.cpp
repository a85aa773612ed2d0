// Binding llama-family weights by their GGUF names, with shape and format checks.
#include "model/weights.h"

#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "quant/quant.h"

namespace jitllm {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const ModelFile& file) : file_(file) {
    for (const auto& t : file.tensors) by_name_[t.name] = &t;
  }

  const TensorInfo* find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  const TensorInfo& require(const std::string& name, std::vector<int64_t> shape) const {
    const TensorInfo* t = find(name);
    if (!t) throw_error("{}: tensor '{}' is missing", file_.path, name);
    check(*t, shape);
    return *t;
  }

  void check(const TensorInfo& t, const std::vector<int64_t>& shape) const {
    // Trailing dimensions of 1 are equivalent ([256] == [256, 1]).
    auto trim = [](std::vector<int64_t> s) {
      while (s.size() > 1 && s.back() == 1) s.pop_back();
      return s;
    };
    if (trim(t.shape) != trim(shape))
      throw_error("{}: expected {}, got {}", t.name, shape_str(shape), shape_str(t.shape));
    const QuantTraits& traits = quant_traits(t.type);
    if (!traits.supported)
      throw_error("{}: format {} is not supported", t.name, traits.name);
    if (!t.data) throw_error("{}: tensor has no data", t.name);
    if (t.bytes != row_bytes(t.type, t.shape[0]) * size_t(t.rows()))
      throw_error("{}: {} bytes for a {} {} tensor, expected {}", t.name, t.bytes, traits.name,
                  shape_str(t.shape), row_bytes(t.type, t.shape[0]) * size_t(t.rows()));
  }

  // A 1-D vector converted to f32 (norms are usually F32 already; F16/BF16 ones are converted).
  std::vector<float> vector(const std::string& name, int64_t n) const {
    const TensorInfo& t = require(name, {n});
    std::vector<float> out(static_cast<size_t>(n));
    if (t.type == QuantType::F32)
      std::memcpy(out.data(), t.data, size_t(n) * sizeof(float));
    else
      dequantize_row(t.type, t.data, out.data(), n);
    return out;
  }

 private:
  const ModelFile& file_;
  std::unordered_map<std::string, const TensorInfo*> by_name_;
};

}  // namespace

ModelWeights bind_llama_weights(const ModelFile& file, Config& c) {
  Binder b(file);
  ModelWeights w;

  const TensorInfo* embd = b.find("token_embd.weight");
  if (!embd) throw_error("{}: tensor 'token_embd.weight' is missing", file.path);
  if (embd->shape.size() < 2)
    throw_error("token_embd.weight: expected [{}, n_vocab], got {}", c.n_embd, shape_str(embd->shape));
  if (c.n_vocab == 0) c.n_vocab = embd->shape[1];
  w.token_embd = &b.require("token_embd.weight", {c.n_embd, c.n_vocab});

  w.output_norm = b.vector("output_norm.weight", c.n_embd);
  if (b.find("output.weight")) {
    w.output = &b.require("output.weight", {c.n_embd, c.n_vocab});
  } else {
    w.output = w.token_embd;  // tied embeddings (SmolLM2, Llama 3.2 1B/3B, ...)
    w.tied_embeddings = true;
  }

  if (const TensorInfo* freqs = b.find("rope_freqs.weight")) {
    c.rope_freq_factors = b.vector("rope_freqs.weight", c.n_rot / 2);
    (void)freqs;
  }

  const int64_t q = c.q_dim(), kv = c.kv_dim();
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights l;
    l.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    l.wq = &b.require(p + "attn_q.weight", {c.n_embd, q});
    l.wk = &b.require(p + "attn_k.weight", {c.n_embd, kv});
    l.wv = &b.require(p + "attn_v.weight", {c.n_embd, kv});
    l.wo = &b.require(p + "attn_output.weight", {q, c.n_embd});
    l.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd);
    l.ffn_gate = &b.require(p + "ffn_gate.weight", {c.n_embd, c.n_ff});
    l.ffn_up = &b.require(p + "ffn_up.weight", {c.n_embd, c.n_ff});
    l.ffn_down = &b.require(p + "ffn_down.weight", {c.n_ff, c.n_embd});
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace jitllm
