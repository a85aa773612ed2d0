// cuBLASLt, loaded at run time with dlopen (like the driver and NVRTC, see cuda_api.h): a
// machine without libcublasLt still runs everything, prefill then falls back to the matvec
// kernels. Only the entry points the prefill GEMM (gemm.h) needs are resolved. cuBLASLt runs in
// the current context (the device's primary context, which Device makes current), on our
// driver-API streams (a CUstream is a cudaStream_t).
#pragma once

#include <cublasLt.h>

#include <string>

namespace jitllm::cuda {

#define JITLLM_CUBLASLT_FUNCS(X)                                                            \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString)     \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                              \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                      \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct CublasLt {
#define JITLLM_DECLARE(name) decltype(&::name) name = nullptr;
  JITLLM_CUBLASLT_FUNCS(JITLLM_DECLARE)
#undef JITLLM_DECLARE
  size_t version = 0;
};

// The process-wide cuBLASLt; throws jitllm::Error saying what is missing when it cannot be
// loaded. cublaslt_available() never throws.
const CublasLt& cublaslt();
bool cublaslt_available(std::string* why = nullptr);

// Throws jitllm::Error("cuBLASLt <call>: <status text>") unless s == CUBLAS_STATUS_SUCCESS.
void check_cublaslt(cublasStatus_t s, const char* call);

}  // namespace jitllm::cuda
