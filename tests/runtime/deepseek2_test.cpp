// The deepseek2 family on jitllm synth's tiny-deepseek2 (latent 256 + rope 32, 4 heads of 64 +
// 32 / 64, a dense first layer, 8 experts with a shared one, YaRN x4 with DeepSeek's mscale):
// what each layer keeps per position is the latent and its rope part (one plane, no V), the
// attention scale follows llama.cpp's mscale rule, a prompt gives the same logits in one step
// and in chunks of 7 (the latent cache read back by later chunks), decode continues it, and the
// reference and generated CPU kernels agree; and layer 0's attention equals plain multi-head
// attention written here in double, each head's K and V decompressed from the latent through
// attn_k_b / attn_v_b for every position (the form the absorbed one must equal).
// transformers' own numbers are in FamilyOracle.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "convert/synth.h"
#include "core/tuning.h"
#include "graph/rope.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

const std::string& tiny_deepseek2(const char* mix = "q8_0") {
  static std::map<std::string, std::string> paths;
  std::string& path = paths[mix];
  if (path.empty()) {
    path = (fs::temp_directory_path() /
            ("jlm_ds2_" + std::string(mix) + "_" + std::to_string(::getpid()) + ".gguf")).string();
    write_synth_model(path, "tiny-deepseek2", mix, 7);
  }
  return path;
}

class Deepseek2 : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    for (const char* mix : {"q8_0", "f16"}) fs::remove(tiny_deepseek2(mix));
  }
};

// A tensor of the file as floats (ne order, row after row).
std::vector<float> floats(const ModelFile& f, const std::string& name) {
  for (const TensorInfo& t : f.tensors)
    if (t.name == name) {
      std::vector<float> out(static_cast<size_t>(t.elements()));
      const size_t row = t.bytes / size_t(t.rows());
      for (int64_t r = 0; r < t.rows(); ++r)
        dequantize_row(t.type, t.data + size_t(r) * row, out.data() + r * t.shape[0], t.shape[0]);
      return out;
    }
  ADD_FAILURE() << name << " missing";
  return {};
}

// x [n, in] . w^T for w [in, out] in ne order: [n, out].
std::vector<double> product(const std::vector<double>& x, int64_t n, const std::vector<float>& w,
                            int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(n * out), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < out; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i) acc += x[size_t(r * in + i)] * w[size_t(j * in + i)];
      y[size_t(r * out + j)] = acc;
    }
  return y;
}

// Pairs (2i, 2i + 1) of v [n_rot] rotated for `pos` by the engine's tables.
void rope_pairs(double* v, int64_t pos, const RopeParams& p) {
  float corr[2];
  yarn_corr_dims(p, corr);
  std::vector<float> cache(size_t(p.n_rot));
  rope_cache(float(pos), p, corr, cache.data());
  for (int i = 0; i < p.n_rot; i += 2) {
    const double c = cache[size_t(i)], s = cache[size_t(i) + 1], a = v[i], b = v[i + 1];
    v[i] = a * c - b * s;
    v[i + 1] = a * s + b * c;
  }
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b, float& scale) {
  float d = 0;
  scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return d;
}

TEST_F(Deepseek2, CacheKeepsTheLatentAndScalesFollowLlamaCpp) {
  EngineOptions o;
  o.kv_page_tokens = 16;
  Engine engine(load_model_file(tiny_deepseek2()), o);
  const Config& c = engine.config();
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.head_dim, 256 + 32);
  EXPECT_EQ(c.head_dim_v, 256);
  EXPECT_EQ(c.head_dim_k_mla, 96);
  EXPECT_EQ(c.head_dim_v_mla, 64);
  EXPECT_EQ(c.n_ff_shexp, 256);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 1.5f);
  // llama.cpp: the rotation's own factor cancelled (mscale = mscale_all_dim), the scores scaled
  // by get_mscale(4, 0.707)^2 / sqrt(96).
  const float m = 0.1f * 0.707f * std::log(4.0f) + 1.0f;
  EXPECT_NEAR(c.yarn_attn_factor * (1.0f + 0.1f * std::log(4.0f)), 1.0f, 1e-6f);
  EXPECT_NEAR(c.attn_scale, m * m / std::sqrt(96.0f), 1e-6f);
  // One plane of 288 per layer and position: K rows [latent, k_pe], V their first 256.
  const KvLayout kv = engine.model().kv_layout(16, QuantType::F16);
  ASSERT_EQ(kv.layers.size(), 2u);
  for (int il = 0; il < 2; ++il) {
    EXPECT_EQ(kv.layer(il).k_dim, 288);
    EXPECT_EQ(kv.layer(il).v_dim, 0);
  }
  EXPECT_EQ(kv.page_bytes(), size_t(16) * 288 * 2 * 2);
}

