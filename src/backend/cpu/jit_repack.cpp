// Row-interleaved decode copies of weight matrices (layout in jit_repack.h): the field table per
// format and the copy itself, group by group over the pool.
#include "backend/cpu/jit_repack.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "backend/cpu/tuning.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/formats.h"

namespace jitllm::jit {

bool repack_supported(QuantType type) {
  return type == QuantType::Q8_0 || type == QuantType::Q4_K || type == QuantType::Q6_K;
}

RepackFields repack_fields(QuantType type) {
  switch (type) {
    case QuantType::Q8_0: return {34, 0, 0, 2, 32, 0, 2};
    case QuantType::Q4_K: return {144, 0, 16, 16, 128, 0, 0};
    case QuantType::Q6_K: return {210, 192, 16, 0, 192, 208, 2};
    default: throw_error("repack: no interleaved layout for {}", quant_name(type));
  }
}

namespace {

// Bump allocation from huge-page slabs (see RepackedMatrix): a request that does not fit the
// current slab's rest opens a new slab of max(32 MiB, request); the old slab's untouched rest
// costs nothing (pages are backed on first touch), at most its last partly used 2 MiB page.
constexpr size_t kSlabBytes = size_t(32) << 20;

std::pair<std::shared_ptr<const HugeBuffer>, uint8_t*> slab_alloc(size_t bytes) {
  static std::mutex mutex;
  static std::weak_ptr<HugeBuffer> current;
  static size_t used = 0;
  bytes = (bytes + 4095) / 4096 * 4096;  // each matrix starts on its own 4 KiB page
  std::lock_guard lock(mutex);
  std::shared_ptr<HugeBuffer> s = current.lock();
  if (!s || used + bytes > s->size()) {
    s = std::make_shared<HugeBuffer>(std::max(kSlabBytes, (bytes + HugeBuffer::kHugePage - 1) /
                                                              HugeBuffer::kHugePage *
                                                              HugeBuffer::kHugePage));
    current = s;
    used = 0;
  }
  uint8_t* p = s->data() + used;
  used += bytes;
  return {std::move(s), p};
}

}  // namespace

// One group of g rows (GGUF rows src_row bytes apart from src) into its main-plane (dm) and
// side-plane (ds) records, block by block; template arguments are RepackFields' entries.
template <int HdrFrom, int Hdr, int BodyFrom, int Body, int SideFrom, int Side, int BlockBytes>
void copy_group(const uint8_t* src, size_t src_row, int64_t g, int64_t nb, uint8_t* dm,
                uint8_t* ds) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t r = 0; r < g; ++r) {
      const uint8_t* blk = src + size_t(r) * src_row + size_t(b * BlockBytes);
      if constexpr (Hdr > 0) std::memcpy(dm + r * Hdr, blk + HdrFrom, Hdr);
      std::memcpy(dm + g * Hdr + r * Body, blk + BodyFrom, Body);
      if constexpr (Side > 0) std::memcpy(ds + r * Side, blk + SideFrom, Side);
    }
    dm += g * (Hdr + Body);
    ds += g * Side;
  }
}

bool repack_enabled() { return knobs().repack.on(); }

std::unique_ptr<RepackedMatrix> repack_matrix(QuantType type, const uint8_t* weights, int64_t rows,
                                              int64_t k, ThreadPool* pool) {
  const RepackFields f = repack_fields(type);
  const int64_t block_elems = quant_traits(type).block_elems;
  if (k <= 0 || k % block_elems != 0)
    throw_error("repack {}: row length {} is not a positive multiple of {}", quant_name(type), k,
                block_elems);
  if (rows <= 0) throw_error("repack {}: {} rows", quant_name(type), rows);
  const int64_t nb = k / block_elems;
  const size_t src_row = row_bytes(type, k);
  if (src_row != size_t(nb * f.block_bytes))
    throw_error("repack {}: row of {} bytes, expected {}", quant_name(type), src_row,
                nb * f.block_bytes);

  auto m = std::make_unique<RepackedMatrix>();
  m->type = type;
  m->rows = rows;
  m->k = k;
  m->main_row_bytes = nb * (f.hdr + f.body);
  m->side_row_bytes = nb * f.side;
  const size_t main_bytes = size_t(rows * m->main_row_bytes);
  const size_t side_at = (main_bytes + 63) / 64 * 64;
  m->bytes = side_at + size_t(rows * m->side_row_bytes);
  auto piece = slab_alloc(m->bytes);
  m->slab = std::move(piece.first);
  uint8_t* main = piece.second;
  uint8_t* side = main + side_at;
  m->main = main;
  m->side = side;

  const int64_t G = kRepackGroup, full = rows / G * G;
  // Rows [r0, r0 + g): one group (g = G, or 1 in the tail).
  auto group = [&](int64_t r0, int64_t g) {
    uint8_t* dm = main + size_t(r0 * m->main_row_bytes);
    uint8_t* ds = side + size_t(r0 * m->side_row_bytes);
    const uint8_t* src = weights + size_t(r0) * src_row;
    switch (type) {  // field sizes as constants, so each copy is a few moves, not a call
      case QuantType::Q8_0: return copy_group<0, 0, 2, 32, 0, 2, 34>(src, src_row, g, nb, dm, ds);
      case QuantType::Q4_K:
        return copy_group<0, 16, 16, 128, 0, 0, 144>(src, src_row, g, nb, dm, ds);
      default: return copy_group<192, 16, 0, 192, 208, 2, 210>(src, src_row, g, nb, dm, ds);
    }
  };
  auto groups = [&](int64_t g0, int64_t g1) {
    for (int64_t i = g0; i < g1; ++i) group(i * G, G);
  };
  if (pool && pool->size() > 1 && full / G > 1)
    pool->parallel_for(full / G, 16, groups);
  else
    groups(0, full / G);
  for (int64_t r = full; r < rows; ++r) group(r, 1);
  return m;
}

}  // namespace jitllm::jit
