// Every generated CUDA kernel against the CPU reference (backend/cpu/reference_kernels.h) on
// real shapes: matvec / small-batch matmul per format at 2048x2048, 5632x2048 and (the head)
// 128256x2048, ragged batch tails (1, 3, 8, 13 rows), zero blocks, repeated calls bitwise
// equal; RMSNorm, RoPE (normal, neox, partial), SwiGLU and add. Label gpu: runs on the device
// machine (ctest -L gpu), skipped where no card is usable.
#include <gtest/gtest.h>

#include "backend/cpu/reference_kernels.h"
#include "cuda_test_util.h"

namespace jitllm::cuda::test {
namespace {

struct MatCase {
  QuantType type;
  int64_t rows, k;
  double tol;  // relative error vs the CPU reference (activation rounding differs: int8 blocks
               // of 32 here, the format's vec_dot type there)
};

void check_matmul(const MatCase& c, std::initializer_list<int64_t> ns, int zero_every) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(uint32_t(c.rows * 31 + c.k + int(c.type)));
  const std::vector<uint8_t> w = random_weights(c.type, c.rows, c.k, rng, zero_every);
  const DeviceWeight dw = DeviceWeight::upload(pack_weight(c.type, w.data(), c.rows, c.k));
  for (int64_t n : ns) {
    const std::vector<float> x = random_floats(size_t(n * c.k), rng);
    std::vector<float> ref(size_t(n * c.rows));
    reference_kernels().matmul(c.type, w.data(), c.rows, c.k, x.data(), n, ref.data());

    DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * c.k));  // rows padded to the tile
    DeviceBuffer dout(size_t(n * c.rows) * sizeof(float));
    DeviceBuffer q8(CudaKernels::q8_bytes(n, c.k));
    const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, c.k)};
    // Poison the output so an unwritten element cannot pass.
    check(driver().cuMemsetD8Async(dout.get(), 0xff, dout.bytes(), G->stream->get()), "memset");
    G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream);
    G->stream->sync();
    const std::vector<float> got = from_device(dout, size_t(n * c.rows));
    const double err = rel_error(got, ref);
    EXPECT_LT(err, c.tol) << quant_name(c.type) << " " << c.rows << "x" << c.k << " n=" << n;
    // Repeated call: same bits (no races, no state left behind).
    G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream);
    G->stream->sync();
    EXPECT_EQ(from_device(dout, size_t(n * c.rows)), got) << quant_name(c.type) << " n=" << n;
    std::printf("[ cuda     ] matmul %-6s %6ld x %5ld n=%-3ld rel err %.2e\n", quant_name(c.type),
                long(c.rows), long(c.k), long(n), err);
  }
}

TEST(CudaKernels, MatmulNativeFormatsRealShapes) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16,
                      QuantType::BF16, QuantType::F32}) {
    const double tol = t == QuantType::F32 ? 1e-5 : t == QuantType::F16 ? 2e-3 : 1e-2;
    check_matmul({t, 2048, 2048, tol}, {1, 3, 8, 13}, 0);
    check_matmul({t, 5632, 2048, tol}, {1, 4}, 0);
    check_matmul({t, 2048, 5632 / 256 * 256, tol}, {1, 2}, 0);
  }
}

TEST(CudaKernels, MatmulBatchTiles) {
  // Tiles of 16 and 32 rows (batched decode of many sessions) and ragged tails past them.
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::F16})
    check_matmul({t, 1024, 2048, t == QuantType::F16 ? 2e-3 : 1e-2}, {16, 17, 32, 40}, 0);
}

TEST(CudaKernels, MatmulHeadShape) {
  check_matmul({QuantType::Q6_K, 128256, 2048, 1e-2}, {1, 2}, 0);
  check_matmul({QuantType::Q4_K, 128256, 2048, 1e-2}, {1}, 0);
}