TEST_F(Deepseek2, ChunksDecodeAndKernelsAgree) {
  std::vector<int32_t> ids = {1};
  for (int i = 0; i < 39; ++i) ids.push_back(3 + (i * 53 + 7) % 500);
  std::vector<std::vector<float>> last_rows;
  for (const char* kernels : {"reference", "jit"}) {
    SCOPED_TRACE(kernels);
    EngineOptions o;
    o.cpu_kernels = kernels;
    o.kv_type = QuantType::F32;
    Engine engine(load_model_file(tiny_deepseek2()), o);
    const int64_t V = engine.config().n_vocab;
    auto whole = engine.new_session();
    const std::vector<float> one = engine.prefill(*whole, ids, true, 256);
    auto chunked = engine.new_session();
    const std::vector<float> seven = engine.prefill(*chunked, ids, true, 7);
    float scale = 0;
    const float d = max_abs_diff(seven, one, scale);
    EXPECT_LT(d, 1e-3f * scale) << "chunks of 7 against one step: " << d << " of " << scale;
    // Decoding the prompt's last token after the rest gives that row again.
    auto stepwise = engine.new_session();
    engine.prefill(*stepwise, std::span<const int32_t>(ids.data(), ids.size() - 1), false, 256);
    const std::vector<float> dec = engine.decode(*stepwise, ids.back());
    const std::vector<float> want(one.end() - V, one.end());
    const float dd = max_abs_diff(dec, want, scale);
    EXPECT_LT(dd, 1e-3f * scale) << "decode against the prompt's last row";
    last_rows.push_back(want);
  }
  float scale = 0;
  const float d = max_abs_diff(last_rows[1], last_rows[0], scale);
  EXPECT_GT(scale, 0.1f);
  EXPECT_LT(d, 1e-2f * scale) << "generated kernels against the reference";
}

