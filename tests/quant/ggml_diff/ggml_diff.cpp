// Developer tool, not part of the CI suite (it needs a llama.cpp checkout; see run.sh): a
// differential fuzz of jitllm's reference quant code against ggml's own C code compiled the way
// llama.cpp builds it (ggml-base without -march, ggml-cpu with -march=native).
//   - quantize_row vs ggml's quantize_<type>(..., imatrix = NULL) (what llama-quantize calls),
//     dequantize_row vs dequantize_row_<type>, Q8_1/Q8_K vs their _ref: byte/bit equality;
//   - quantize_activation vs ggml-cpu's quantize_row_q8_0/q8_1/q8_K: byte equality;
//   - vec_dot vs ggml-cpu's ggml_vec_dot_<type>_q8_<x>: |diff| / sum|w*x| (float order only).
// Inputs: 14 distributions chosen to hit the searches' corner cases (ties, constant, sparse,
// one-signed, outliers, tiny/huge scales). Exit status 1 on any byte/bit mismatch.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant/quant.h"

extern "C" {
// Symbols ggml's objects need from the rest of ggml.
void ggml_abort(const char* file, int line, const char*, ...) {
  std::fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
  std::abort();
}
size_t ggml_row_size(int type, int64_t ne) {
  return jitllm::row_bytes(jitllm::QuantType(type), ne);
}
size_t ggml_type_size(int type) {
  return jitllm::quant_traits(jitllm::QuantType(type)).block_bytes;
}
const char* ggml_type_name(int type) { return jitllm::quant_name(jitllm::QuantType(type)); }
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[1 << 8];
float ggml_table_f32_ue4m3[1 << 8];

using QuantizeFn = size_t (*)(const float*, void*, int64_t, int64_t, const float*);
using DequantizeFn = void (*)(const void*, float*, int64_t);
using RowFn = void (*)(const float*, void*, int64_t);
using DotFn = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
#define GGML_FORMAT(q, t)                                                           \
  size_t quantize_##q(const float*, void*, int64_t, int64_t, const float*);        \
  void dequantize_row_##q(const void*, float*, int64_t);                            \
  void ggml_vec_dot_##q##_##t(int, float*, size_t, const void*, size_t, const void*, size_t, int);
GGML_FORMAT(q4_0, q8_0)
GGML_FORMAT(q4_1, q8_1)
GGML_FORMAT(q5_0, q8_0)
GGML_FORMAT(q5_1, q8_1)
GGML_FORMAT(q8_0, q8_0)
GGML_FORMAT(q2_K, q8_K)
GGML_FORMAT(q3_K, q8_K)
GGML_FORMAT(q4_K, q8_K)
GGML_FORMAT(q5_K, q8_K)
GGML_FORMAT(q6_K, q8_K)
GGML_FORMAT(iq4_nl, q8_0)
GGML_FORMAT(mxfp4, q8_0)
void quantize_row_q8_1_ref(const float*, void*, int64_t);
void quantize_row_q8_K_ref(const float*, void*, int64_t);
void quantize_row_q8_0(const float*, void*, int64_t);
void quantize_row_q8_1(const float*, void*, int64_t);
void quantize_row_q8_K(const float*, void*, int64_t);
}

namespace {

using jitllm::QuantType;

struct Format {
  QuantType type;
  QuantizeFn quantize;
  DequantizeFn dequantize;
  DotFn dot;
};
#define FORMAT(T, q, t) {QuantType::T, quantize_##q, dequantize_row_##q, ggml_vec_dot_##q##_##t}
const Format kFormats[] = {
    FORMAT(Q4_0, q4_0, q8_0), FORMAT(Q4_1, q4_1, q8_1), FORMAT(Q5_0, q5_0, q8_0),
    FORMAT(Q5_1, q5_1, q8_1), FORMAT(Q8_0, q8_0, q8_0), FORMAT(Q2_K, q2_K, q8_K),
    FORMAT(Q3_K, q3_K, q8_K), FORMAT(Q4_K, q4_K, q8_K), FORMAT(Q5_K, q5_K, q8_K),
    FORMAT(Q6_K, q6_K, q8_K), FORMAT(IQ4_NL, iq4_nl, q8_0), FORMAT(MXFP4, mxfp4, q8_0)};

// Element i of a row from distribution `kind`.
float sample(int kind, int64_t i, std::mt19937& rng) {
  std::normal_distribution<float> g(0, 1);
  std::uniform_real_distribution<float> u(0, 1);
  std::uniform_int_distribution<int> small_int(-8, 8);
  const float v = g(rng);
  switch (kind) {
    case 0: return v;                                                   // Gaussian
    case 1: return u(rng);                                              // all positive
    case 2: return -u(rng);                                             // all negative
    case 3: return std::pow(std::fabs(v), 4.f) * (v < 0 ? -1.f : 1.f);  // heavy tails
    case 4: return float(small_int(rng));                               // integers: ties
    case 5: return float(small_int(rng)) * 0.125f;
    case 6: return u(rng) < 0.9f ? 0.f : v;                             // sparse
    case 7: return 3.0f;                                                // constant
    case 8: return v * 1e-6f;                                           // tiny
    case 9: return v * 3e3f;                                            // large, fp16-safe
    case 10: return i % 32 == 5 ? 100.f * v : v;                        // outlier per block
    case 11: return i % 16 < 8 ? 0.f : v;                               // half-zero groups
    case 12: return 1.0f + 0.001f * v;                                  // offset
    default: return i < 128 ? 0.f : v * 1e-3f;                          // zero super-block half
  }
}

}  // namespace

