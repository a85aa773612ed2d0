// Host side of the native block formats (weight_formats.h): kind names and ids, and the
// repacking of GGUF blocks into the card layouts (and back, for the tests).
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/packed_weight.h"
#include "backend/cuda/tuning.h"
#include "backend/cuda/weight_formats.h"
#include "core/error.h"
#include "quant/formats.h"
#include "quant/ref_kernels.h"

namespace jitllm::cuda {

namespace {

struct FormatInfo {
  WeightKind kind;
  QuantType type;
  const char* name;
  int block;         // values per block
  int gguf_bytes;    // GGUF block size
  int main_bytes;    // record in the main plane
  int aux_bytes;     // record in the aux plane (0: none)
};

constexpr FormatInfo kFormats[] = {
    {WeightKind::Q4_0, QuantType::Q4_0, "q4_0", 32, 18, 16, 2},
    {WeightKind::Q4_1, QuantType::Q4_1, "q4_1", 32, 20, 16, 4},
    {WeightKind::Q5_0, QuantType::Q5_0, "q5_0", 32, 22, 16, 8},
    {WeightKind::Q5_1, QuantType::Q5_1, "q5_1", 32, 24, 16, 8},
    {WeightKind::Q5_K, QuantType::Q5_K, "q5_k", 256, 176, 176, 0},
    {WeightKind::Q3_K, QuantType::Q3_K, "q3_k", 256, 110, 112, 2},
    {WeightKind::Q2_K, QuantType::Q2_K, "q2_k", 256, 84, 80, 4},
    {WeightKind::IQ4_NL, QuantType::IQ4_NL, "iq4_nl", 32, 18, 16, 2},
    {WeightKind::MXFP4, QuantType::MXFP4, "mxfp4", 32, 17, 16, 1},
};

const FormatInfo* info_for(WeightKind kind) {
  for (const FormatInfo& f : kFormats)
    if (f.kind == kind) return &f;
  return nullptr;
}

const FormatInfo& info_or_throw(WeightKind kind) {
  const FormatInfo* f = info_for(kind);
  if (!f) throw_error("CUDA weight formats: kind {} is not a block format of weight_formats.h", int(kind));
  return *f;
}

// One GGUF block <-> (main record, aux record). `to_card` picks the direction.
void convert_block(WeightKind kind, uint8_t* gguf, uint8_t* main, uint8_t* aux, bool to_card) {
  auto mv = [&](uint8_t* card, uint8_t* g, size_t n) {
    if (to_card) std::memcpy(card, g, n);
    else std::memcpy(g, card, n);
  };
  switch (kind) {
    case WeightKind::Q4_0:
    case WeightKind::IQ4_NL:  // {half d, qs[16]}
      mv(aux, gguf, 2);
      mv(main, gguf + 2, 16);
      return;
    case WeightKind::Q4_1:  // {half d, half m, qs[16]}
      mv(aux, gguf, 4);
      mv(main, gguf + 4, 16);
      return;
    case WeightKind::MXFP4:  // {u8 e, qs[16]}
      mv(aux, gguf, 1);
      mv(main, gguf + 1, 16);
      return;
    case WeightKind::Q5_0:  // {half d, qh[4], qs[16]} -> aux {qh, d, 0}
      mv(aux, gguf + 2, 4);
      mv(aux + 4, gguf, 2);
      if (to_card) aux[6] = aux[7] = 0;
      mv(main, gguf + 6, 16);
      return;
    case WeightKind::Q5_1:  // {half d, half m, qh[4], qs[16]} -> aux {qh, d, m}
      mv(aux, gguf + 4, 4);
      mv(aux + 4, gguf, 4);
      mv(main, gguf + 8, 16);
      return;
    case WeightKind::Q5_K:
      mv(main, gguf, 176);
      return;
    case WeightKind::Q3_K: {  // {hmask[32], qs[64], scales[12], half d} -> [qs][hmask][sc-32 x16] | d
      mv(main, gguf + 32, 64);
      mv(main + 64, gguf, 32);
      mv(aux, gguf + 108, 2);
      if (to_card) {
        int8_t sc[16];
        quant_ref::q3k_scales(gguf + 96, sc);
        for (int j = 0; j < 16; ++j) main[96 + j] = uint8_t(int8_t(sc[j] - 32));
      } else {  // pack the 6-bit scales back the way q3k_scales reads them
        uint8_t* p = gguf + 96;
        std::memset(p, 0, 12);
        for (int j = 0; j < 16; ++j) {
          const int v = int(int8_t(main[96 + j])) + 32;
          if (j < 8) p[j] |= uint8_t(v & 0xF);
          else p[j - 8] |= uint8_t((v & 0xF) << 4);
          p[8 + j % 4] |= uint8_t(((v >> 4) & 3) << (2 * (j / 4)));
        }
      }
      return;
    }
    case WeightKind::Q2_K:  // {scales[16], qs[64], half d, half dmin} -> [qs][scales] | (d, dmin)
      mv(main, gguf + 16, 64);
      mv(main + 64, gguf, 16);
      mv(aux, gguf + 80, 4);
      return;
    default:
      throw_error("CUDA weight formats: kind {} is not a block format", int(kind));
  }
}

}  // namespace

bool is_format_kind(WeightKind kind) { return info_for(kind) != nullptr; }

WeightKind format_kind_for(QuantType type, bool* ok) {
  for (const FormatInfo& f : kFormats)
    if (f.type == type) {
      *ok = true;
      return f.kind;
    }
  *ok = false;
  return WeightKind::F32;
}

QuantType format_quant_type(WeightKind kind) { return info_or_throw(kind).type; }

const char* format_kind_name(WeightKind kind) {
  const FormatInfo* f = info_for(kind);
  return f ? f->name : "?";
}

bool format_runs_native(WeightKind kind) {
  const int mode = knobs().native_formats.number();  // 0 none, 1 blocks of 32, 2 all
  const FormatInfo* f = info_for(kind);
  if (!f || mode == 0) return false;
  return mode == 2 || f->block == 32;
}

int format_kind_id(WeightKind kind) { return int(info_or_throw(kind).kind); }

int64_t format_row_multiple(WeightKind kind) { return info_or_throw(kind).block; }

void pack_format_weight(QuantType type, const uint8_t* data, int64_t rows, int64_t k,
                        PackedWeight& p) {
  bool ok = false;
  const WeightKind kind = format_kind_for(type, &ok);
  if (!ok) throw_error("CUDA: {} is not one of the natively packed block formats", quant_name(type));
  const FormatInfo& f = *info_for(kind);
  if (k <= 0 || k % f.block != 0)
    throw_error("CUDA {}: row length {} is not a positive multiple of {}", f.name, k, f.block);
  const size_t nblk = size_t(rows) * size_t(k / f.block);
  p.kind = kind;
  p.rows = rows;
  p.k = k;
  p.converted = false;
  p.scale_offset = f.aux_bytes ? nblk * size_t(f.main_bytes) : 0;
  p.bytes.assign(nblk * size_t(f.main_bytes + f.aux_bytes), 0);
  uint8_t block[176];
  for (size_t i = 0; i < nblk; ++i) {
    std::memcpy(block, data + i * size_t(f.gguf_bytes), size_t(f.gguf_bytes));
    convert_block(kind, block, p.bytes.data() + i * size_t(f.main_bytes),
                  p.bytes.data() + p.scale_offset + i * size_t(f.aux_bytes), true);
  }
}

std::vector<uint8_t> unpack_format_weight(const PackedWeight& p) {
  const FormatInfo& f = info_or_throw(p.kind);
  const size_t nblk = size_t(p.rows) * size_t(p.k / f.block);
  if (p.bytes.size() != nblk * size_t(f.main_bytes + f.aux_bytes))
    throw_error("CUDA {}: packed weight of {} bytes for {} blocks", f.name, p.bytes.size(), nblk);
  std::vector<uint8_t> out(nblk * size_t(f.gguf_bytes));
  std::vector<uint8_t> main(p.bytes);  // convert_block takes mutable records in both directions
  for (size_t i = 0; i < nblk; ++i)
    convert_block(p.kind, out.data() + i * size_t(f.gguf_bytes), main.data() + i * size_t(f.main_bytes),
                  main.data() + p.scale_offset + i * size_t(f.aux_bytes), false);
  return out;
}

}  // namespace jitllm::cuda
