// Prefill GEMM through cuBLASLt with generated dequantization kernels (see gemm.h).
#include "backend/cuda/gemm.h"

#include <algorithm>
#include <string>

#include "backend/cuda/weight_formats.h"
#include "core/error.h"

namespace jitllm::cuda {

namespace {

void* vp(CUdeviceptr p) { return reinterpret_cast<void*>(uintptr_t(p)); }

unsigned grid_for(int64_t items, int per_block) {
  return unsigned(std::clamp<int64_t>((items + per_block - 1) / per_block, 1, 1 << 18));
}

}  // namespace

int64_t gemm_min_rows() {
  // From 16 rows on the GEMM (dequantization included) beats the matvec passes on Q4_K, Q6_K and
  // F16 and ties on Q8_0 (the H200: docs/cuda.md, "Prefill on tensor cores").
  return 16;
}

Gemm::Gemm(Compiler& compiler) : compiler_(compiler) {
  const CublasLt& lt = cublaslt();
  check_cublaslt(lt.cublasLtCreate(&handle_), "cublasLtCreate");
  check_cublaslt(lt.cublasLtMatmulPreferenceCreate(&pref_), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kWorkspaceBytes;
  check_cublaslt(lt.cublasLtMatmulPreferenceSetAttribute(
                     pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                 "cublasLtMatmulPreferenceSetAttribute");
  workspace_ = DeviceBuffer(kWorkspaceBytes);
}

Gemm::~Gemm() {
  const CublasLt& lt = cublaslt();
  for (auto& [key, p] : plans_) {
    lt.cublasLtMatrixLayoutDestroy(p.a);
    lt.cublasLtMatrixLayoutDestroy(p.b);
    lt.cublasLtMatrixLayoutDestroy(p.c);
    lt.cublasLtMatmulDescDestroy(p.desc);
  }
  if (pref_) lt.cublasLtMatmulPreferenceDestroy(pref_);
  if (handle_) lt.cublasLtDestroy(handle_);
}

int64_t Gemm::slice_rows(int64_t rows, int64_t k) {
  const int64_t s = std::max<int64_t>(128, kSliceElems / std::max<int64_t>(k, 1) / 128 * 128);
  return std::min(rows, s);
}

CUfunction Gemm::fn(const char* name) {
  if (auto it = fns_.find(name); it != fns_.end()) return it->second;
  if (!module_) module_ = &compiler_.module(gemm_source(), "gemm dequantization kernels");
  CUfunction f = module_->function(name);
  fns_.emplace(name, f);
  return f;
}

void Gemm::grow(DeviceBuffer& buf, size_t bytes, const Stream& s) {
  if (buf.bytes() >= bytes) return;
  s.sync();  // earlier GEMMs on the stream may still read the old buffer
  buf = DeviceBuffer(bytes);
}

const Gemm::Plan& Gemm::plan(cudaDataType_t ab, int64_t m, int64_t n, int64_t k, int64_t ldd) {
  const auto key = std::make_tuple(int(ab), m, n, k, ldd);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  const CublasLt& lt = cublaslt();
  Plan p;
  // Column-major view: D^T [m x n] (ld ldd) = op(A) [m x k] * B [k x n], where the row-major
  // weights [m][k] are a column-major k x m matrix (so op(A) = transpose) and the row-major
  // activation [n][k] is a column-major k x n matrix: the "TN" case the tensor-core kernels favour.
  check_cublaslt(lt.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check_cublaslt(lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
                 "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_cublaslt(lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
                 "cublasLtMatmulDescSetAttribute(TRANSB)");
  check_cublaslt(lt.cublasLtMatrixLayoutCreate(&p.a, ab, uint64_t(k), uint64_t(m), k),
                 "cublasLtMatrixLayoutCreate(A)");
  check_cublaslt(lt.cublasLtMatrixLayoutCreate(&p.b, ab, uint64_t(k), uint64_t(n), k),
                 "cublasLtMatrixLayoutCreate(B)");
  check_cublaslt(lt.cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, uint64_t(m), uint64_t(n), ldd),
                 "cublasLtMatrixLayoutCreate(D)");
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  check_cublaslt(lt.cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref_, 1,
                                                    &r, &found),
                 "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw_error("cuBLASLt: no algorithm for a {} GEMM of m={} n={} k={}",
                ab == CUDA_R_32F ? "f32" : ab == CUDA_R_16BF ? "bf16" : "f16", m, n, k);
  p.algo = r.algo;
  return plans_.emplace(key, p).first->second;
}

void Gemm::matmul(const DeviceWeight& w, CUdeviceptr x, int64_t n, CUdeviceptr out,
                  const Stream& s) {
  if (n <= 0) return;
  const CublasLt& lt = cublaslt();
  const int64_t k = w.k, rows = w.rows;
  // The activation in the GEMM's input type.
  cudaDataType_t ab = CUDA_R_16F;
  CUdeviceptr b = x;
  if (w.kind == WeightKind::F32) {
    ab = CUDA_R_32F;
  } else {
    const bool bf = w.kind == WeightKind::BF16;
    if (bf) ab = CUDA_R_16BF;
    grow(xh_, size_t(n * k) * 2, s);
    long long count = n * k;
    CUdeviceptr dst = xh_.get();
    void* args[] = {&x, &dst, &count};
    launch(fn(bf ? "to_bf16" : "to_f16"), grid_for(count, 256), 1, 1, 256, 0, s, args,
           bf ? "to_bf16" : "to_f16");
    b = xh_.get();
  }
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&](CUdeviceptr a, int64_t m, CUdeviceptr d) {
    const Plan& p = plan(ab, m, n, k, rows);
    check_cublaslt(lt.cublasLtMatmul(handle_, p.desc, &alpha, vp(a), p.a, vp(b), p.b, &beta, vp(d),
                                     p.c, vp(d), p.c, &p.algo, vp(workspace_.get()),
                                     kWorkspaceBytes, reinterpret_cast<cudaStream_t>(s.get())),
                   "cublasLtMatmul");
  };
  if (w.kind == WeightKind::F32 || w.kind == WeightKind::F16 || w.kind == WeightKind::BF16) {
    gemm(w.buf.get(), rows, out);  // the weights as they are
    return;
  }
  const int64_t slice = slice_rows(rows, k);
  grow(wh_, size_t(slice * k) * 2, s);
  for (int64_t r0 = 0; r0 < rows; r0 += slice) {
    const int64_t m = std::min(slice, rows - r0);
    CUdeviceptr dst = wh_.get();
    switch (w.kind) {
      case WeightKind::Q4_K: {
        CUdeviceptr src = w.buf.get() + size_t(r0 * (k / 256)) * 144;
        long long nb = m * (k / 256);
        void* args[] = {&src, &dst, &nb};
        launch(fn("dequant_q4_k"), grid_for(nb, 8), 1, 1, 256, 0, s, args, "dequant_q4_k");
        break;
      }
      case WeightKind::Q6_K: {
        CUdeviceptr src = w.buf.get() + size_t(r0 * (k / 256)) * 208;
        CUdeviceptr dd = w.buf.get() + w.scale_offset + size_t(r0 * (k / 256)) * 2;
        long long nb = m * (k / 256);
        void* args[] = {&src, &dd, &dst, &nb};
        launch(fn("dequant_q6_k"), grid_for(nb, 8), 1, 1, 256, 0, s, args, "dequant_q6_k");
        break;
      }
      case WeightKind::Q8_0: {
        CUdeviceptr src = w.buf.get() + size_t(r0 * k);
        CUdeviceptr dd = w.buf.get() + w.scale_offset + size_t(r0 * (k / 32)) * 2;
        long long n4 = m * k / 4;
        void* args[] = {&src, &dd, &dst, &n4};
        launch(fn("dequant_q8_0"), grid_for(n4, 256), 1, 1, 256, 0, s, args, "dequant_q8_0");
        break;
      }
      default: {
        if (!is_format_kind(w.kind))
          throw_error("GEMM: weight kind {} has no dequantization kernel", weight_kind_name(w.kind));
        CUdeviceptr src = w.buf.get(), aux = w.buf.get() + w.scale_offset;
        long long row0 = r0, nrows = m;
        int kk = int(k), kind = format_kind_id(w.kind);
        void* args[] = {&src, &aux, &dst, &row0, &nrows, &kk, &kind};
        launch(fn("dequant_fmt"), grid_for(m * k / 8, 256), 1, 1, 256, 0, s, args, "dequant_fmt");
        break;
      }
    }
    gemm(dst, m, out + size_t(r0) * sizeof(float));
  }
}

}  // namespace jitllm::cuda

