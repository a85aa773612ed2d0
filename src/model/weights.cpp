// Binding a family's weights by their GGUF names, with shape and format checks.
#include "model/weights.h"

#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "model/family.h"
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

  const ModelFile& file() const { return file_; }

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
    return vector_of(require(name, {n}), n);
  }
  // n values of t (all of them or its first n); a .jlm keeps a stacked expert bias
  // ([width, n_expert]) one expert a page, slice_stride apart.
  std::vector<float> vector_of(const TensorInfo& t, int64_t n) const {
    std::vector<float> out(static_cast<size_t>(n));
    const int64_t slices = t.slice_stride && t.shape.size() > 1 ? t.shape.back() : 1;
    const int64_t per = n / slices;
    for (int64_t e = 0; e < slices; ++e) {
      const uint8_t* src = t.data + uint64_t(e) * (slices > 1 ? t.slice_stride : 0);
      if (t.type == QuantType::F32)
        std::memcpy(out.data() + e * per, src, size_t(per) * sizeof(float));
      else
        dequantize_row(t.type, src, out.data() + e * per, per);
    }
    return out;
  }

 private:
  const ModelFile& file_;
  std::unordered_map<std::string, const TensorInfo*> by_name_;
};

}  // namespace

namespace shapes {
std::vector<int64_t> embd(const Config& c, int) { return {c.n_embd}; }
std::vector<int64_t> head_dim(const Config& c, int) { return {c.head_dim}; }
std::vector<int64_t> q(const Config& c, int il) { return {c.n_embd, c.q_dim_of(il)}; }
std::vector<int64_t> k(const Config& c, int il) { return {c.n_embd, c.k_dim_of(il)}; }
std::vector<int64_t> v(const Config& c, int il) { return {c.n_embd, c.v_dim_of(il)}; }
std::vector<int64_t> o(const Config& c, int il) {
  return {int64_t(c.n_head_of(il)) * c.head_dim_v, c.n_embd};
}
std::vector<int64_t> gate_up(const Config& c, int il) { return {c.n_embd, c.n_ff_of(il)}; }
std::vector<int64_t> down(const Config& c, int il) { return {c.n_ff_of(il), c.n_embd}; }
std::vector<int64_t> q_dim(const Config& c, int il) { return {c.q_dim_of(il)}; }
std::vector<int64_t> k_dim(const Config& c, int il) { return {c.k_dim_of(il)}; }
std::vector<int64_t> v_dim(const Config& c, int il) { return {c.v_dim_of(il)}; }
std::vector<int64_t> qkv(const Config& c, int il) {
  return {c.n_embd, int64_t(c.q_dim_of(il)) + c.k_dim_of(il) + c.v_dim_of(il)};
}
std::vector<int64_t> gate_up_fused(const Config& c, int il) { return {c.n_embd, 2 * int64_t(c.n_ff_of(il))}; }
std::vector<int64_t> router(const Config& c, int) { return {c.n_embd, c.n_expert}; }
std::vector<int64_t> gate_up_exps(const Config& c, int) { return {c.n_embd, c.n_ff_exp, c.n_expert}; }
std::vector<int64_t> down_exps(const Config& c, int) { return {c.n_ff_exp, c.n_embd, c.n_expert}; }
std::vector<int64_t> gate_up_shexp(const Config& c, int) { return {c.n_embd, c.n_ff_shexp}; }
std::vector<int64_t> down_shexp(const Config& c, int) { return {c.n_ff_shexp, c.n_embd}; }
std::vector<int64_t> heads(const Config& c, int il) { return {c.n_head_of(il)}; }
std::vector<int64_t> experts(const Config& c, int) { return {c.n_expert}; }
std::vector<int64_t> gate_up_exps_b(const Config& c, int) { return {c.n_ff_exp, c.n_expert}; }
std::vector<int64_t> down_exps_b(const Config& c, int) { return {c.n_embd, c.n_expert}; }
std::vector<int64_t> ff(const Config& c, int il) { return {c.n_ff_of(il)}; }
std::vector<int64_t> conv_in(const Config& c, int) { return {c.n_embd, 3 * int64_t(c.n_embd)}; }
std::vector<int64_t> conv_kernel(const Config& c, int) { return {c.shortconv_l_cache, c.n_embd}; }
std::vector<int64_t> embd_square(const Config& c, int) { return {c.n_embd, c.n_embd}; }
std::vector<int64_t> mla_q(const Config& c, int il) {
  return {c.n_embd, int64_t(c.n_head_of(il)) * c.head_dim_k_mla};
}
std::vector<int64_t> mla_q_a(const Config& c, int) { return {c.n_embd, c.n_lora_q}; }
std::vector<int64_t> mla_q_a_norm(const Config& c, int) { return {c.n_lora_q}; }
std::vector<int64_t> mla_q_b(const Config& c, int il) {
  return {c.n_lora_q, int64_t(c.n_head_of(il)) * c.head_dim_k_mla};
}
std::vector<int64_t> mla_kv_a(const Config& c, int) { return {c.n_embd, int64_t(c.n_lora_kv) + c.n_rot}; }
std::vector<int64_t> mla_kv_a_norm(const Config& c, int) { return {c.n_lora_kv}; }
std::vector<int64_t> mla_k_b(const Config& c, int il) {
  return {c.qk_nope_dim(), c.n_lora_kv, c.n_head_of(il)};
}
std::vector<int64_t> mla_v_b(const Config& c, int il) {
  return {c.n_lora_kv, c.head_dim_v_mla, c.n_head_of(il)};
}
std::vector<int64_t> mla_kv_b(const Config& c, int il) {
  return {c.n_lora_kv, int64_t(c.n_head_of(il)) * (c.qk_nope_dim() + c.head_dim_v_mla)};
}
std::vector<int64_t> mla_o(const Config& c, int il) {
  return {int64_t(c.n_head_of(il)) * c.head_dim_v_mla, c.n_embd};
}
}  // namespace shapes

