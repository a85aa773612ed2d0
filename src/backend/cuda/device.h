// RAII over the driver API: a device's primary context, device memory, pinned host memory,
// streams, events and loaded modules. Every failure is a jitllm::Error naming the driver call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"

namespace jitllm::cuda {

// One card: its primary context made current on the constructing thread, and what generated
// kernels and the cubin cache need to know about it.
class Device {
 public:
  explicit Device(int ordinal = 0);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  static int count();  // 0 when there is no driver or no card (never throws)

  void make_current() const;
  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  const std::string& uuid() const { return uuid_; }  // 32 hex digits
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }
  std::string arch() const;  // "sm_90"
  int sm_count() const { return sm_count_; }
  // Dynamic shared memory one CTA may opt in to (227 KB on sm_90).
  size_t max_smem_per_block_optin() const { return max_smem_optin_; }
  size_t total_memory() const { return total_memory_; }
  size_t free_memory() const;

 private:
  int ordinal_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string name_, uuid_;
  int cc_major_ = 0, cc_minor_ = 0, sm_count_ = 0;
  size_t total_memory_ = 0, max_smem_optin_ = 0;
};

// Device memory; moves, never copies.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const { return reinterpret_cast<T*>(ptr_); }
  // Complete on the card when it returns (see copy_to_device), so a kernel launched next on any
  // stream reads these bytes.
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// Page-locked host memory for asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  void sync() const;

 private:
  CUstream s_ = nullptr;
};

// Host bytes to device memory, complete on the card when this returns: an async copy on `s`
// (not on the legacy stream, which the other non-blocking streams do not wait for), then a sync
// of `s`. Use a stream that is not being captured into a graph.
void copy_to_device(CUdeviceptr dst, const void* host, size_t bytes, const Stream& s);

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& s);
  void sync() const;
  float ms_since(const Event& start) const;  // elapsed milliseconds start -> this

 private:
  CUevent e_ = nullptr;
};

class Module {
 public:
  Module() = default;
  explicit Module(const std::vector<char>& cubin);
  ~Module();
  Module(Module&& o) noexcept : m_(o.m_) { o.m_ = nullptr; }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction function(const std::string& name) const;

 private:
  CUmodule m_ = nullptr;
};

// A kernel launch: params are pointers to each argument, as cuLaunchKernel wants them.
void launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, size_t smem,
            const Stream& s, void** params, const char* what);
// The same with programmatic dependent launch (sm_90): the kernel may be scheduled while the
// previous one on the stream still runs; it must wait (griddepcontrol.wait) before reading what
// that one wrote, and may let the next one go early (griddepcontrol.launch_dependents).
void launch_pdl(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, size_t smem,
                const Stream& s, void** params, const char* what);

}  // namespace jitllm::cuda