TEST(CudaKernels, MatmulQ4KRowsPerWarp) {
  // The Q4_K kernel at 1 and 4 rows per warp on ragged shapes: rows not a multiple of a CTA's
  // rows, 22 blocks per row, zero blocks; one row and a batch tile.
  JITLLM_REQUIRE_GPU();
  for (int rpw : {1, 4}) {
    G->kernels->tune(rpw, 0);
    check_matmul({QuantType::Q4_K, 1003, 5632, 1e-2}, {1, 3}, 5);
    check_matmul({QuantType::Q4_K, 260, 4096, 1e-2}, {1, 9}, 0);
  }
  G->kernels->tune(0, 0);
}

TEST(CudaKernels, ArgmaxRowsEqualsHostArgmax) {
  // Logits rows of the head's width and odd widths, values drawn from a few levels so that maxima
  // tie (the lowest column must win, as std::max_element), a row of -inf, the maximum in the last
  // column; repeated calls into the same ids (the kernel resets its row counters).
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(-20, 20);
  const int64_t cap = 64;
  DeviceBuffer scratch(CudaKernels::argmax_scratch_bytes(cap)), ids(size_t(cap) * 4);
  check(driver().cuMemsetD8Async(scratch.get(), 0, scratch.bytes(), G->stream->get()), "memset");
  for (int64_t cols : {int64_t(128256), int64_t(32000), int64_t(1000), int64_t(257), int64_t(1)}) {
    for (int64_t n : {int64_t(1), int64_t(3), int64_t(64)}) {
      std::vector<float> x(size_t(n * cols));
      for (float& v : x) v = float(level(rng)) * 0.25f;
      if (n > 1) std::fill(x.begin() + cols, x.begin() + 2 * cols, -INFINITY);  // row 1: all -inf
      if (n > 2) x[size_t(3 * cols - 1)] = 100.0f;                                // row 2: last column
      DeviceBuffer dx = to_device(x);
      for (int rep = 0; rep < 2; ++rep) {
        check(driver().cuMemsetD8Async(ids.get(), 0xff, ids.bytes(), G->stream->get()), "memset");
        G->kernels->argmax_rows(dx.get(), n, cols, scratch.get(), cap, ids.get(), *G->stream);
        G->stream->sync();
        std::vector<int32_t> got(static_cast<size_t>(n));
        check(driver().cuMemcpyDtoH(got.data(), ids.get(), got.size() * 4), "cuMemcpyDtoH");
        for (int64_t r = 0; r < n; ++r) {
          const float* row = x.data() + r * cols;
          EXPECT_EQ(got[size_t(r)], int32_t(std::max_element(row, row + cols) - row))
              << cols << " columns, row " << r << " of " << n << ", call " << rep;
        }
      }
    }
  }
}

TEST(CudaKernels, MatmulZeroBlocks) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0})
    check_matmul({t, 512, 2048, 1e-2}, {1, 5}, 3);
}

TEST(CudaKernels, MatmulConvertedFormats) {
  // Formats without their own kernel yet run as F16 after dequantization on the host.
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_K,
                      QuantType::Q3_K, QuantType::Q2_K, QuantType::IQ4_NL, QuantType::MXFP4})
    check_matmul({t, 256, 2048, 1e-2}, {1, 6}, 0);
}

TEST(CudaKernels, MatmulOddRowLengths) {
  check_matmul({QuantType::F16, 300, 2052, 2e-3}, {1, 3}, 0);   // scalar tail after 8-wide loads
  check_matmul({QuantType::F32, 77, 66, 1e-5}, {2, 9}, 0);      // 66: not a multiple of 4
}