std::vector<LayerTensor> with_moe_tensors(std::vector<LayerTensor> table) {
  using enum LayerPart;
  for (LayerTensor& t : table) {
    const std::string name = t.name;
    if (name == "ffn_gate.weight" || name == "ffn_up.weight" || name == "ffn_down.weight") t.part = Dense;
  }
  const LayerTensor moe[] = {
      {"ffn_gate_inp.weight", &LayerWeights::ffn_gate_inp, shapes::router, false, Moe},
      {"ffn_gate_exps.weight", &LayerWeights::ffn_gate_exps, shapes::gate_up_exps, false, Moe},
      {"ffn_up_exps.weight", &LayerWeights::ffn_up_exps, shapes::gate_up_exps, false, Moe},
      {"ffn_down_exps.weight", &LayerWeights::ffn_down_exps, shapes::down_exps, false, Moe},
      {"ffn_gate_inp_shexp.weight", &LayerWeights::ffn_gate_inp_shexp, shapes::embd, true, Moe},
      {"ffn_gate_shexp.weight", &LayerWeights::ffn_gate_shexp, shapes::gate_up_shexp, true, Moe},
      {"ffn_up_shexp.weight", &LayerWeights::ffn_up_shexp, shapes::gate_up_shexp, true, Moe},
      {"ffn_down_shexp.weight", &LayerWeights::ffn_down_shexp, shapes::down_shexp, true, Moe},
  };
  table.insert(table.end(), std::begin(moe), std::end(moe));
  return table;
}

