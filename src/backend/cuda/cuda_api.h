// The CUDA driver API and NVRTC, loaded at run time with dlopen. Linking libcuda (even the
// toolkit's stub) would make every jitllm binary refuse to start on a machine that has the
// toolkit but no driver (CI, the dev box); loading on first use keeps such machines running
// everything else and turns `-devices cuda` into a clear jitllm::Error instead.
//
// Every call goes through check(), which throws a jitllm::Error naming the call and the driver's
// error name and text.
#pragma once

#include <cuda.h>
#include <nvrtc.h>

#include <string>

namespace jitllm::cuda {

// The driver entry points we use. `decltype(&::cuMemAlloc)` follows cuda.h's versioned macros
// (cuMemAlloc -> cuMemAlloc_v2), and cuGetProcAddress resolves the unversioned name for the
// header's CUDA_VERSION, so pointer type and resolved symbol always agree.
#define JITLLM_CUDA_DRIVER_FUNCS(X)                                                          \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)      \
  X(cuDeviceGetAttribute) X(cuDeviceGetUuid) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuStreamCreate)      \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo)       \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                 \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemAllocHost) X(cuMemFreeHost)                \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute)        \
  X(cuLaunchKernel) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)                 \
  X(cuEventElapsedTime) X(cuEventDestroy) X(cuGetErrorName) X(cuGetErrorString)             \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags)               \
  X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy) X(cuLaunchKernelEx) X(cuStreamIsCapturing)

#define JITLLM_NVRTC_FUNCS(X)                                                                \
  X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)     \
  X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram)         \
  X(nvrtcGetErrorString)

struct Driver {
#define JITLLM_DECLARE(name) decltype(&::name) name = nullptr;
  JITLLM_CUDA_DRIVER_FUNCS(JITLLM_DECLARE)
#undef JITLLM_DECLARE
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

struct Nvrtc {
#define JITLLM_DECLARE(name) decltype(&::name) name = nullptr;
  JITLLM_NVRTC_FUNCS(JITLLM_DECLARE)
#undef JITLLM_DECLARE
  int major = 0, minor = 0;
};

// The process-wide driver, loaded and cuInit'ed on first use. Throws jitllm::Error when there
// is no driver (libcuda.so.1 missing) or cuInit fails (no device, driver too old).
const Driver& driver();
// The process-wide NVRTC; throws jitllm::Error when libnvrtc cannot be loaded.
const Nvrtc& nvrtc();
// True when a driver can be loaded and reports at least one device (never throws).
bool available(std::string* why = nullptr);

// Throws jitllm::Error("CUDA <call>: <NAME> (<text>)") unless r == CUDA_SUCCESS.
void check(CUresult r, const char* call);
void check_nvrtc(nvrtcResult r, const char* call);

}  // namespace jitllm::cuda