namespace jitllm::cuda {

bool Gemm::embeds_on_card(QuantType type) {
  switch (type) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16:
    case QuantType::Q8_0: case QuantType::Q4_K: case QuantType::Q6_K:
      return true;
    default:  // the block formats of weight_formats.h, unless they run as F16
      return is_format_kind(cuda_kind_for(type));
  }
}

void Gemm::embed(const DeviceWeight& table, CUdeviceptr ids, int64_t n, CUdeviceptr out,
                 const Stream& s) {
  int kind = 0;
  switch (table.kind) {
    case WeightKind::F32: kind = 0; break;
    case WeightKind::F16: kind = 1; break;
    case WeightKind::BF16: kind = 2; break;
    case WeightKind::Q8_0: kind = 3; break;
    case WeightKind::Q4_K: kind = 4; break;
    case WeightKind::Q6_K: kind = 5; break;
    default:
      if (!is_format_kind(table.kind))
        throw_error("embedding on the card: weight kind {} is not supported", weight_kind_name(table.kind));
      kind = format_kind_id(table.kind);
  }
  if (n <= 0) return;
  CUdeviceptr w = table.buf.get(), w2 = table.buf.get() + table.scale_offset;
  int k = int(table.k);
  void* args[] = {&w, &w2, &ids, &out, &k, &kind};
  const char* name = is_format_kind(table.kind) ? "embed_fmt" : "embed_rows";
  launch(fn(name), unsigned(n), 1, 1, 256, 0, s, args, name);
}

}  // namespace jitllm::cuda