namespace {

// Matrix e of a stacked [k, rows, n_expert] tensor: its bytes (slice e of a .jlm's split tensor,
// or the e-th equal part of a GGUF's contiguous one) as a [k, rows] tensor of its own.
TensorInfo expert_matrix(const TensorInfo& t, int64_t e) {
  TensorInfo m;
  const int64_t n = t.shape[2];
  const uint64_t part = t.bytes / uint64_t(n), stride = t.slice_stride ? t.slice_stride : part;
  m.name = t.name + "[" + std::to_string(e) + "]";
  m.type = t.type;
  m.shape = {t.shape[0], t.shape[1]};
  m.offset = t.offset + uint64_t(e) * stride;
  m.bytes = size_t(part);
  m.data = t.data + uint64_t(e) * stride;
  return m;
}

// [n_expert] the parts of a stacked [width, n_expert] bias (empty: none).
std::vector<std::vector<float>> expert_vectors(const std::vector<float>& stacked, int n_expert) {
  std::vector<std::vector<float>> out;
  if (stacked.empty()) return out;
  const size_t width = stacked.size() / size_t(n_expert);
  for (int e = 0; e < n_expert; ++e)
    out.emplace_back(stacked.begin() + ptrdiff_t(size_t(e) * width),
                     stacked.begin() + ptrdiff_t(size_t(e + 1) * width));
  return out;
}

// The unsplit attn_kv_b ([n_lora_kv, n_head * (nope + v)]): head h's v rows are a view of their
// bytes ([n_lora_kv, v]); its k rows ([nope] of n_lora_kv) are dequantized and transposed into
// l.k_b_owned, so q_nope . k_b maps into the latent as the split attn_k_b does ([nope, n_lora_kv]).
void split_kv_b(const TensorInfo& kv_b, const Config& c, int il, LayerWeights& l) {
  const int64_t H = c.n_head_of(il), R = c.n_lora_kv, nope = c.qk_nope_dim(), v = c.head_dim_v_mla;
  const size_t row = row_bytes(kv_b.type, R);
  std::vector<float> deq(static_cast<size_t>(R));
  l.k_b_owned.assign(size_t(H * R * nope), 0.0f);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t d = 0; d < nope; ++d) {
      dequantize_row(kv_b.type, kv_b.data + size_t(h * (nope + v) + d) * row, deq.data(), R);
      for (int64_t r = 0; r < R; ++r) l.k_b_owned[size_t((h * R + r) * nope + d)] = deq[size_t(r)];
    }
    TensorInfo vb;
    vb.name = kv_b.name + "[v " + std::to_string(h) + "]";
    vb.type = kv_b.type;
    vb.shape = {R, v};
    vb.offset = kv_b.offset + uint64_t(h * (nope + v) + nope) * row;
    vb.bytes = row * size_t(v);
    vb.data = kv_b.data + size_t(h * (nope + v) + nope) * row;
    l.v_b_head.push_back(vb);
  }
  for (int64_t h = 0; h < H; ++h) {
    TensorInfo kb;
    kb.name = kv_b.name + "[k " + std::to_string(h) + "]";
    kb.type = QuantType::F32;
    kb.shape = {nope, R};
    kb.bytes = size_t(R * nope) * sizeof(float);
    kb.data = reinterpret_cast<const uint8_t*>(l.k_b_owned.data() + h * R * nope);
    l.k_b_head.push_back(kb);
  }
}

std::vector<TensorInfo> expert_matrices(const TensorInfo& t) {
  std::vector<TensorInfo> out;
  for (int64_t e = 0; e < t.shape[2]; ++e) out.push_back(expert_matrix(t, e));
  return out;
}

// A "blk.N." tensor past the configured layers means the metadata undercounts them (llama.cpp
// refuses such a file too: it counts the tensors it did not load).
void check_no_layer_past(const ModelFile& file, const Config& c) {
  for (const TensorInfo& t : file.tensors) {
    if (!t.name.starts_with("blk.")) continue;
    const size_t dot = t.name.find('.', 4);
    const std::string index = t.name.substr(4, dot == std::string::npos ? 0 : dot - 4);
    if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (std::stoll(index) >= c.n_layer)
      throw_error("{}: metadata {}.block_count is {} but tensor '{}' exists", file.path, c.arch,
                  c.n_layer, t.name);
  }
}