TEST(CudaKernels, UploadedWeightsAreOnTheCardForTheNextLaunch) {
  // A 64 MB weight uploaded and read by a kernel launched at once, with no host work between
  // (the engine uploads each weight on first use, then launches). Each round frees the previous
  // buffer and uploads different values into a new one of the same size, so a kernel that ran
  // before the copy landed would read the previous round's (or unwritten) bytes. A plain
  // cuMemcpyHtoD from pageable memory is not ordered with our non-blocking streams.
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(23);
  const int64_t rows = 8192, k = 2048, n = 2;
  const std::vector<float> x = random_floats(size_t(n * k), rng);
  DeviceBuffer dx = to_device(x, size_t(8 * k));
  DeviceBuffer dout(size_t(n * rows) * sizeof(float));
  for (int round = 0; round < 3; ++round) {
    std::vector<float> w = random_floats(size_t(rows * k), rng);
    std::vector<float> ref(size_t(n * rows));
    reference_kernels().matmul(QuantType::F32, reinterpret_cast<const uint8_t*>(w.data()), rows, k,
                               x.data(), n, ref.data());
    const DeviceWeight dw = DeviceWeight::upload(
        pack_weight(QuantType::F32, reinterpret_cast<const uint8_t*>(w.data()), rows, k));
    G->kernels->matmul(dw, dx.get(), n, dout.get(), Q8Buffers{}, *G->stream);
    G->stream->sync();
    EXPECT_LT(rel_error(from_device(dout, size_t(n * rows)), ref), 1e-5) << "round " << round;
  }
}

TEST(CudaKernels, RmsNormSwigluAdd) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(7);
  const int64_t n = 5, dim = 2048;
  const auto x = random_floats(size_t(n * dim), rng, -3, 3);
  const auto w = random_floats(size_t(dim), rng, 0.5, 1.5);
  std::vector<float> ref(x.size());
  reference_kernels().rms_norm(x.data(), w.data(), n, dim, 1e-5f, ref.data());
  DeviceBuffer dx = to_device(x), dw = to_device(w), dout(x.size() * 4);
  G->kernels->rms_norm(dx.get(), dw.get(), dout.get(), n, dim, 1e-5f, *G->stream);
  G->stream->sync();
  EXPECT_LT(rel_error(from_device(dout, x.size()), ref), 1e-6);

  const auto up = random_floats(x.size(), rng, -2, 2);
  reference_kernels().swiglu(x.data(), up.data(), ref.data(), int64_t(x.size()));
  DeviceBuffer dup = to_device(up);
  G->kernels->swiglu(dx.get(), dup.get(), dout.get(), int64_t(x.size()), *G->stream);
  G->stream->sync();
  EXPECT_LT(rel_error(from_device(dout, x.size()), ref), 1e-6);

  std::vector<float> acc = x;
  reference_kernels().add(acc.data(), up.data(), int64_t(x.size()));
  G->kernels->add(dx.get(), dup.get(), int64_t(x.size()), *G->stream);
  G->stream->sync();
  EXPECT_EQ(from_device(dx, x.size()), acc);  // one float add each: bit-exact
}

TEST(CudaKernels, Rope) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    for (int n_rot : {64, 32}) {
      const int64_t n = 6;
      const int heads = 8, hd = 64;
      RopeParams p;
      p.n_rot = n_rot;
      p.mode = mode;
      p.freq_base = 500000.0f;
      const std::vector<int32_t> pos = {0, 1, 17, 255, 256, 4000};
      auto x = random_floats(size_t(n * heads * hd), rng);
      std::vector<float> ref = x;
      reference_kernels().rope(ref.data(), n, heads, hd, pos.data(), p);
      // The cos/sin table as CudaOps makes it: rotating a unit pair gives (cos, sin).
      std::vector<float> cache(size_t(n * n_rot));
      for (int64_t t = 0; t < n; ++t) {
        std::vector<float> unit(size_t(hd), 0.0f);
        for (int j = 0; j < n_rot / 2; ++j) unit[size_t(mode == RopeMode::Normal ? 2 * j : j)] = 1;
        reference_kernels().rope(unit.data(), 1, 1, hd, &pos[size_t(t)], p);
        for (int j = 0; j < n_rot / 2; ++j) {
          const int a = mode == RopeMode::Normal ? 2 * j : j;
          const int b = mode == RopeMode::Normal ? 2 * j + 1 : j + n_rot / 2;
          cache[size_t(t * n_rot + 2 * j)] = unit[size_t(a)];
          cache[size_t(t * n_rot + 2 * j + 1)] = unit[size_t(b)];
        }
      }
      DeviceBuffer dx = to_device(x), dc = to_device(cache);
      G->kernels->rope(dx.get(), dc.get(), n, heads, hd, n_rot, mode == RopeMode::Neox, *G->stream);
      G->stream->sync();
      EXPECT_LT(rel_error(from_device(dx, x.size()), ref), 1e-6) << "n_rot " << n_rot;
    }
  }
}


