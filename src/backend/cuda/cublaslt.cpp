// Loading cuBLASLt with dlopen and turning its status codes into jitllm::Error (cublaslt.h).
#include "backend/cuda/cublaslt.h"

#include <dlfcn.h>

#include "core/error.h"

namespace jitllm::cuda {

namespace {

struct CublasLtState {
  CublasLt lt;
  std::string error;  // non-empty: loading failed, thrown on every use
};

CublasLtState load_cublaslt() {
  CublasLtState s;
  void* h = nullptr;
  std::string tried;
  for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
    if ((h = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    tried += tried.empty() ? n : fmt::format(", {}", n);
  }
  if (!h) {
    s.error = fmt::format("cuBLASLt is not installed (could not load {})", tried);
    return s;
  }
#define JITLLM_RESOLVE(name)                                         \
  s.lt.name = reinterpret_cast<decltype(s.lt.name)>(dlsym(h, #name)); \
  if (!s.lt.name) {                                                  \
    s.error = fmt::format("cuBLASLt has no {}", #name);              \
    return s;                                                        \
  }
  JITLLM_CUBLASLT_FUNCS(JITLLM_RESOLVE)
#undef JITLLM_RESOLVE
  s.lt.version = s.lt.cublasLtGetVersion();
  return s;
}

const CublasLtState& state() {
  static const CublasLtState s = load_cublaslt();
  return s;
}

}  // namespace

const CublasLt& cublaslt() {
  const CublasLtState& s = state();
  if (!s.error.empty()) throw_error("{}", s.error);
  return s.lt;
}

bool cublaslt_available(std::string* why) {
  const CublasLtState& s = state();
  if (why) *why = s.error;
  return s.error.empty();
}

void check_cublaslt(cublasStatus_t st, const char* call) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  const CublasLtState& s = state();
  const char* text = s.error.empty() ? s.lt.cublasLtGetStatusString(st) : nullptr;
  throw_error("cuBLASLt {}: {} (status {})", call, text ? text : "unknown status", int(st));
}

}  // namespace jitllm::cuda