// An encoder's model-wide tensors (BERT): token types, the embeddings' LayerNorm and, for a
// cross-encoder, the classification head (cls.weight [n_embd, n_embd] and cls.output.weight
// [n_embd, n_class], each with its bias); no output norm or logits head.
void bind_encoder_weights(const Binder& b, const Config& c, ModelWeights& w) {
  if (const TensorInfo* t = b.find("token_types.weight")) {
    if (t->shape.empty() || t->shape[0] != c.n_embd)
      throw_error("token_types.weight: expected [{}, n_types], got {}", c.n_embd, shape_str(t->shape));
    w.token_type0 = b.vector_of(*t, t->elements());
    w.n_token_types = t->elements() / c.n_embd;
    w.token_types = &b.require("token_types.weight", {c.n_embd, w.n_token_types});
    w.token_type0.resize(size_t(c.n_embd));
    w.head_tensors.push_back(t);
  }
  w.token_embd_norm = b.vector("token_embd_norm.weight", c.n_embd);
  if (b.find("token_embd_norm.bias")) w.token_embd_norm_b = b.vector("token_embd_norm.bias", c.n_embd);
  if (b.find("cls.weight")) {  // the pooler (llama.cpp's converter drops it; HF's models have it)
    w.cls = &b.require("cls.weight", {c.n_embd, c.n_embd});
    w.cls_b = b.vector("cls.bias", c.n_embd);
    w.head_tensors.push_back(w.cls);
  }
  if (const TensorInfo* out = b.find("cls.output.weight")) {
    if (out->shape.size() < 2 || out->shape[0] != c.n_embd)
      throw_error("cls.output.weight: expected [{}, n_class], got {}", c.n_embd, shape_str(out->shape));
    w.cls_out = &b.require("cls.output.weight", {c.n_embd, out->shape[1]});
    if (b.find("cls.output.bias")) w.cls_out_b = b.vector("cls.output.bias", out->shape[1]);
    w.head_tensors.push_back(w.cls_out);
  } else if (w.cls) {
    throw_error("{}: cls.weight without a cls.output.weight of [{}, n_class]", b.file().path, c.n_embd);
  }
}

}  // namespace

