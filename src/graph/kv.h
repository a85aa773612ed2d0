// Where a session's attention memory lives: KV pages and their layout per layer. The runtime
// owns the pages (runtime/kv_pages.h); backends read and write rows through these views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/types.h"

namespace jitllm {

// Rows of a paged sequence (a session's K or V of one layer): position p lives at
// pages[p / rows_per_page] + page_offset + (p % rows_per_page) * row_stride.
struct PagedRows {
  uint8_t* const* pages = nullptr;
  int64_t rows_per_page = 0;
  size_t page_offset = 0;
  size_t row_stride = 0;
  uint8_t* row(int64_t p) const {
    return pages[p / rows_per_page] + page_offset + size_t(p % rows_per_page) * row_stride;
  }
};

// The K and V row widths one layer keeps per position (n_head_kv * head dim each); 0 and 0: the
// layer keeps no KV (a layer that attends to another layer's cache, or has no attention).
struct LayerKv {
  int k_dim = 0, v_dim = 0;
};

// KV pages: each page holds `page_tokens` positions of one sequence for every layer, laid out
// layer after layer, each layer's K plane [page_tokens][k_dim] then its V plane
// [page_tokens][v_dim], elements of `type` (F16 or F32). With `layers` empty every layer keeps
// K and V of kv_dim (the llama family), i.e. [n_layer][2][page_tokens][kv_dim].
struct KvLayout {
  int n_layer = 0;
  int kv_dim = 0;
  int64_t page_tokens = 256;
  QuantType type = QuantType::F16;
  std::vector<LayerKv> layers;  // [n_layer] per-layer widths, or empty (every layer kv_dim)

  size_t elem_bytes() const { return type == QuantType::F16 ? 2 : 4; }
  LayerKv layer(int il) const { return layers.empty() ? LayerKv{kv_dim, kv_dim} : layers[size_t(il)]; }
  // True when every layer keeps K and V of kv_dim (row_bytes() and plane_bytes() mean something).
  bool uniform() const;
  size_t k_offset(int il) const;  // bytes into a page where layer il's K plane starts
  size_t v_offset(int il) const { return k_offset(il) + plane(layer(il).k_dim); }
  size_t page_bytes() const;
  PagedRows k_rows(uint8_t* const* pages, int il) const {
    return PagedRows{pages, page_tokens, k_offset(il), size_t(layer(il).k_dim) * elem_bytes()};
  }
  PagedRows v_rows(uint8_t* const* pages, int il) const {
    return PagedRows{pages, page_tokens, v_offset(il), size_t(layer(il).v_dim) * elem_bytes()};
  }
  // Uniform layouts: one row and one plane of kv_dim.
  size_t row_bytes() const { return size_t(kv_dim) * elem_bytes(); }
  size_t plane_bytes() const { return row_bytes() * size_t(page_tokens); }

 private:
  size_t plane(int dim) const { return size_t(dim) * elem_bytes() * size_t(page_tokens); }
};

// One sequence's KV pages (owned by the runtime's session).
struct KvSeq {
  uint8_t* const* pages = nullptr;
  int64_t n_pages = 0;
};

}  // namespace jitllm
