// The deepseek2 HF converter (convert/hf_deepseek2.cpp) against jitllm synth's tiny-deepseek2:
// the synth GGUF's weights written back as a DeepseekV2ForCausalLM folder (kv_b_proj rebuilt from
// attn_k_b / attn_v_b, experts one tensor each, config.json as transformers writes it) must
// convert to a model that runs to the GGUF's logits bit for bit: names, the per-head split and
// transposition of kv_b_proj, and every key (MLA lengths, routing, YaRN's mscale) as llama.cpp's
// converter writes them. Also what the converter refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/synth.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

struct HfTensor {
  std::string name, dtype;        // "F16" / "F32"
  std::vector<int64_t> shape;     // HF order (rows first)
  std::vector<uint8_t> bytes;
};

void write_safetensors(const std::string& path, const std::vector<HfTensor>& ts) {
  nlohmann::json header = nlohmann::json::object();
  size_t off = 0;
  for (const HfTensor& t : ts) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(h.data(), std::streamsize(h.size()));
  for (const HfTensor& t : ts) f.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
}

const TensorInfo& tensor(const ModelFile& f, const std::string& name) {
  for (const TensorInfo& t : f.tensors)
    if (t.name == name) return t;
  throw_error("{} missing", name);
}

// The GGUF tensor as an HF one: same bytes, shape reversed; slice `e` of a stacked one.
HfTensor as_hf(const ModelFile& f, const std::string& gguf, const std::string& hf, int64_t e = -1) {
  const TensorInfo& t = tensor(f, gguf);
  HfTensor out{hf, t.type == QuantType::F32 ? "F32" : "F16", {}, {}};
  std::vector<int64_t> shape = t.shape;
  size_t bytes = t.bytes, from = 0;
  if (e >= 0) {
    bytes = t.bytes / size_t(shape[2]);
    from = bytes * size_t(e);
    shape.pop_back();
  }
  out.shape.assign(shape.rbegin(), shape.rend());
  out.bytes.assign(t.data + from, t.data + from + bytes);
  return out;
}

class Deepseek2Hf : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("jlm_ds2_hf_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "hf");
    gguf_ = (dir_ / "tiny.gguf").string();
    write_synth_model(gguf_, "tiny-deepseek2", "f16", 5);
    const ModelFile g = open_model_file(gguf_);
    const SynthShape& s = synth_shape("tiny-deepseek2");
    std::vector<HfTensor> ts;
    ts.push_back(as_hf(g, "token_embd.weight", "model.embed_tokens.weight"));
    ts.push_back(as_hf(g, "output_norm.weight", "model.norm.weight"));
    ts.push_back(as_hf(g, "output.weight", "lm_head.weight"));
    const int64_t H = s.n_head, R = s.n_lora_kv, nope = s.qk_nope, hv = s.head_dim_v;
    for (int il = 0; il < s.n_layer; ++il) {
      const std::string b = "blk." + std::to_string(il) + ".", m = "model.layers." + std::to_string(il) + ".";
      ts.push_back(as_hf(g, b + "attn_norm.weight", m + "input_layernorm.weight"));
      ts.push_back(as_hf(g, b + "attn_q.weight", m + "self_attn.q_proj.weight"));
      ts.push_back(as_hf(g, b + "attn_kv_a_mqa.weight", m + "self_attn.kv_a_proj_with_mqa.weight"));
      ts.push_back(as_hf(g, b + "attn_kv_a_norm.weight", m + "self_attn.kv_a_layernorm.weight"));
      ts.push_back(as_hf(g, b + "attn_output.weight", m + "self_attn.o_proj.weight"));
      ts.push_back(as_hf(g, b + "ffn_norm.weight", m + "post_attention_layernorm.weight"));
      // kv_b_proj [H * (nope + hv), R]: head h's rows d < nope are column d of its attn_k_b
      // ([nope, R, H] ne: element (d, c, h)), then its attn_v_b rows ([R, hv, H]: (c, e, h)).
      const auto* kb = reinterpret_cast<const uint16_t*>(tensor(g, b + "attn_k_b.weight").data);
      const auto* vb = reinterpret_cast<const uint16_t*>(tensor(g, b + "attn_v_b.weight").data);
      HfTensor kv{m + "self_attn.kv_b_proj.weight", "F16", {H * (nope + hv), R}, {}};
      std::vector<uint16_t> w(size_t(H * (nope + hv) * R));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < R; ++c) {
          for (int64_t d = 0; d < nope; ++d)
            w[size_t((h * (nope + hv) + d) * R + c)] = kb[size_t((h * R + c) * nope + d)];
          for (int64_t e = 0; e < hv; ++e)
            w[size_t((h * (nope + hv) + nope + e) * R + c)] = vb[size_t((h * hv + e) * R + c)];
        }
      kv.bytes.resize(w.size() * 2);
      std::memcpy(kv.bytes.data(), w.data(), kv.bytes.size());
      ts.push_back(std::move(kv));
      if (il < s.n_dense_lead) {
        for (const char* p : {"gate", "up", "down"})
          ts.push_back(as_hf(g, b + "ffn_" + p + ".weight", m + "mlp." + p + "_proj.weight"));
        continue;
      }
      ts.push_back(as_hf(g, b + "ffn_gate_inp.weight", m + "mlp.gate.weight"));
      for (const char* p : {"gate", "up", "down"}) {
        for (int64_t e = 0; e < s.n_expert; ++e)
          ts.push_back(as_hf(g, b + "ffn_" + p + "_exps.weight",
                             m + "mlp.experts." + std::to_string(e) + "." + p + "_proj.weight", e));
        ts.push_back(as_hf(g, b + "ffn_" + p + "_shexp.weight", m + "mlp.shared_experts." + p + "_proj.weight"));
      }
    }
    write_safetensors((dir_ / "hf" / "model.safetensors").string(), ts);
    config_ = {{"architectures", {"DeepseekV2ForCausalLM"}}, {"model_type", "deepseek_v2"},
               {"vocab_size", s.n_vocab}, {"hidden_size", s.n_embd}, {"intermediate_size", s.n_ff},
               {"moe_intermediate_size", s.n_ff_exp}, {"num_hidden_layers", s.n_layer},
               {"num_attention_heads", H}, {"num_key_value_heads", H},
               {"max_position_embeddings", s.n_ctx}, {"rms_norm_eps", 1e-6},
               {"kv_lora_rank", R}, {"q_lora_rank", nullptr}, {"qk_nope_head_dim", nope},
               {"qk_rope_head_dim", s.n_rot}, {"v_head_dim", hv}, {"head_dim", s.n_rot},
               {"n_routed_experts", s.n_expert}, {"n_shared_experts", s.n_expert_shared},
               {"num_experts_per_tok", s.n_expert_used}, {"first_k_dense_replace", s.n_dense_lead},
               {"routed_scaling_factor", 1.5}, {"norm_topk_prob", false}, {"topk_method", "greedy"},
               {"n_group", nullptr}, {"topk_group", nullptr}, {"tie_word_embeddings", false},
               {"rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0},
                                    {"original_max_position_embeddings", s.n_ctx_orig},
                                    {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 0.707},
                                    {"mscale_all_dim", 0.707}}}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<const ModelFile> convert(const nlohmann::json& config) {
    std::ofstream((dir_ / "hf" / "config.json").string()) << config.dump(1);
    ConvertOptions o;
    o.source.skip_hf_tokenizer = true;
    const std::string jlm = (dir_ / ("hf" + std::to_string(n_++) + ".jlm")).string();
    convert_to_jlm((dir_ / "hf").string(), jlm, o);
    return load_model_file(jlm);
  }

  fs::path dir_;
  std::string gguf_;
  nlohmann::json config_;
  int n_ = 0;
};

