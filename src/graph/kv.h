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
// f32: the rows are float32 whatever the cache's type (a convolution's input rows, LFM2: a state
// that llama.cpp keeps in f32, where f16 rounding would drift from it).
struct LayerKv {
  int k_dim = 0, v_dim = 0;
  bool f32 = false;
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
  // Layer il's element size and type (its own f32 rows, else the cache's).
  size_t elem_bytes(int il) const { return layer(il).f32 ? 4 : elem_bytes(); }
  QuantType type_of(int il) const { return layer(il).f32 ? QuantType::F32 : type; }
  LayerKv layer(int il) const { return layers.empty() ? LayerKv{kv_dim, kv_dim} : layers[size_t(il)]; }
  // True when every layer keeps K and V of kv_dim (row_bytes() and plane_bytes() mean something).
  bool uniform() const;
  size_t k_offset(int il) const;  // bytes into a page where layer il's K plane starts
  size_t v_offset(int il) const { return k_offset(il) + plane(layer(il).k_dim, elem_bytes(il)); }
  size_t page_bytes() const;
  PagedRows k_rows(uint8_t* const* pages, int il) const {
    return PagedRows{pages, page_tokens, k_offset(il), size_t(layer(il).k_dim) * elem_bytes(il)};
  }
  PagedRows v_rows(uint8_t* const* pages, int il) const {
    return PagedRows{pages, page_tokens, v_offset(il), size_t(layer(il).v_dim) * elem_bytes(il)};
  }
  // Uniform layouts: one row and one plane of kv_dim.
  size_t row_bytes() const { return size_t(kv_dim) * elem_bytes(); }
  size_t plane_bytes() const { return row_bytes() * size_t(page_tokens); }

 private:
  size_t plane(int dim, size_t elem) const { return size_t(dim) * elem * size_t(page_tokens); }
};

// One sequence's KV pages (owned by the runtime's session).
struct KvSeq {
  uint8_t* const* pages = nullptr;
  int64_t n_pages = 0;
};

}  // namespace jitllm