// q/k/v-like launch: three matrices of mixed kinds reading one activation, each output equal
// (bitwise) to its own single-matrix launch, and the residual epilogue equal to out + res.
TEST(CudaKernels, MatmulGroupMixedKindsAndResidual) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(21);
  const int64_t k = 2048;
  const QuantType types[3] = {QuantType::Q4_K, QuantType::Q6_K, QuantType::Q8_0};
  const int64_t rows[3] = {512, 256, 200};  // 200: a CTA of the last segment is partly empty
  std::vector<std::vector<uint8_t>> w;
  std::vector<DeviceWeight> dw;
  for (int i = 0; i < 3; ++i) {
    w.push_back(random_weights(types[i], rows[i], k, rng));
    dw.push_back(DeviceWeight::upload(pack_weight(types[i], w.back().data(), rows[i], k)));
  }
  for (int rpw : {1, 2, 4}) {
    G->kernels->tune(rpw, 0);
    for (int64_t n : {1, 3, 8, 19}) {
      const std::vector<float> x = random_floats(size_t(n * k), rng);
      DeviceBuffer dx = to_device(x, size_t(kMaxMatvecTile * k));
      DeviceBuffer q8(CudaKernels::q8_bytes(n, k));
      const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, k)};
      std::vector<DeviceBuffer> out, single;
      std::vector<float> res0 = random_floats(size_t(n * rows[0]), rng);
      DeviceBuffer res = to_device(res0);
      MatmulSeg segs[3];
      for (int i = 0; i < 3; ++i) {
        out.emplace_back(size_t(n * rows[i]) * 4);
        single.emplace_back(size_t(n * rows[i]) * 4);
        check(driver().cuMemsetD8Async(out.back().get(), 0xff, out.back().bytes(), G->stream->get()), "memset");
        segs[i] = MatmulSeg{&dw[size_t(i)], out.back().get(), i == 0 ? res.get() : 0};
      }
      G->kernels->matmul_group(segs, dx.get(), n, qb, *G->stream);
      for (int i = 0; i < 3; ++i)
        G->kernels->matmul(dw[size_t(i)], dx.get(), n, single[size_t(i)].get(), qb, *G->stream);
      G->stream->sync();
      for (int i = 0; i < 3; ++i) {
        const auto got = from_device(out[size_t(i)], size_t(n * rows[i]));
        EXPECT_EQ(got, from_device(single[size_t(i)], size_t(n * rows[i])))
            << "segment " << i << " n=" << n << " rpw=" << rpw;
        std::vector<float> ref(size_t(n * rows[i]));
        reference_kernels().matmul(types[i], w[size_t(i)].data(), rows[i], k, x.data(), n, ref.data());
        EXPECT_LT(rel_error(got, ref), 1e-2) << "segment " << i << " n=" << n << " rpw=" << rpw;
        if (i == 0) {
          std::vector<float> want = res0;
          for (size_t j = 0; j < want.size(); ++j) want[j] += got[j];
          EXPECT_EQ(from_device(res, want.size()), want) << "residual n=" << n << " rpw=" << rpw;
        }
      }
    }
  }
  G->kernels->tune(0, 0);
}