// Older converters' GGUFs: attn_kv_b unsplit, with n_head KV heads of the decompressed widths in
// the metadata. The same weights in that form (kv_b built from the split attn_k_b / attn_v_b)
// run to the split form's logits; only attn_k_b's products differ (F32 after the transposition,
// whose activations are not rounded to F16 as the F16 weights' are).
TEST_F(Deepseek2, UnsplitKvBRunsLikeTheSplitForm) {
  const std::string split = tiny_deepseek2("f16");
  const ModelFile f = open_model_file(split);
  Metadata md = f.metadata;
  md.erase("deepseek2.attention.key_length_mla");
  md.erase("deepseek2.attention.value_length_mla");
  md.set("deepseek2.attention.head_count_kv", Value::u32(4));
  md.set("deepseek2.attention.key_length", Value::u32(96));
  md.set("deepseek2.attention.value_length", Value::u32(64));
  const int64_t H = 4, R = 256, nope = 64, hv = 64;
  std::vector<TensorInfo> ts;
  std::vector<std::vector<uint16_t>> kv_b(2);
  for (const TensorInfo& t : f.tensors) {
    if (t.name.ends_with("attn_v_b.weight")) continue;
    if (!t.name.ends_with("attn_k_b.weight")) {
      ts.push_back(t);
      continue;
    }
    const std::string blk = t.name.substr(0, t.name.size() - std::string("attn_k_b.weight").size());
    const int il = blk == "blk.0." ? 0 : 1;
    const auto* kb = reinterpret_cast<const uint16_t*>(t.data);  // [nope, R, H]
    const TensorInfo* v = nullptr;
    for (const TensorInfo& u : f.tensors)
      if (u.name == blk + "attn_v_b.weight") v = &u;
    ASSERT_NE(v, nullptr);
    const auto* vb = reinterpret_cast<const uint16_t*>(v->data);  // [R, hv, H]
    std::vector<uint16_t>& w = kv_b[size_t(il)];
    w.resize(size_t(H * (nope + hv) * R));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < R; ++c) {
        for (int64_t d = 0; d < nope; ++d)
          w[size_t((h * (nope + hv) + d) * R + c)] = kb[size_t((h * R + c) * nope + d)];
        for (int64_t e = 0; e < hv; ++e)
          w[size_t((h * (nope + hv) + nope + e) * R + c)] = vb[size_t((h * hv + e) * R + c)];
      }
    TensorInfo m;
    m.name = blk + "attn_kv_b.weight";
    m.type = QuantType::F16;
    m.shape = {R, H * (nope + hv)};
    m.bytes = w.size() * 2;
    m.data = reinterpret_cast<const uint8_t*>(w.data());
    ts.push_back(m);
  }
  const std::string unsplit = (fs::temp_directory_path() / ("jlm_ds2_kvb_" + std::to_string(::getpid()) + ".gguf")).string();
  write_gguf(unsplit, md, ts);
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.kv_type = QuantType::F32;
  Engine a(load_model_file(split), o), b(load_model_file(unsplit), o);
  EXPECT_EQ(b.config().head_dim_k_mla, 96);
  EXPECT_EQ(b.config().n_head_kv, 1);
  EXPECT_EQ(b.config().attn_scale, a.config().attn_scale);
  EXPECT_EQ(b.model().kv_layout(16, QuantType::F16).page_bytes(),
            a.model().kv_layout(16, QuantType::F16).page_bytes());
  std::vector<int32_t> ids = {1};
  for (int i = 0; i < 24; ++i) ids.push_back(3 + (i * 41 + 9) % 500);
  auto sa = a.new_session(), sb = b.new_session();
  const std::vector<float> la = a.prefill(*sa, ids, true, 256), lb = b.prefill(*sb, ids, true, 256);
  float scale = 0;
  const float d = max_abs_diff(lb, la, scale);
  EXPECT_GT(scale, 0.1f);
  EXPECT_LT(d, 2e-3f * scale) << "max |diff| " << d << " of " << scale;
  std::printf("unsplit attn_kv_b against the split form: max |diff| %.3g of %.3g\n", d, scale);
  fs::remove(unsplit);
}

