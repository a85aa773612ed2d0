// KvLayout offsets (see kv.h).
#include "graph/kv.h"

namespace jitllm {

bool KvLayout::uniform() const {
  for (const LayerKv& l : layers)
    if (l.k_dim != kv_dim || l.v_dim != kv_dim || l.f32) return false;
  return layers.empty() || int(layers.size()) == n_layer;
}

size_t KvLayout::k_offset(int il) const {
  if (layers.empty()) return plane_bytes() * size_t(2 * il);
  size_t off = 0;
  for (int j = 0; j < il; ++j) {
    const LayerKv& l = layers[size_t(j)];
    const size_t elem = l.f32 ? 4 : elem_bytes();
    off += plane(l.k_dim, elem) + plane(l.v_dim, elem);
  }
  return off;
}

size_t KvLayout::page_bytes() const {
  return layers.empty() ? plane_bytes() * 2 * size_t(n_layer) : k_offset(int(layers.size()));
}

}  // namespace jitllm