int main() {
  using namespace jitllm;
  for (uint32_t h = 0; h < 65536; ++h) ggml_table_f32_f16[h] = fp16_to_f32(uint16_t(h));
  for (uint32_t e = 0; e < 256; ++e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (e - 1) << 23;
    std::memcpy(&ggml_table_f32_e8m0_half[e], &bits, 4);
  }
  constexpr int64_t n = 1024;
  constexpr int kKinds = 14, kTrials = 200;
  std::mt19937 rng(12345);
  long mismatches = 0;
  double max_dot_rel[12] = {};
  for (int kind = 0; kind < kKinds; ++kind) {
    int bad_q[12] = {}, bad_dq[12] = {}, bad_ref[2] = {}, bad_act[3] = {};
    for (int trial = 0; trial < kTrials; ++trial) {
      std::vector<float> w(n), x(n);
      for (int64_t i = 0; i < n; ++i) w[size_t(i)] = sample(kind, i, rng);
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = sample((kind + trial) % kKinds, i, rng);
      for (int f = 0; f < 12; ++f) {
        const Format& fmt = kFormats[f];
        std::vector<uint8_t> theirs(row_bytes(fmt.type, n), 0xCC), ours(theirs.size(), 0x33);
        fmt.quantize(w.data(), theirs.data(), 1, n, nullptr);
        quantize_row(fmt.type, w.data(), ours.data(), n);
        bad_q[f] += theirs != ours;
        std::vector<float> dq_theirs(n), dq_ours(n);
        fmt.dequantize(theirs.data(), dq_theirs.data(), n);
        dequantize_row(fmt.type, theirs.data(), dq_ours.data(), n);
        bad_dq[f] += std::memcmp(dq_theirs.data(), dq_ours.data(), n * sizeof(float)) != 0;
        if (kind == 3 || kind == 9) continue;  // activations of 1e4-scale data overflow fp16 d
        std::vector<uint8_t> act(row_bytes(quant_traits(fmt.type).vec_dot_type, n));
        quantize_activation(fmt.type, x.data(), act.data(), n);
        float want = 0;
        fmt.dot(int(n), &want, 0, theirs.data(), 0, act.data(), 0, 1);
        const float got = vec_dot(fmt.type, n, theirs.data(), act.data());
        double mag = 1e-30;
        for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(dq_ours[size_t(i)]) * x[size_t(i)]);
        max_dot_rel[f] = std::max(max_dot_rel[f], std::fabs(double(got) - want) / mag);
      }
      const RowFn refs[2] = {quantize_row_q8_1_ref, quantize_row_q8_K_ref};
      const QuantType ref_types[2] = {QuantType::Q8_1, QuantType::Q8_K};
      for (int r = 0; r < 2; ++r) {
        std::vector<uint8_t> theirs(row_bytes(ref_types[r], n), 0), ours(theirs.size(), 0);
        refs[r](w.data(), theirs.data(), n);  // zero-filled: ggml skips Q8_K bsums of 0 blocks
        quantize_row(ref_types[r], w.data(), ours.data(), n);
        bad_ref[r] += theirs != ours;
      }
      const RowFn acts[3] = {quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K};
      const QuantType weight_of[3] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q4_K};
      for (int a = 0; a < 3; ++a) {
        const size_t bytes = row_bytes(quant_traits(weight_of[a]).vec_dot_type, n);
        std::vector<uint8_t> theirs(bytes, 0), ours(bytes, 0);
        acts[a](w.data(), theirs.data(), n);
        quantize_activation(weight_of[a], w.data(), ours.data(), n);
        bad_act[a] += theirs != ours;
      }
    }
    std::printf("inputs %2d: rows differing (quantize/dequantize per format, q8_1/q8_K ref, "
                "activations q8_0/q8_1/q8_K):", kind);
    for (int f = 0; f < 12; ++f) {
      std::printf(" %d/%d", bad_q[f], bad_dq[f]);
      mismatches += bad_q[f] + bad_dq[f];
    }
    std::printf(" | %d %d | %d %d %d\n", bad_ref[0], bad_ref[1], bad_act[0], bad_act[1],
                bad_act[2]);
    mismatches += bad_ref[0] + bad_ref[1] + bad_act[0] + bad_act[1] + bad_act[2];
  }
  for (int f = 0; f < 12; ++f)
    std::printf("%-7s vec_dot max |ours - ggml-cpu| / sum|w*x| = %.3g\n",
                quant_name(kFormats[f].type), max_dot_rel[f]);
  std::printf("%ld rows differ (of %d x %d per check)\n", mismatches, kKinds, kTrials);
  return mismatches == 0 ? 0 : 1;
}
