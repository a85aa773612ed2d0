// Ops defaults every backend may override: the fused ops' plain twins, the greedy pick over
// logits rows on the host, the KV page copy of a fork.
#include "graph/ops.h"

#include "core/thread_pool.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace jitllm {

void Ops::qkv_rope_attention(int il, Act x, const Qkv& w, Act q, Act k, Act v,
                             const RopeParams& rope_params, const AttnSpec& spec, Act out) {
  const MatmulOut qkv[] = {{w.wq, q}, {w.wk, k}, {w.wv, v}};
  matmul_group(x, qkv);
  rope(q, spec.n_head, spec.head_dim_k, rope_params);
  rope(k, spec.n_head_kv, spec.head_dim_k, rope_params);
  attention(il, q, k, v, out, spec);
}

void Ops::matmul_add(const TensorInfo& w, Act x, Act out, Act acc) {
  matmul(w, x, out);
  add(acc, out);
}

void Ops::gate_up_swiglu(Act x, const TensorInfo& gate_w, const TensorInfo& up_w, Act gate,
                         Act up, Act out) {
  const MatmulOut gate_up[] = {{&gate_w, gate}, {&up_w, up}};
  matmul_group(x, gate_up);
  swiglu(gate, up, out);
}

void Ops::layer_norm(Act, const std::vector<float>&, const std::vector<float>&, float, Act) {
  throw_error("layer_norm is not implemented on this backend (encoders run on the CPU)");
}

void Ops::gelu(Act, Act) {
  throw_error("gelu is not implemented on this backend (encoders run on the CPU)");
}

void Ops::add_table_rows(const TensorInfo&, std::span<const int32_t>, Act) {
  throw_error("add_table_rows is not implemented on this backend (encoders run on the CPU)");
}

void Ops::mul(Act, Act) {
  throw_error("mul is not implemented on this backend (hybrid models run on the CPU)");
}

void Ops::short_conv(int, Act, const std::vector<float>&, int, Act) {
  throw_error("short_conv is not implemented on this backend (hybrid models run on the CPU)");
}

void Ops::copy_kv_page(const uint8_t* from, uint8_t* to, const KvLayout& kv) {
  std::memcpy(to, from, kv.page_bytes());
}

void Ops::pick_logits(Act x, const LogitsPicks& picks) {
  if (picks.rows.size() != size_t(x.rows) || picks.cols > x.cols)
    throw_error("pick_logits: {} picks of {} columns for {} rows of {}", picks.rows.size(),
                picks.cols, x.rows, x.cols);
  for (const LogitsPick& p : picks.rows) check_pick(p, picks.cols);  // before the pool: no throws there
  std::vector<float> v(size_t(x.rows * x.cols));  // [rows, cols of x]
  read(x, v.data());
  // Rows apart on the pool: each is a pass over the vocabulary.
  ThreadPool::global().parallel_for(x.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      pick_row(v.data() + size_t(r * x.cols), picks.cols, picks.rows[size_t(r)], picks.out[r]);
  });
}

void Ops::argmax_rows(Act x, int32_t* host) {
  std::vector<float> v(size_t(x.rows * x.cols));
  read(x, v.data());
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* row = v.data() + size_t(r * x.cols);
    int64_t best = 0;
    for (int64_t c = 1; c < x.cols; ++c)
      if (row[best] < row[c]) best = c;  // strictly larger: ties keep the lowest column
    host[r] = int32_t(best);
  }
}

}  // namespace jitllm
