// Device, memory, stream, event and module wrappers over the driver API.
#include "backend/cuda/device.h"

#include "core/error.h"

namespace jitllm::cuda {

Device::Device(int ordinal) : ordinal_(ordinal) {
  const Driver& d = driver();
  int n = 0;
  check(d.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= n)
    throw_error("cuda:{}: no such device ({} visible)", ordinal, n);
  check(d.cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof name, dev_), "cuDeviceGetName");
  name_ = name;
  CUuuid u{};
  check(d.cuDeviceGetUuid(&u, dev_), "cuDeviceGetUuid");
  for (unsigned char c : u.bytes) uuid_ += fmt::format("{:02x}", c);
  check(d.cuDeviceGetAttribute(&cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_),
        "cuDeviceGetAttribute(cc major)");
  check(d.cuDeviceGetAttribute(&cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_),
        "cuDeviceGetAttribute(cc minor)");
  check(d.cuDeviceGetAttribute(&sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_),
        "cuDeviceGetAttribute(SM count)");
  // (Optional: without it, kernels keep to the 48 KB every CTA may use.)
  int smem_optin = 48 * 1024;
  if (d.cuDeviceGetAttribute(&smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev_) != CUDA_SUCCESS)
    smem_optin = 48 * 1024;
  max_smem_optin_ = size_t(smem_optin);
  check(d.cuDeviceTotalMem(&total_memory_, dev_), "cuDeviceTotalMem");
  check(d.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  make_current();
}

Device::~Device() {
  if (ctx_) driver().cuDevicePrimaryCtxRelease(dev_);
}

int Device::count() {
  if (!available()) return 0;
  int n = 0;
  return driver().cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

void Device::make_current() const { check(driver().cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

std::string Device::arch() const { return fmt::format("sm_{}{}", cc_major_, cc_minor_); }

size_t Device::free_memory() const {
  size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return free;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const CUresult r = driver().cuMemAlloc(&ptr_, bytes);
  if (r != CUDA_SUCCESS) {
    ptr_ = 0;
    check(r, fmt::format("cuMemAlloc({} bytes)", bytes).c_str());
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver().cuMemFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_)
    throw_error("upload of {} bytes at {} overruns a device buffer of {}", bytes, offset, bytes_);
  if (!bytes) return;
  // Not cuMemcpyHtoD: from pageable memory it returns once the bytes are staged, before the DMA
  // lands, and it is ordered only on the legacy stream, which our CU_STREAM_NON_BLOCKING streams
  // do not wait for; a kernel launched right after could read the buffer half written (that
  // was the fixtures' prompt-row error: weights uploaded on first use, read at once). A
  // synchronized stream of our own guarantees the bytes are on the card when this returns.
  Stream s;
  copy_to_device(ptr_ + offset, host, bytes, s);
}

void copy_to_device(CUdeviceptr dst, const void* host, size_t bytes, const Stream& s) {
  if (!bytes) return;
  check(driver().cuMemcpyHtoDAsync(dst, host, bytes, s.get()), "cuMemcpyHtoDAsync");
  s.sync();
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_)
    throw_error("download of {} bytes at {} overruns a device buffer of {}", bytes, offset,
                bytes_);
  if (bytes) check(driver().cuMemcpyDtoH(host, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  check(driver().cuMemAllocHost(&ptr_, bytes), "cuMemAllocHost");
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) driver().cuMemFreeHost(ptr_);
}

Stream::Stream() { check(driver().cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }
Stream::~Stream() {
  if (s_) driver().cuStreamDestroy(s_);
}
void Stream::sync() const { check(driver().cuStreamSynchronize(s_), "cuStreamSynchronize"); }

Event::Event() { check(driver().cuEventCreate(&e_, CU_EVENT_DEFAULT), "cuEventCreate"); }
Event::~Event() {
  if (e_) driver().cuEventDestroy(e_);
}
void Event::record(const Stream& s) { check(driver().cuEventRecord(e_, s.get()), "cuEventRecord"); }
void Event::sync() const { check(driver().cuEventSynchronize(e_), "cuEventSynchronize"); }
float Event::ms_since(const Event& start) const {
  float ms = 0;
  check(driver().cuEventElapsedTime(&ms, start.e_, e_), "cuEventElapsedTime");
  return ms;
}

Module::Module(const std::vector<char>& cubin) {
  check(driver().cuModuleLoadData(&m_, cubin.data()), "cuModuleLoadData");
}
Module::~Module() {
  if (m_) driver().cuModuleUnload(m_);
}
CUfunction Module::function(const std::string& name) const {
  CUfunction f = nullptr;
  check(driver().cuModuleGetFunction(&f, m_, name.c_str()),
        fmt::format("cuModuleGetFunction({})", name).c_str());
  return f;
}

void launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, size_t smem,
            const Stream& s, void** params, const char* what) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  const CUresult r =
      driver().cuLaunchKernel(f, gx, gy, gz, block, 1, 1, unsigned(smem), s.get(), params, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, fmt::format("cuLaunchKernel({}, grid {}x{}x{}, block {})", what, gx, gy, gz, block)
                 .c_str());
}

void launch_pdl(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, size_t smem,
                const Stream& s, void** params, const char* what) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = gx;
  cfg.gridDimY = gy;
  cfg.gridDimZ = gz;
  cfg.blockDimX = block;
  cfg.blockDimY = 1;
  cfg.blockDimZ = 1;
  cfg.sharedMemBytes = unsigned(smem);
  cfg.hStream = s.get();
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const CUresult r = driver().cuLaunchKernelEx(&cfg, f, params, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, fmt::format("cuLaunchKernelEx({}, grid {}x{}x{}, block {}, PDL)", what, gx, gy, gz, block)
                 .c_str());
}

}  // namespace jitllm::cuda