TEST_F(Deepseek2Hf, FolderRunsLikeTheGguf) {
  const std::shared_ptr<const ModelFile> hf = convert(config_);
  EXPECT_EQ(hf->metadata.architecture(), "deepseek2");
  EngineOptions o;
  o.cpu_kernels = "reference";
  Engine a(load_model_file(gguf_), o), b(hf, o);
  EXPECT_EQ(b.config().attn_scale, a.config().attn_scale);
  EXPECT_EQ(b.config().yarn_attn_factor, a.config().yarn_attn_factor);
  std::vector<int32_t> ids = {1};
  for (int i = 0; i < 30; ++i) ids.push_back(3 + (i * 31 + 2) % 500);
  auto sa = a.new_session(), sb = b.new_session();
  const std::vector<float> la = a.prefill(*sa, ids, true, 256), lb = b.prefill(*sb, ids, true, 256);
  ASSERT_EQ(la.size(), lb.size());
  float diff = 0, scale = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    diff = std::max(diff, std::fabs(la[i] - lb[i]));
    scale = std::max(scale, std::fabs(la[i]));
  }
  EXPECT_GT(scale, 0.1f);
  EXPECT_EQ(diff, 0.0f) << "of logits up to " << scale;
}

// The routing keys each class's config says: V2's group_limited_greedy scores a group by its
// best expert (our expert_group_score "max"), V3 (and Kimi-K2's model_type) routes sigmoid over
// groups scored by their best two, renormalised.
TEST_F(Deepseek2Hf, RoutingKeysFollowTheClass) {
  nlohmann::json c = config_;
  c["topk_method"] = "group_limited_greedy";
  c["n_group"] = 4;
  c["topk_group"] = 2;
  Config v2 = Engine(convert(c), EngineOptions{}).config();
  EXPECT_EQ(v2.expert_gating, MoeGating::Softmax);
  EXPECT_EQ(v2.n_expert_groups, 4);
  EXPECT_EQ(v2.n_group_used, 2);
  EXPECT_EQ(v2.expert_group_score, MoeGroupScore::Max);
  for (const char* type : {"deepseek_v3", "kimi_k2"}) {
    c = config_;
    c["model_type"] = type;
    c["architectures"] = {"DeepseekV3ForCausalLM"};
    c["n_group"] = 4;
    c["topk_group"] = 2;
    c["norm_topk_prob"] = true;
    c["topk_method"] = "noaux_tc";
    const Config v3 = Engine(convert(c), EngineOptions{}).config();
    EXPECT_EQ(v3.expert_gating, MoeGating::Sigmoid) << type;
    EXPECT_EQ(v3.n_expert_groups, 4) << type;
    EXPECT_EQ(v3.expert_group_score, MoeGroupScore::Top2Sum) << type;
    EXPECT_TRUE(v3.expert_weights_norm) << type;
  }
}

TEST_F(Deepseek2Hf, RefusesWhatItCannotSay) {
  auto refused = [&](nlohmann::json c, const char* what) {
    try {
      convert(c);
      ADD_FAILURE() << "accepted " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  nlohmann::json c = config_;
  c["norm_topk_prob"] = true;  // transformers' DeepseekV2 never renormalises
  refused(c, "norm_topk_prob");
  c = config_;
  c["rope_parameters"]["mscale"] = 1.0;  // llama.cpp takes mscale = mscale_all_dim
  refused(c, "mscale");
  c = config_;
  c["attention_bias"] = true;
  refused(c, "attention_bias");
  c = config_;
  c["topk_method"] = "noaux_tc";
  refused(c, "topk_method");
}

}  // namespace
}  // namespace jitllm
