// Ops defaults that every backend may override: the greedy pick over logits rows on the host,
// the KV page copy of a fork.
#include "model/ops.h"

#include <cstring>
#include <vector>

namespace jitllm {

void Ops::copy_kv_page(const uint8_t* from, uint8_t* to, const KvLayout& kv) {
  std::memcpy(to, from, kv.page_bytes());
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