// The fused kernels give the same bits as the launches they replace.
TEST(CudaKernels, FusedNormSwigluRopeStoreEqualUnfused) {
  JITLLM_REQUIRE_GPU();
  std::mt19937 rng(5);
  const int64_t n = 3, dim = 2048;
  const auto x = random_floats(size_t(n * dim), rng, -3, 3);
  const auto w = random_floats(size_t(dim), rng, 0.5, 1.5);
  DeviceBuffer dx = to_device(x), dw = to_device(w), a(x.size() * 4), b(x.size() * 4);
  DeviceBuffer qa(CudaKernels::q8_bytes(n, dim)), qb(CudaKernels::q8_bytes(n, dim));
  const size_t dso = CudaKernels::q8_ds_offset(n, dim);
  const Q8Buffers q8a{qa.get(), qa.get() + dso}, q8b{qb.get(), qb.get() + dso};
  auto bytes = [](const DeviceBuffer& d, size_t count) {
    std::vector<uint8_t> v(count);
    d.download(v.data(), count);
    return v;
  };
  const size_t q8_used = dso + size_t(n * dim / 32) * 8;
  auto same_q8 = [&](const char* what) {
    const auto ba = bytes(qa, q8_used), bb = bytes(qb, q8_used);
    EXPECT_EQ(std::vector<uint8_t>(ba.begin(), ba.begin() + n * dim),
              std::vector<uint8_t>(bb.begin(), bb.begin() + n * dim)) << what << " int8";
    EXPECT_EQ(std::vector<uint8_t>(ba.begin() + long(dso), ba.end()),
              std::vector<uint8_t>(bb.begin() + long(dso), bb.end())) << what << " scales";
  };
  G->kernels->rms_norm(dx.get(), dw.get(), a.get(), n, dim, 1e-5f, *G->stream);
  G->kernels->quantize_q8(a.get(), n, dim, q8a, *G->stream);
  G->kernels->rms_norm_q8(dx.get(), dw.get(), b.get(), q8b, n, dim, 1e-5f, *G->stream);
  G->stream->sync();
  EXPECT_EQ(from_device(a, x.size()), from_device(b, x.size()));
  same_q8("rms_norm_q8");

  const auto up = random_floats(x.size(), rng, -2, 2);
  DeviceBuffer dup = to_device(up);
  G->kernels->swiglu(dx.get(), dup.get(), a.get(), int64_t(x.size()), *G->stream);
  G->kernels->quantize_q8(a.get(), n, dim, q8a, *G->stream);
  G->kernels->swiglu_q8(dx.get(), dup.get(), b.get(), q8b, int64_t(x.size()), *G->stream);
  G->stream->sync();
  EXPECT_EQ(from_device(a, x.size()), from_device(b, x.size()));
  same_q8("swiglu_q8");

  // rope_store: q [n][8 heads][64], k and v [n][2 heads][64], f16 KV rows.
  const int nh = 8, nkv = 2, hd = 64, n_rot = 64;
  const auto q = random_floats(size_t(n * nh * hd), rng), k = random_floats(size_t(n * nkv * hd), rng);
  const auto v = random_floats(size_t(n * nkv * hd), rng), cache = random_floats(size_t(n * n_rot), rng);
  for (bool neox : {false, true}) {
    DeviceBuffer q1 = to_device(q), q2 = to_device(q), k1 = to_device(k), k2 = to_device(k);
    DeviceBuffer dv = to_device(v), dc = to_device(cache);
    const size_t row = size_t(nkv * hd) * 2;
    DeviceBuffer kv1(size_t(n) * row * 4), kv2(size_t(n) * row * 4);  // [K rows | V rows], spare
    std::vector<uint64_t> r1(static_cast<size_t>(n)), r2(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      r1[size_t(t)] = kv1.get() + size_t(t) * row;
      r2[size_t(t)] = kv2.get() + size_t(t) * row;
    }
    DeviceBuffer dr1(size_t(n) * 8), dr2(size_t(n) * 8);
    dr1.upload(r1.data(), dr1.bytes());
    dr2.upload(r2.data(), dr2.bytes());
    const uint64_t voff = size_t(n) * row * 2;
    G->kernels->rope(q1.get(), dc.get(), n, nh, hd, n_rot, neox, *G->stream);
    G->kernels->rope(k1.get(), dc.get(), n, nkv, hd, n_rot, neox, *G->stream);
    G->kernels->store_kv(k1.get(), dr1.get(), 0, n, nkv * hd, true, *G->stream);
    G->kernels->store_kv(dv.get(), dr1.get(), voff, n, nkv * hd, true, *G->stream);
    CudaKernels::RopeStoreCall c;
    c.q = q2.get();
    c.k = k2.get();
    c.v = dv.get();
    c.cache = dc.get();
    c.rows = dr2.get();
    c.koff = 0;
    c.voff = voff;
    c.n = n;
    c.n_head = nh;
    c.n_head_kv = nkv;
    c.head_dim = hd;
    c.n_rot = n_rot;
    c.neox = neox;
    c.f16 = true;
    G->kernels->rope_store(c, *G->stream);
    G->stream->sync();
    EXPECT_EQ(from_device(q1, q.size()), from_device(q2, q.size())) << "neox " << neox;
    EXPECT_EQ(from_device(k1, k.size()), from_device(k2, k.size())) << "neox " << neox;
    EXPECT_EQ(bytes(kv1, kv1.bytes()), bytes(kv2, kv2.bytes())) << "neox " << neox;
  }
}

