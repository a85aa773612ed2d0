// Launching the generated kernels (compiled on first use through the cubin cache).
#include "backend/cuda/cuda_kernels.h"

#include <algorithm>

#include "core/error.h"

namespace jitllm::cuda {

namespace {

unsigned blocks_for(int64_t count, int per_block, int64_t cap = 65535) {
  return unsigned(std::clamp<int64_t>((count + per_block - 1) / per_block, 1, cap));
}

}  // namespace

DeviceWeight DeviceWeight::upload(const PackedWeight& p) {
  DeviceWeight w;
  w.kind = p.kind;
  w.rows = p.rows;
  w.k = p.k;
  w.scale_offset = p.scale_offset;
  w.buf = DeviceBuffer(p.bytes.size());
  w.buf.upload(p.bytes.data(), p.bytes.size());
  return w;
}

CudaKernels::CudaKernels(const Device& device, Compiler& compiler)
    : device_(device), compiler_(compiler) {}

int CudaKernels::tile_for(int64_t n) { return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8; }

size_t CudaKernels::q8_ds_offset(int64_t n, int64_t k) {
  const int64_t t = tile_for(n);
  const int64_t n_pad = (n + t - 1) / t * t;
  return (size_t(n_pad * k) + 255) / 256 * 256;
}

size_t CudaKernels::q8_bytes(int64_t n, int64_t k) {
  const int64_t t = tile_for(n);
  const int64_t n_pad = (n + t - 1) / t * t;
  return q8_ds_offset(n, k) + size_t(n_pad * (k / 32)) * 8;
}

CUfunction CudaKernels::matvec_fn(WeightKind kind, int64_t k, int nt) {
  const auto key = std::make_tuple(int(kind), k, nt);
  if (auto it = matvec_.find(key); it != matvec_.end()) return it->second;
  const Module& m = compiler_.module(matvec_source(kind, k, nt),
                                     fmt::format("matvec {} k={} nt={}", weight_kind_name(kind), k, nt));
  CUfunction f = m.function("matvec");
  matvec_.emplace(key, f);
  return f;
}

CUfunction CudaKernels::elementwise_fn(const char* name) {
  if (auto it = ew_.find(name); it != ew_.end()) return it->second;
  if (!elementwise_) elementwise_ = &compiler_.module(elementwise_source(), "elementwise kernels");
  CUfunction f = elementwise_->function(name);
  ew_.emplace(name, f);
  return f;
}

void CudaKernels::quantize_q8(CUdeviceptr x, int64_t n, int64_t k, Q8Buffers q8, const Stream& s) {
  if (k % 32 != 0) throw_error("quantize_q8: row length {} is not a multiple of 32", k);
  long long nblocks = (long long)(n * (k / 32));
  void* args[] = {&x, &q8.q, &q8.ds, &nblocks};
  launch(elementwise_fn("quantize_q8"), blocks_for(nblocks, 8, INT32_MAX), 1, 1, 256, 0, s, args,
         "quantize_q8");
}

void CudaKernels::matmul(const DeviceWeight& w, CUdeviceptr x, int64_t n, CUdeviceptr out,
                         Q8Buffers q8, const Stream& s, bool x_quantized) {
  if (n <= 0) return;
  const int nt = tile_for(n);
  const int64_t k = w.k;
  CUdeviceptr wp = w.buf.get(), w2 = w.buf.get() + w.scale_offset, xq = 0, xds = 0, xf = x;
  if (uses_q8_activation(w.kind)) {
    const int64_t n_pad = (n + nt - 1) / nt * nt;
    if (!x_quantized) quantize_q8(x, n_pad, k, q8, s);
    xq = q8.q;
    xds = q8.ds;
  }
  int rows = int(w.rows), nn = int(n);
  void* args[] = {&wp, &w2, &xq, &xds, &xf, &out, &rows, &nn};
  launch(matvec_fn(w.kind, k, nt), unsigned((w.rows + 3) / 4), unsigned((n + nt - 1) / nt), 1, 128,
         0, s, args, "matvec");
}

void CudaKernels::rms_norm(CUdeviceptr x, CUdeviceptr w, CUdeviceptr out, int64_t n, int64_t dim,
                           float eps, const Stream& s) {
  int d = int(dim);
  void* args[] = {&x, &w, &out, &d, &eps};
  launch(elementwise_fn("rms_norm"), unsigned(n), 1, 1, 256, 0, s, args, "rms_norm");
}

void CudaKernels::rope(CUdeviceptr x, CUdeviceptr cache, int64_t n, int n_heads, int head_dim,
                       int n_rot, bool neox, const Stream& s) {
  int nx = neox ? 1 : 0;
  void* args[] = {&x, &cache, &n_heads, &head_dim, &n_rot, &nx};
  launch(elementwise_fn("rope"), unsigned(n), 1, 1, 128, 0, s, args, "rope");
}

void CudaKernels::swiglu(CUdeviceptr gate, CUdeviceptr up, CUdeviceptr out, int64_t count,
                         const Stream& s) {
  long long c = count;
  void* args[] = {&gate, &up, &out, &c};
  launch(elementwise_fn("swiglu"), blocks_for(count, 256, 4096), 1, 1, 256, 0, s, args, "swiglu");
}

void CudaKernels::add(CUdeviceptr acc, CUdeviceptr x, int64_t count, const Stream& s) {
  long long c = count;
  void* args[] = {&acc, &x, &c};
  launch(elementwise_fn("add"), blocks_for(count, 256, 4096), 1, 1, 256, 0, s, args, "add");
}

void CudaKernels::store_kv(CUdeviceptr src, CUdeviceptr rows, uint64_t offset, int64_t n, int dim,
                           bool f16, const Stream& s) {
  int h = f16 ? 1 : 0;
  unsigned long long off = offset;
  void* args[] = {&src, &rows, &off, &dim, &h};
  launch(elementwise_fn("store_kv"), unsigned(n), 1, 1, 128, 0, s, args, "store_kv");
}

void CudaKernels::attention(const AttentionCall& a, const Stream& s) {
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    throw_error("attention: {} query heads do not group over {} KV heads", a.n_head, a.n_head_kv);
  const auto key = std::make_pair(a.head_dim, a.kv_f16);
  auto it = attention_.find(key);
  if (it == attention_.end()) {
    const Module& m = compiler_.module(attention_source(a.head_dim, a.kv_f16),
                                       fmt::format("attention head_dim={}", a.head_dim));
    it = attention_.emplace(key, m.function("attention")).first;
  }
  CUdeviceptr q = a.q, out = a.out, pages = a.pages, row_pt = a.row_pt, n_kv = a.n_kv;
  unsigned long long koff = a.koff, voff = a.voff;
  int pt = a.page_tokens, rb = a.row_bytes, nh = a.n_head, group = a.n_head / a.n_head_kv;
  float scale = a.scale;
  void* args[] = {&q, &out, &pages, &row_pt, &n_kv, &koff, &voff, &pt, &rb, &nh, &group, &scale};
  launch(it->second, unsigned(a.n_rows), unsigned(a.n_head), 1, 128, 0, s, args, "attention");
}

}  // namespace jitllm::cuda
