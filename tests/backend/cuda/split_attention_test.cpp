// Split-K decode attention (split_attention.cpp) against the CPU reference (tiled f32 path) and
// the single-CTA attention kernel: one decode row per sequence at 1, 100, 4096 and 10000
// positions, paged f16 KV (pages of 256), GQA 32/8 at head sizes 64 and 128; rows of at most 256
// keys (one split) give the single-CTA kernel's bits, longer rows agree to float rounding; the q8
// copy of the output too. An engine run with JITLLM_CUDA_SPLITK=8 against one with 0, and the
// automatic choice across the context length where it switches. Label gpu.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cpu/reference_kernels.h"
#include "core/fp16.h"
#include "cuda_test_util.h"
#include "runtime/engine.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm::cuda::test {
namespace {

void check_split(int head_dim, int max_splits, bool sinks = false) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(uint32_t(head_dim + max_splits));
  const int n_head = 32, n_head_kv = 8, kv_dim = n_head_kv * head_dim;
  const int64_t page_tokens = 256;
  const size_t row_bytes = size_t(kv_dim) * 2, plane = row_bytes * size_t(page_tokens);
  const size_t page_bytes = 2 * plane;
  const std::vector<int64_t> lens = {1, 100, 4096, 10000};
  const int64_t n_rows = int64_t(lens.size());
  std::vector<std::vector<std::vector<uint8_t>>> host(lens.size());  // [row][page] bytes
  for (size_t r = 0; r < lens.size(); ++r) {
    for (int64_t p = 0; p < (lens[r] + page_tokens - 1) / page_tokens; ++p) {
      std::vector<uint8_t> bytes(page_bytes);
      const auto vals = random_floats(page_bytes / 2, rng, -2, 2);
      for (size_t i = 0; i < vals.size(); ++i) {
        const uint16_t h = f32_to_fp16(vals[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
      host[r].push_back(std::move(bytes));
    }
  }
  const auto q = random_floats(size_t(n_rows * n_head * head_dim), rng, -1.5, 1.5);
  std::vector<std::vector<uint8_t*>> page_ptrs(lens.size());
  std::vector<PagedRows> k_rows, v_rows;
  for (size_t r = 0; r < lens.size(); ++r) {
    for (auto& p : host[r]) page_ptrs[r].push_back(p.data());
    k_rows.push_back(PagedRows{page_ptrs[r].data(), page_tokens, 0, row_bytes});
    v_rows.push_back(PagedRows{page_ptrs[r].data(), page_tokens, plane, row_bytes});
  }
  std::vector<float> ref(q.size());
  AttentionArgs a;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = head_dim;
  a.scale = 1.0f / std::sqrt(float(head_dim));
  a.kv_type = QuantType::F16;
  a.n_rows = n_rows;
  a.q = q.data();
  a.out = ref.data();
  a.n_kv = lens.data();
  a.k = k_rows.data();
  a.v = v_rows.data();
  a.f32_tiles = true;
  std::vector<float> sink(static_cast<size_t>(n_head));  // gpt-oss's: below and above the scores
  for (int h = 0; h < n_head; ++h) sink[size_t(h)] = float(h % 4) * 2.0f - 3.0f;
  if (sinks) a.sinks = sink.data();
  reference_kernels().attention(a);

  std::vector<DeviceBuffer> dev_pages;
  std::vector<uint64_t> table;
  std::vector<int32_t> row_pt, nkv;
  for (size_t r = 0; r < lens.size(); ++r) {
    row_pt.push_back(int32_t(table.size()));
    nkv.push_back(int32_t(lens[r]));
    for (auto& p : host[r]) {
      dev_pages.emplace_back(page_bytes);
      dev_pages.back().upload(p.data(), page_bytes);
      table.push_back(dev_pages.back().get());
    }
  }
  DeviceBuffer dtable(table.size() * 8), drow_pt(row_pt.size() * 4), dnkv(nkv.size() * 4);
  dtable.upload(table.data(), dtable.bytes());
  drow_pt.upload(row_pt.data(), drow_pt.bytes());
  dnkv.upload(nkv.data(), dnkv.bytes());
  const int64_t width = int64_t(n_head) * head_dim;
  DeviceBuffer dq = to_device(q), one(q.size() * 4), split(q.size() * 4);
  DeviceBuffer q8a(CudaKernels::q8_bytes(n_rows, width)), q8b(CudaKernels::q8_bytes(n_rows, width));
  const size_t dso = CudaKernels::q8_ds_offset(n_rows, width);
  DeviceBuffer scratch(CudaKernels::split_scratch_bytes(n_rows, n_head, head_dim, max_splits));
  check(driver().cuMemsetD8Async(split.get(), 0xff, split.bytes(), G->stream->get()), "memset");
  CudaKernels::AttentionCall c;
  c.q = dq.get();
  c.pages = dtable.get();
  c.row_pt = drow_pt.get();
  c.n_kv = dnkv.get();
  c.voff = plane;
  c.page_tokens = int(page_tokens);
  c.row_bytes = int(row_bytes);
  c.n_rows = n_rows;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.scale = a.scale;
  c.kv_f16 = true;
  c.keys_per_step = 1;  // the one-key loop: a row of one split shares its bits
  DeviceBuffer dsinks = to_device(sink);
  if (sinks) c.sinks = dsinks.get();
  c.out = one.get();
  c.q8 = Q8Buffers{q8a.get(), q8a.get() + dso};
  G->kernels->attention(c, *G->stream);
  c.out = split.get();
  c.q8 = Q8Buffers{q8b.get(), q8b.get() + dso};
  for (int rep = 0; rep < 2; ++rep) G->kernels->attention_split(c, max_splits, scratch.get(), *G->stream);
  G->stream->sync();
  const auto got = from_device(split, q.size()), single = from_device(one, q.size());
  const auto qa = [&] {
    std::vector<uint8_t> v(q8a.bytes());
    q8a.download(v.data(), v.size());
    return v;
  }();
  std::vector<uint8_t> qb(q8b.bytes());
  q8b.download(qb.data(), qb.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    const size_t o = size_t(r * width);
    const std::vector<float> g(got.begin() + long(o), got.begin() + long(o + size_t(width)));
    const std::vector<float> s(single.begin() + long(o), single.begin() + long(o + size_t(width)));
    const std::vector<float> f(ref.begin() + long(o), ref.begin() + long(o + size_t(width)));
    const double err = rel_error(g, f), vs_single = rel_error(g, s);
    const int splits = CudaKernels::split_count(lens[size_t(r)], max_splits);
    // f32 sums over up to 10000 keys in another order than the reference's tiles.
    const double tol = lens[size_t(r)] > 1000 ? 3e-5 : 1e-5;
    EXPECT_LT(err, tol) << lens[size_t(r)] << " positions, head_dim " << head_dim;
    // With sinks the single CTA folds the sink in with its warps' states, the split path after
    // merging them into one partial: the same sum in another order.
    if (splits == 1 && !sinks) {
      EXPECT_EQ(g, s) << lens[size_t(r)] << " positions: one split gives the single-CTA bits";
      EXPECT_TRUE(std::equal(qa.begin() + long(o), qa.begin() + long(o + size_t(width)), qb.begin() + long(o)))
          << "q8 of row " << r;
    } else {
      EXPECT_LT(vs_single, tol) << lens[size_t(r)] << " positions";
    }
    std::printf("[ cuda     ] split attention head_dim %d, %5ld positions, %2d splits: rel err %.2e "
                "(vs the single-CTA kernel %.2e)\n",
                head_dim, long(lens[size_t(r)]), splits, err, vs_single);
  }
}

TEST(CudaSplitAttention, MatchesReferenceAndSingleCtaKernel) {
  check_split(64, 32);
  check_split(128, 16);
}

// gpt-oss's sinks folded into the merge of the splits (and of the single CTA's warps): within
// the tolerance of the reference and of the single-CTA kernel.
TEST(CudaSplitAttention, Sinks) { check_split(64, 32, true); }

// The logits of `steps` decode steps of one session on the card after a prompt of `prompt`
// tokens (prefilled in chunks of `chunk`), with JITLLM_CUDA_SPLITK = splitk (nullptr: as unset).
std::vector<std::vector<float>> decode_after_prompt(const char* splitk, int64_t prompt, int64_t chunk,
                                                    int64_t steps) {
  const auto file = load_model_file(jitllm::testing::oracle_path("models/synth-llama.Q4_K_M.gguf"));
  tuning::ScopedOverride split("JITLLM_CUDA_SPLITK", splitk ? splitk : "");
  EngineOptions o;
  o.cpu_kernels = "reference";
  o.devices = "cuda";
  Engine e(file, o);
  auto s = e.new_session(prompt + steps + 8);
  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 11) % 500);
  e.prefill(*s, ids, false, chunk);
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < steps; ++i) out.push_back(e.decode(*s, int32_t(i * 13 % 500)));
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(CudaSplitAttention, EngineWithSplitKMatchesWithout) {
  JITLLM_REQUIRE_GPU();
  // Decode rows over 600+ keys: 3 splits each.
  const auto plain = decode_after_prompt("0", 600, 200, 20), split = decode_after_prompt("8", 600, 200, 20);
  ASSERT_EQ(plain.size(), split.size());
  float d = 0;
  for (size_t i = 0; i < plain.size(); ++i) d = std::max(d, max_abs_diff(plain[i], split[i]));
  std::printf("[ cuda     ] 20 decode steps after 600 positions, split-K vs single CTA: max |diff| %.3g\n", d);
  EXPECT_LT(d, 1e-3f);
}

// The automatic choice (JITLLM_CUDA_SPLITK unset): one session decoding across the context length
// where CudaKernels::attention_splits_that_pay switches to the split kernels. Before it the steps
// equal JITLLM_CUDA_SPLITK=0 bit for bit (the same single-CTA kernel, graphs captured and
// replayed); from it on they differ (the split kernels sum in another order: proof they ran) by
// little.
TEST(CudaSplitAttention, AutomaticChoiceSwitchesAsTheContextGrows) {
  JITLLM_REQUIRE_GPU();
  const int n_head = 4;  // the fixture's query heads
  int64_t first = 0;     // the first key count that takes the split kernels
  for (int64_t n_kv = 1; n_kv <= 2000 && !first; ++n_kv)
    if (CudaKernels::attention_splits_that_pay(1, n_head, n_kv, G->device->sm_count(), 32) > 0) first = n_kv;
  ASSERT_GT(first, 64) << "the fixture's 2048-token context must hold both sides of the switch";
  ASSERT_LT(first, 2048 - 48);
  const int64_t prompt = first - 24, steps = 48;  // keys prompt + 1 .. prompt + steps
  const auto never = decode_after_prompt("0", prompt, 256, steps);
  const auto automatic = decode_after_prompt(nullptr, prompt, 256, steps);
  ASSERT_EQ(never.size(), automatic.size());
  float worst = 0;
  int64_t differing = 0;  // steps from the switch on whose logits differ from the single kernel's
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t n_kv = prompt + 1 + i;
    const float d = max_abs_diff(never[size_t(i)], automatic[size_t(i)]);
    if (n_kv < first) EXPECT_EQ(d, 0.0f) << "step over " << n_kv << " keys, before the switch at " << first;
    if (n_kv == first) EXPECT_GT(d, 0.0f) << "the step over " << first << " keys did not take the split kernels";
    if (n_kv >= first && d > 0) ++differing;
    worst = std::max(worst, d);
  }
  std::printf("[ cuda     ] %ld of %ld steps from the switch differ from the single kernel\n", long(differing),
              long(prompt + steps + 1 - first));
  std::printf("[ cuda     ] automatic split-K from %ld keys: steps over %ld..%ld keys, max |diff| vs never %.3g\n",
              long(first), long(prompt + 1), long(prompt + steps), worst);
  EXPECT_LT(worst, 1e-3f);
}

}  // namespace
}  // namespace jitllm::cuda::test
