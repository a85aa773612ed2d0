// Read-bandwidth probe (see bandwidth.h).
#include "backend/cuda/bandwidth.h"

#include <algorithm>
#include <vector>

namespace jitllm::cuda {

namespace {

constexpr const char* kReadSource = R"(
extern "C" __global__ void read_sum(const uint4* __restrict__ p, unsigned long long n, unsigned* out) {
  unsigned acc = 0;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never stores
}
)";

}  // namespace

double measure_read_gbs(const Device& device, Compiler& compiler, size_t bytes, int reps) {
  device.make_current();
  DeviceBuffer buf(bytes), out(4);
  Stream s;
  check(driver().cuMemsetD8Async(buf.get(), 0x5a, bytes, s.get()), "cuMemsetD8Async");
  CUfunction f = compiler.module(kReadSource, "read probe").function("read_sum");
  CUdeviceptr p = buf.get(), o = out.get();
  unsigned long long n = bytes / 16;
  void* args[] = {&p, &n, &o};
  const unsigned grid = unsigned(device.sm_count() * 8);
  launch(f, grid, 1, 1, 512, 0, s, args, "read probe");  // warm-up
  std::vector<double> gbs;
  for (int r = 0; r < reps; ++r) {
    Event a, b;
    a.record(s);
    launch(f, grid, 1, 1, 512, 0, s, args, "read probe");
    b.record(s);
    b.sync();
    gbs.push_back(double(bytes) / (double(b.ms_since(a)) * 1e6));
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

double read_wall_gbs(int ordinal) {
  Device d(ordinal);
  Compiler c(d);
  return measure_read_gbs(d, c);
}

}  // namespace jitllm::cuda