TEST_F(Deepseek2, AbsorbedAttentionEqualsDecompressedHeads) {
  const std::string dir = (fs::temp_directory_path() / ("jlm_ds2_dump_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  const std::shared_ptr<const ModelFile> file = load_model_file(tiny_deepseek2("f16"));
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.kv_type = QuantType::F32;
  std::unique_ptr<Engine> engine;
  {
    tuning::ScopedOverride names("JITLLM_DUMP", "attn_norm,kqv"), to("JITLLM_DUMP_DIR", dir);
    engine = std::make_unique<Engine>(file, o);
  }
  const Config& c = engine->config();
  std::vector<int32_t> ids = {1};
  for (int i = 0; i < 20; ++i) ids.push_back(3 + (i * 97 + 5) % 500);
  auto s = engine->new_session();
  engine->prefill(*s, ids, false, 256);
  const int64_t n = int64_t(ids.size()), E = c.n_embd, H = c.n_head, hk = c.head_dim_k_mla;
  const int64_t hv = c.head_dim_v_mla, R = c.n_lora_kv, P = c.n_rot, nope = hk - P;
  const std::vector<float> x32 = testing::read_f32(dir + "/attn_norm.0.f32");
  const std::vector<float> ours = testing::read_f32(dir + "/kqv.0.f32");
  ASSERT_EQ(x32.size(), size_t(n * E));
  ASSERT_EQ(ours.size(), size_t(n * H * hv));
  const std::vector<double> x(x32.begin(), x32.end());
  const std::vector<double> q = product(x, n, floats(*file, "blk.0.attn_q.weight"), E, H * hk);
  const std::vector<double> kv_a = product(x, n, floats(*file, "blk.0.attn_kv_a_mqa.weight"), E, R + P);
  const std::vector<float> norm = floats(*file, "blk.0.attn_kv_a_norm.weight");
  const std::vector<float> k_b = floats(*file, "blk.0.attn_k_b.weight");  // [nope, R, H]
  const std::vector<float> v_b = floats(*file, "blk.0.attn_v_b.weight");  // [R, hv, H]
  const RopeParams rope = c.rope_params();
  // Per position: the normed latent and the rotated shared k_pe.
  std::vector<double> lat(size_t(n * R)), k_pe(size_t(n * P));
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < R; ++i) ss += kv_a[size_t(t * (R + P) + i)] * kv_a[size_t(t * (R + P) + i)];
    const double inv = 1.0 / std::sqrt(ss / double(R) + double(c.rms_eps));
    for (int64_t i = 0; i < R; ++i) lat[size_t(t * R + i)] = kv_a[size_t(t * (R + P) + i)] * inv * norm[size_t(i)];
    for (int64_t i = 0; i < P; ++i) k_pe[size_t(t * P + i)] = kv_a[size_t(t * (R + P) + R + i)];
    rope_pairs(&k_pe[size_t(t * P)], t, rope);
  }
  double worst = 0, scale = 0;
  for (int64_t h = 0; h < H; ++h) {
    // Head h's K (nope part) and V of every position, decompressed from the latent.
    std::vector<double> k_nope(size_t(n * nope), 0.0), v(size_t(n * hv), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t d = 0; d < nope; ++d)
        for (int64_t r = 0; r < R; ++r)
          k_nope[size_t(t * nope + d)] += double(k_b[size_t((h * R + r) * nope + d)]) * lat[size_t(t * R + r)];
      for (int64_t e = 0; e < hv; ++e)
        for (int64_t r = 0; r < R; ++r)
          v[size_t(t * hv + e)] += double(v_b[size_t((h * hv + e) * R + r)]) * lat[size_t(t * R + r)];
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> qh(q.begin() + (t * H + h) * hk, q.begin() + (t * H + h + 1) * hk);
      rope_pairs(qh.data() + nope, t, rope);
      std::vector<double> sc(static_cast<size_t>(t + 1));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < nope; ++d) dot += qh[size_t(d)] * k_nope[size_t(j * nope + d)];
        for (int64_t d = 0; d < P; ++d) dot += qh[size_t(nope + d)] * k_pe[size_t(j * P + d)];
        sc[size_t(j)] = dot * double(c.attn_scale);
        mx = std::max(mx, sc[size_t(j)]);
      }
      for (double& z : sc) sum += (z = std::exp(z - mx));
      for (int64_t e = 0; e < hv; ++e) {
        double want = 0;
        for (int64_t j = 0; j <= t; ++j) want += sc[size_t(j)] / sum * v[size_t(j * hv + e)];
        worst = std::max(worst, std::fabs(double(ours[size_t((t * H + h) * hv + e)]) - want));
        scale = std::max(scale, std::fabs(want));
      }
    }
  }
  // F16 weights: jitllm rounds the activations to F16 in their products (ggml's F16 vec_dot).
  EXPECT_GT(scale, 0.05);
  EXPECT_LT(worst, 5e-3 * scale) << "max |diff| " << worst << " of " << scale;
  std::printf("layer 0 attention against decompressed heads: max |diff| %.3g of %.3g\n", worst, scale);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace jitllm
