// Loading the CUDA driver and NVRTC with dlopen, and turning their error codes into
// jitllm::Error (see cuda_api.h for why nothing links libcuda).
#include "backend/cuda/cuda_api.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"

namespace jitllm::cuda {

namespace {

void* open_first(std::initializer_list<const char*> names, std::string* tried) {
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    if (!tried->empty()) *tried += ", ";
    *tried += n;
  }
  return nullptr;
}

struct DriverState {
  Driver d;
  std::string error;  // non-empty: loading failed, thrown on every use
};

DriverState load_driver() {
  DriverState s;
  std::string tried;
  void* h = open_first({"libcuda.so.1", "libcuda.so"}, &tried);
  if (!h) {
    s.error = fmt::format("no CUDA driver on this machine (could not load {})", tried);
    return s;
  }
  using GetProc = decltype(&::cuGetProcAddress);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(h, "cuGetProcAddress_v2"));
  if (!get_proc) {
    s.error = "the CUDA driver is too old: it has no cuGetProcAddress_v2 (needs CUDA 12 or later)";
    return s;
  }
  Driver& d = s.d;
#define JITLLM_RESOLVE(name)                                                                 \
  {                                                                                          \
    void* fn = nullptr;                                                                      \
    CUdriverProcAddressQueryResult q{};                                                      \
    if (get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || \
        !fn) {                                                                               \
      s.error = fmt::format("the CUDA driver has no {} for CUDA {}", #name, CUDA_VERSION);   \
      return s;                                                                              \
    }                                                                                        \
    d.name = reinterpret_cast<decltype(d.name)>(fn);                                         \
  }
  JITLLM_CUDA_DRIVER_FUNCS(JITLLM_RESOLVE)
#undef JITLLM_RESOLVE
  const CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.cuGetErrorName(r, &name);
    s.error = fmt::format("CUDA cuInit failed: {} (no usable GPU?)", name ? name : "unknown");
    return s;
  }
  d.cuDriverGetVersion(&d.version);
  return s;
}

struct NvrtcState {
  Nvrtc n;
  std::string error;
};

NvrtcState load_nvrtc() {
  NvrtcState s;
  std::string tried;
  void* h = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, &tried);
  if (!h) {
    s.error = fmt::format("NVRTC is not installed (could not load {})", tried);
    return s;
  }
#define JITLLM_RESOLVE(name)                                          \
  s.n.name = reinterpret_cast<decltype(s.n.name)>(dlsym(h, #name));   \
  if (!s.n.name) {                                                    \
    s.error = fmt::format("NVRTC has no {}", #name);                  \
    return s;                                                         \
  }
  JITLLM_NVRTC_FUNCS(JITLLM_RESOLVE)
#undef JITLLM_RESOLVE
  s.n.nvrtcVersion(&s.n.major, &s.n.minor);
  return s;
}

const DriverState& driver_state() {
  static const DriverState s = load_driver();
  return s;
}

}  // namespace

const Driver& driver() {
  const DriverState& s = driver_state();
  if (!s.error.empty()) throw_error("{}", s.error);
  return s.d;
}

const Nvrtc& nvrtc() {
  static const NvrtcState s = load_nvrtc();
  if (!s.error.empty()) throw_error("{}", s.error);
  return s.n;
}

bool available(std::string* why) {
  const DriverState& s = driver_state();
  if (!s.error.empty()) {
    if (why) *why = s.error;
    return false;
  }
  int n = 0;
  if (s.d.cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    if (why) *why = "the CUDA driver reports no devices";
    return false;
  }
  return true;
}

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  const DriverState& s = driver_state();
  if (s.error.empty()) {
    s.d.cuGetErrorName(r, &name);
    s.d.cuGetErrorString(r, &text);
  }
  throw_error("CUDA {}: {} ({})", call, name ? name : fmt::format("error {}", int(r)),
              text ? text : "no description");
}

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return;
  throw_error("NVRTC {}: {}", call, nvrtc().nvrtcGetErrorString(r));
}

}  // namespace jitllm::cuda
