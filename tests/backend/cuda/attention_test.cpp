// The paged attention kernel against the CPU reference (tiled f32 path: Q and the accumulation
// in f32, as the kernel does) on a ragged batch: two sequences, one with 300 positions over
// pages of 128 (rows 297..299 attend to pages written by an earlier step), one with 5 positions
// (rows 0..4, causal inside the step); GQA 8 query heads over 2 KV heads; head sizes 64 and 128;
// and pydoc-llama's head size 32 with 6 query heads over 2;
// F16 and F32 KV; one key or several per warp step; attention sinks (gpt-oss); output poisoned
// first. Label gpu.
#include <gtest/gtest.h>

#include "backend/cpu/reference_kernels.h"
#include "cuda_test_util.h"

namespace jitllm::cuda::test {
namespace {

// Returns the kernel's output (empty when there is no card).
std::vector<float> check_attention(int head_dim, bool kv_f16, int n_head = 8, int n_head_kv = 2, int keys = 1,
                                   bool sinks = false) {
  Gpu* G = gpu();
  if (!G) return {};
  std::mt19937 rng(uint32_t(head_dim * 2 + kv_f16));
  const int kv_dim = n_head_kv * head_dim;
  const int64_t page_tokens = 128;
  const size_t elt = kv_f16 ? 2 : 4, row_bytes = size_t(kv_dim) * elt;
  // One layer: a page is [K, V][page_tokens][kv_dim].
  const size_t plane = row_bytes * size_t(page_tokens), page_bytes = 2 * plane;
  const int64_t lens[2] = {300, 5};
  std::vector<std::vector<std::vector<uint8_t>>> host(2);  // [seq][page] bytes
  for (int s = 0; s < 2; ++s) {
    const int64_t pages = (lens[s] + page_tokens - 1) / page_tokens;
    for (int64_t p = 0; p < pages; ++p) {
      std::vector<uint8_t> bytes(page_bytes);
      const auto vals = random_floats(page_bytes / elt, rng, -2, 2);
      for (size_t i = 0; i < vals.size(); ++i) {
        if (kv_f16) {
          const uint16_t h = f32_to_fp16(vals[i]);
          std::memcpy(&bytes[2 * i], &h, 2);
        } else {
          std::memcpy(&bytes[4 * i], &vals[i], 4);
        }
      }
      host[size_t(s)].push_back(std::move(bytes));
    }
  }
  // Rows: sequence 0 at positions 297..299, sequence 1 at 0..4.
  std::vector<int64_t> n_kv = {298, 299, 300, 1, 2, 3, 4, 5};
  std::vector<int> row_seq = {0, 0, 0, 1, 1, 1, 1, 1};
  const int64_t n_rows = int64_t(n_kv.size());
  const auto q = random_floats(size_t(n_rows * n_head * head_dim), rng);

  std::vector<std::vector<uint8_t*>> page_ptrs(2);
  for (int s = 0; s < 2; ++s)
    for (auto& p : host[size_t(s)]) page_ptrs[size_t(s)].push_back(p.data());
  std::vector<PagedRows> k_rows, v_rows;
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* const* pp = page_ptrs[size_t(row_seq[size_t(r)])].data();
    k_rows.push_back(PagedRows{pp, page_tokens, 0, row_bytes});
    v_rows.push_back(PagedRows{pp, page_tokens, plane, row_bytes});
  }
  std::vector<float> ref(q.size());
  AttentionArgs a;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = head_dim;
  a.scale = 1.0f / std::sqrt(float(head_dim));
  a.kv_type = kv_f16 ? QuantType::F16 : QuantType::F32;
  a.n_rows = n_rows;
  a.q = q.data();
  a.out = ref.data();
  a.n_kv = n_kv.data();
  a.k = k_rows.data();
  a.v = v_rows.data();
  a.f32_tiles = true;
  std::vector<float> sink(static_cast<size_t>(n_head));  // below and above the scores
  for (int h = 0; h < n_head; ++h) sink[size_t(h)] = float(h % 4) * 2.0f - 3.0f;
  if (sinks) a.sinks = sink.data();
  reference_kernels().attention(a);

