// A hybrid's recurrent state (LFM2's short convolutions, tiny-lfm2: conv, attention, conv, conv,
// attention) kept as per-position rows beside the KV: a prompt gives the same logits in one step,
// in chunks of every size and token by token; a fork continues like its source truncated; a
// truncated session continues like a fresh one; sessions stepped together equal sessions alone;
// the layers' rows are f32 whatever the cache type. (Against transformers: FamilyOracle/lfm2.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "convert/synth.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "runtime/session_fork.h"

namespace jitllm {
namespace {

const std::vector<int32_t> kPrompt = {1, 450, 439, 293, 110, 289, 307, 122, 113, 285, 114,
                                      123, 300, 17, 42, 511, 3, 77, 260, 401};

std::string tiny_lfm2() {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("jitllm_tiny_lfm2_" + std::to_string(::getpid()) + ".gguf")).string();
    write_synth_model(p, "tiny-lfm2", "q8_0", 5);
    return p;
  }();
  return path;
}

std::unique_ptr<Engine> make_engine(const char* kernels = "reference") {
  EngineOptions o;
  o.cpu_kernels = kernels;
  o.kv_page_tokens = 8;  // the prompt spans three pages
  return std::make_unique<Engine>(load_model_file(tiny_lfm2()), o);
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(HybridState, TheConvolutionRowsAreF32AndBesideTheKv) {
  auto e = make_engine();
  const Config& c = e->config();
  EXPECT_EQ(c.arch, "lfm2");
  EXPECT_EQ(c.shortconv_l_cache, 3);
  const std::vector<bool> conv = {true, false, true, true, false};
  for (int il = 0; il < c.n_layer; ++il) {
    EXPECT_EQ(c.is_recurrent(il), conv[size_t(il)]) << il;
    const LayerKv kv = e->model().layer_kv(il);
    EXPECT_EQ(kv.f32, conv[size_t(il)]) << il;
    EXPECT_EQ(kv.k_dim, conv[size_t(il)] ? c.n_embd : c.k_dim_of(il)) << il;
    EXPECT_EQ(kv.v_dim, conv[size_t(il)] ? 0 : c.v_dim_of(il)) << il;
  }
}

TEST(HybridState, ChunksOfEverySizeGiveTheSameLogits) {
  for (const char* kernels : {"reference", "jit"}) {
    auto e = make_engine(kernels);
    auto whole = e->new_session();
    const std::vector<float> ref = e->prefill(*whole, kPrompt, true);
    for (const int64_t chunk : {int64_t(1), int64_t(2), int64_t(3), int64_t(7), int64_t(8)}) {
      auto s = e->new_session();
      const std::vector<float> got = e->prefill(*s, kPrompt, true, chunk);
      // Chunks run other matmul shapes (summation order): close, not bitwise.
      EXPECT_LT(max_diff(got, ref), 2e-3f) << kernels << " chunk " << chunk;
    }
  }
}

TEST(HybridState, ForksAndTruncationCarryTheState) {
  auto e = make_engine();
  for (const int64_t cut : {int64_t(1), int64_t(2), int64_t(7), int64_t(8), int64_t(9), int64_t(19)}) {
    auto base = e->new_session();
    e->prefill(*base, kPrompt, false);
    auto fork = fork_session(*e, *base, cut);
    auto fresh = e->new_session();
    e->prefill(*fresh, kPrompt, false);
    fresh->truncate(cut);
    const std::vector<int32_t> more = {5, 6, 7, 8};
    EXPECT_EQ(e->prefill(*fork, more, true), e->prefill(*fresh, more, true)) << "cut " << cut;
    // And both equal a session that only ever saw the first `cut` tokens, then the rest.
    auto straight = e->new_session();
    std::vector<int32_t> all(kPrompt.begin(), kPrompt.begin() + cut);
    all.insert(all.end(), more.begin(), more.end());
    const std::vector<float> logits = e->prefill(*straight, all, true);
    auto again = fork_session(*e, *base, cut);
    const std::vector<float> tail = e->prefill(*again, more, true);
    EXPECT_LT(max_diff(tail, std::vector<float>(logits.end() - ptrdiff_t(tail.size()), logits.end())), 2e-3f)
        << "cut " << cut;
  }
}

TEST(HybridState, SessionsTogetherEqualSessionsAlone) {
  auto e = make_engine();
  auto a = e->new_session(), b = e->new_session();
  const std::vector<int32_t> pa(kPrompt.begin(), kPrompt.begin() + 11), pb(kPrompt.begin() + 4, kPrompt.end());
  e->prefill(*a, pa, false);
  e->prefill(*b, pb, false);
  auto a1 = e->new_session(), b1 = e->new_session();
  e->prefill(*a1, pa, false);
  e->prefill(*b1, pb, false);
  for (int32_t t : {9, 10, 11}) {
    const int32_t ta = t, tb = t + 100;
    const StepInput both[] = {{a.get(), std::span<const int32_t>(&ta, 1)}, {b.get(), std::span<const int32_t>(&tb, 1)}};
    const std::vector<float> together = e->step(both);
    const std::vector<float> alone_a = e->decode(*a1, ta), alone_b = e->decode(*b1, tb);
    const size_t v = alone_a.size();
    EXPECT_LT(max_diff(std::vector<float>(together.begin(), together.begin() + ptrdiff_t(v)), alone_a), 1e-5f);
    EXPECT_LT(max_diff(std::vector<float>(together.begin() + ptrdiff_t(v), together.end()), alone_b), 1e-5f);
  }
}

}  // namespace
}  // namespace jitllm