// Not a test: time per matvec shape and % of the read wall (JITLLM_CUDA_BENCH=1; device_run.sh
// stage `bench`). Weight bytes over kernel time, 30 back-to-back launches after a warm-up.
TEST(CudaBench, MatvecShapes) {
  if (!std::getenv("JITLLM_CUDA_BENCH")) GTEST_SKIP() << "set JITLLM_CUDA_BENCH=1";
  JITLLM_REQUIRE_GPU();
  struct Shape { const char* what; QuantType t; int64_t rows, k; };
  const Shape shapes[] = {
      {"8B q/o", QuantType::Q4_K, 4096, 4096},      {"8B gate", QuantType::Q4_K, 14336, 4096},
      {"8B down", QuantType::Q4_K, 4096, 14336},    {"8B down6", QuantType::Q6_K, 4096, 14336},
      {"8B head", QuantType::Q6_K, 128256, 4096},   {"8B q8 gate", QuantType::Q8_0, 14336, 4096},
      {"8B q8 down", QuantType::Q8_0, 4096, 14336}, {"1B q", QuantType::Q4_K, 2048, 2048},
      {"1B gate", QuantType::Q4_K, 8192, 2048},     {"1B down6", QuantType::Q6_K, 2048, 8192},
      {"1B head", QuantType::Q6_K, 128256, 2048}};
  std::mt19937 rng(1);
  Event e0, e1;
  for (const Shape& sh : shapes) {
    const auto w = random_weights(sh.t, sh.rows, sh.k, rng);
    const DeviceWeight dw = DeviceWeight::upload(pack_weight(sh.t, w.data(), sh.rows, sh.k));
    const double bytes = double(row_bytes(sh.t, sh.k)) * double(sh.rows);
    const auto x = random_floats(size_t(kMaxMatvecTile * sh.k), rng);
    DeviceBuffer dx = to_device(x), dout(size_t(kMaxMatvecTile * sh.rows) * 4);
    DeviceBuffer q8(CudaKernels::q8_bytes(kMaxMatvecTile, sh.k));
    for (int64_t n : {1, 8, 32}) {
      const Q8Buffers qb{q8.get(), q8.get() + CudaKernels::q8_ds_offset(n, sh.k)};
      G->kernels->quantize_q8(dx.get(), n, sh.k, qb, *G->stream);
      for (int rpw : {1, 2, 4}) {
        if (n == 32 && rpw > 2) continue;
        G->kernels->tune(rpw, 0);
        G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream, true);  // compile, warm
        G->stream->sync();
        const int reps = 30;
        e0.record(*G->stream);
        for (int r = 0; r < reps; ++r)
          G->kernels->matmul(dw, dx.get(), n, dout.get(), qb, *G->stream, true);
        e1.record(*G->stream);
        e1.sync();
        const double us = 1000.0 * e1.ms_since(e0) / reps;
        std::printf("[ bench    ] %-10s %-4s %6ld x %5ld n=%-2ld rpw=%d %8.1f us %7.1f GB/s\n", sh.what,
                    quant_name(sh.t), long(sh.rows), long(sh.k), long(n), rpw, us, bytes / us / 1e3);
      }
    }
  }
  G->kernels->tune(0, 0);
}

}  // namespace
}  // namespace jitllm::cuda::test