  // The same pages on the card, one table per sequence.
  std::vector<DeviceBuffer> dev_pages;
  std::vector<uint64_t> table;
  std::vector<int32_t> row_pt(static_cast<size_t>(n_rows)), nkv(static_cast<size_t>(n_rows));
  int32_t start[2];
  for (int s = 0; s < 2; ++s) {
    start[s] = int32_t(table.size());
    for (auto& p : host[size_t(s)]) {
      dev_pages.emplace_back(page_bytes);
      dev_pages.back().upload(p.data(), page_bytes);
      table.push_back(dev_pages.back().get());
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    row_pt[size_t(r)] = start[row_seq[size_t(r)]];
    nkv[size_t(r)] = int32_t(n_kv[size_t(r)]);
  }
  DeviceBuffer dtable(table.size() * 8), drow_pt(size_t(n_rows) * 4), dnkv(size_t(n_rows) * 4);
  dtable.upload(table.data(), table.size() * 8);
  drow_pt.upload(row_pt.data(), row_pt.size() * 4);
  dnkv.upload(nkv.data(), nkv.size() * 4);
  DeviceBuffer dq = to_device(q), dout(q.size() * 4);
  check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");

  CudaKernels::AttentionCall c;
  c.q = dq.get();
  c.out = dout.get();
  c.pages = dtable.get();
  c.row_pt = drow_pt.get();
  c.n_kv = dnkv.get();
  c.koff = 0;
  c.voff = plane;
  c.page_tokens = int(page_tokens);
  c.row_bytes = int(row_bytes);
  c.n_rows = n_rows;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.scale = a.scale;
  c.kv_f16 = kv_f16;
  c.keys_per_step = keys;
  DeviceBuffer dsinks = to_device(sink);
  if (sinks) c.sinks = dsinks.get();
  G->kernels->attention(c, *G->stream);
  G->stream->sync();
  const std::vector<float> got = from_device(dout, q.size());
  const double err = rel_error(got, ref);
  EXPECT_LT(err, 1e-5) << "head_dim " << head_dim << (kv_f16 ? " f16" : " f32") << " GQA "
                       << n_head << "/" << n_head_kv << " keys per step " << keys << " sinks " << sinks;
  std::printf("[ cuda     ] attention head_dim %d GQA %d/%d %s KV, %d keys per step: rel err %.2e\n",
              head_dim, n_head, n_head_kv, kv_f16 ? "f16" : "f32", keys, err);
  return got;
}

TEST(CudaKernels, AttentionPagedRaggedGqa) {
  JITLLM_REQUIRE_GPU();
  for (int hd : {64, 128})
    for (bool f16 : {true, false}) check_attention(hd, f16);
}

// Each warp taking 2, 4 or 8 keys per step (their loads together): rows of 1..5 keys leave most
// of a step past the end, rows of 298..300 a ragged last step.
TEST(CudaKernels, AttentionSeveralKeysPerWarpStep) {
  JITLLM_REQUIRE_GPU();
  for (int keys : {2, 4, 8}) {
    check_attention(128, true, 8, 2, keys);
    check_attention(64, false, 8, 2, keys);
    check_attention(32, true, 6, 2, keys);
  }
}

// pydoc-llama's shape: head size 32, 6 query heads over 2 KV heads (groups of 3).
TEST(CudaKernels, AttentionHeadSize32GroupOf3) {
  JITLLM_REQUIRE_GPU();
  for (bool f16 : {true, false}) check_attention(32, f16, 6, 2);
}

// gpt-oss's sinks: one more logit per head in the softmax's sum (some below the scores, some
// above, which rescale everything before them).
TEST(CudaKernels, AttentionSinks) {
  JITLLM_REQUIRE_GPU();
  for (bool f16 : {true, false}) {
    check_attention(64, f16, 8, 2, 1, true);
    check_attention(64, f16, 8, 2, 4, true);
  }
}

}  // namespace
}  // namespace jitllm::cuda::test