ModelWeights bind_weights(const ModelFile& file, Config& c, std::span<const LayerTensor> table) {
  Binder b(file);
  ModelWeights w;
  check_no_layer_past(file, c);

  const TensorInfo* embd = b.find("token_embd.weight");
  if (!embd) throw_error("{}: tensor 'token_embd.weight' is missing", file.path);
  if (embd->shape.size() < 2)
    throw_error("token_embd.weight: expected [{}, n_vocab], got {}", c.n_embd, shape_str(embd->shape));
  if (c.n_vocab == 0) c.n_vocab = embd->shape[1];
  w.token_embd = &b.require("token_embd.weight", {c.n_embd, c.n_vocab});

  if (!c.family || c.family->lm_head) {
    const char* norm = c.family ? c.family->output_norm_name : "output_norm.weight";
    w.output_norm = b.vector(norm, c.n_embd);
    w.head_tensors.push_back(b.find(norm));
    if (b.find("output.weight")) {
      w.output = &b.require("output.weight", {c.n_embd, c.n_vocab});
      w.head_tensors.push_back(w.output);
    } else {
      w.output = w.token_embd;  // tied embeddings (SmolLM2, Llama 3.2 1B/3B, ...)
      w.tied_embeddings = true;
    }
  } else {
    bind_encoder_weights(b, c, w);
  }
  if (c.family && c.family->learned_positions)
    w.position_embd = &b.require("position_embd.weight", {c.n_embd, c.n_ctx_train});

  if (b.find("rope_freqs.weight")) c.rope_freq_factors = b.vector("rope_freqs.weight", c.n_rot / 2);
  if (b.find("rope_factors_short.weight"))
    c.rope_freq_factors = b.vector("rope_factors_short.weight", c.n_rot / 2);
  if (b.find("rope_factors_long.weight"))
    c.rope_freq_factors_long = b.vector("rope_factors_long.weight", c.n_rot / 2);

  bool runs_experts = false;
  for (const LayerTensor& lt : table) runs_experts |= lt.part == LayerPart::Moe;
  if (c.n_expert > 0 && !runs_experts)
    throw_error("{}: the model has {} experts per layer; the {} family here runs dense layers only",
                file.path, c.n_expert, c.family ? c.family->name : c.arch);
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights l;
    std::vector<const TensorInfo*> bound;
    const bool moe = runs_experts && c.n_expert > 0 && b.find(p + "ffn_gate_inp.weight");
    for (const LayerTensor& lt : table) {
      if (lt.part == (moe ? LayerPart::Dense : LayerPart::Moe)) continue;
      const std::string name = p + lt.name;
      const TensorInfo* t = b.find(name);
      if (!t && lt.optional) continue;
      const std::vector<int64_t> shape = lt.shape(c, il);
      const TensorInfo& info = b.require(name, shape);
      bound.push_back(&info);
      if (const auto* m = std::get_if<const TensorInfo* LayerWeights::*>(&lt.slot))
        l.*(*m) = &info;
      else
        l.*std::get<std::vector<float> LayerWeights::*>(lt.slot) = b.vector_of(info, info.elements());
    }
    if (c.n_head_kv_of(il) == 0) {  // a recurrent layer (LFM2's convolution)
      if (!l.shortconv_in || !l.shortconv_out || l.shortconv_conv.empty())
        throw_error("{}: layer {} has no KV heads but no {}shortconv.{{in_proj,conv,out_proj}}.weight",
                    file.path, il, p);
    } else if (l.is_mla()) {  // q directly or through its LoRA; kv_b's halves cut per head
      if (!l.wq && !(l.wq_a && l.wq_b && !l.attn_q_a_norm.empty()))
        throw_error("{}: layer {} has neither {}attn_q.weight nor attn_q_a/attn_q_a_norm/attn_q_b",
                    file.path, il, p);
      if (l.wk_b && l.wv_b) {
        l.k_b_head = expert_matrices(*l.wk_b);
        l.v_b_head = expert_matrices(*l.wv_b);
      } else if (l.wkv_b) {
        split_kv_b(*l.wkv_b, c, il, l);
      } else {
        throw_error("{}: layer {} has neither {}attn_k_b/attn_v_b nor attn_kv_b", file.path, il, p);
      }
    } else if (!l.wqkv && !(l.wq && l.wk && l.wv)) {
      throw_error("{}: layer {} has neither {}attn_qkv.weight nor attn_q/attn_k/attn_v", file.path,
                  il, p);
    }
    if (moe) {
      l.gate_exp = expert_matrices(*l.ffn_gate_exps);
      l.up_exp = expert_matrices(*l.ffn_up_exps);
      l.down_exp = expert_matrices(*l.ffn_down_exps);
      l.gate_exp_b = expert_vectors(l.ffn_gate_exps_b, c.n_expert);
      l.up_exp_b = expert_vectors(l.ffn_up_exps_b, c.n_expert);
      l.down_exp_b = expert_vectors(l.ffn_down_exps_b, c.n_expert);
      const bool shared = l.ffn_gate_shexp && l.ffn_up_shexp && l.ffn_down_shexp;
      if (!shared && (l.ffn_gate_shexp || l.ffn_up_shexp || l.ffn_down_shexp || l.ffn_gate_inp_shexp))
        throw_error("{}: layer {} has part of a shared expert ({}ffn_{{gate,up,down}}_shexp.weight)",
                    file.path, il, p);
      if (l.ffn_gate_inp_shexp) {
        l.shared_gate_matrix = *l.ffn_gate_inp_shexp;
        l.shared_gate_matrix.shape = {c.n_embd, 1};
      }
    }
    w.layers.push_back(std::move(l));
    w.layer_tensors.push_back(std::move(bound));
  }
  return w;
}

}  // namespace jitllm
