// The AMX GEMM kernel emitter (jit_amx.h): one kernel per (format, k, tokens per tile). A call
// runs `tiles` token tiles, each against `panels` 16-row panels; per (tile, panel) it walks k in
// scale groups (a pair of 32-blocks, or one 256-super-block), forms the groups' int32 sums on the
// tiles (tdpbssd), stores them to the scratch and applies the scales in AVX-512 into 16
// accumulators, one zmm per token (lane r = row r).
#include <xbyak/xbyak.h>

#include <cstddef>
#include <mutex>
#include <utility>
#include <unordered_map>

#include "backend/cpu/jit_amx.h"
#include "backend/cpu/jit_amx_layout.h"
#include "core/error.h"
#include "quant/formats.h"

namespace jitllm::jit {

namespace {

using namespace Xbyak;
using namespace amx_layout;

class AmxEmitter : public CodeGenerator {
 public:
  explicit AmxEmitter(const AmxKey& key)
      : CodeGenerator(4096, AutoGrow), key_(key), al_(act_layout(key.type, key.k)) {
    if (!amx_supported(key.type, key.k) || key.tokens < 1 || key.tokens > kAmxTokens)
      throw_error("amx kernel: {} k={} tokens={} unsupported", quant_name(key.type), key.k,
                  key.tokens);
    emit();
    ready();
  }
  AmxFn fn() const { return getCode<AmxFn>(); }

 private:
  // buf reuses the argument register once the arguments are read. The outer loops' state lives
  // in the stack frame: [rsp] tiles left, [rsp + 8] first panel, [rsp + 16] panel count,
  // [rsp + 24] the tile's output.
  const Reg64 args = rdi, buf = rdi, astride = rsi, c64 = rcx, pcur = r8, ap = r9, ocur = r10,
              ostride = r11, pcnt = r12, sums = r13, gcnt = r14, gp = r15, gap = rbx, gdp = rbp,
              gsp = rdx, op = rax;
  static constexpr int kFrame = 32, kTiles = 0, kPanel = 8, kPanels = 16, kOut = 24;
  AmxKey key_;
  ActLayout al_;
  Label cfg_;

  bool block32() const { return key_.type == QuantType::Q8_0 || key_.type == QuantType::Q4_0; }
  int T() const { return key_.tokens; }
  int P() const { return int(al_.bytes); }                  // bytes per token's activation
  int sums_stride() const { return int(key_.k / 32 * 4); }  // bytes per token of AmxArgs::sums

  void emit() {
    for (const Reg64& r : {rbx, rbp, r12, r13, r14, r15}) push(r);
    sub(rsp, kFrame);
    for (auto [from, to] : {std::pair{offsetof(AmxArgs, tiles), kTiles},
                            {offsetof(AmxArgs, panel), kPanel},
                            {offsetof(AmxArgs, panels), kPanels},
                            {offsetof(AmxArgs, out), kOut}}) {
      mov(rax, ptr[args + from]);
      mov(ptr[rsp + to], rax);
    }
    mov(ap, ptr[args + offsetof(AmxArgs, act)]);
    mov(ostride, ptr[args + offsetof(AmxArgs, out_stride)]);
    mov(sums, ptr[args + offsetof(AmxArgs, sums)]);
    mov(eax, dword[args + offsetof(AmxArgs, row_mask)]);
    kmovw(k1, eax);
    mov(buf, ptr[args + offsetof(AmxArgs, scratch)]);
    mov(astride, P());
    mov(c64, 64);
    ldtilecfg(ptr[rip + cfg_]);

    Label tile_loop, panel_loop, group_loop;
    L(tile_loop);
    mov(pcur, ptr[rsp + kPanel]);
    mov(pcnt, ptr[rsp + kPanels]);
    mov(ocur, ptr[rsp + kOut]);
    L(panel_loop);
    for (int t = 0; t < T(); ++t) vxorps(Zmm(t), Zmm(t), Zmm(t));
    mov(gp, pcur);
    mov(gap, ap);
    lea(gdp, ptr[ap + al_.d]);
    mov(gsp, sums);
    if (block32()) {
      mov(gcnt, key_.k / 64);  // pairs of 32-blocks
      L(group_loop);
      body_block32_pair();
      add(gp, int(2 * kB32Bytes));
      add(gap, 64);
      add(gdp, 8);
    } else {
      mov(gcnt, key_.k / kQK_K);
      L(group_loop);
      body_kquant();
      add(gp, int(kquant_sb_bytes(key_.type)));
      add(gap, kQK_K);
      add(gdp, 4);
      add(gsp, 32);
    }
    dec(gcnt);
    jnz(group_loop, T_NEAR);

    mov(op, ocur);
    for (int t = 0; t < T(); ++t) {
      vmovups(ptr[op] | k1, Zmm(t));
      if (t + 1 < T()) add(op, ostride);
    }
    add(pcur, int(amx_panel_bytes(key_.type, key_.k)));
    add(ocur, kAmxRows * 4);
    dec(pcnt);
    jnz(panel_loop, T_NEAR);

    add(ap, T() * P());
    add(sums, T() * sums_stride());
    mov(rax, ostride);
    imul(rax, rax, T());
    add(ptr[rsp + kOut], rax);
    dec(qword[rsp + kTiles]);
    jnz(tile_loop, T_NEAR);

    tilerelease();
    vzeroupper();
    add(rsp, kFrame);
    for (const Reg64& r : {r15, r14, r13, r12, rbp, rbx}) pop(r);
    ret();
    emit_config();
  }

  // Two 32-blocks: their sums on tmm3 / tmm4 (A tiles tmm0 / tmm5, B tiles tmm1 / tmm2), then per
  // token acc += float(sum) * (d_w * d_a) for each block.
  void body_block32_pair() {
    tilezero(tmm3);
    tilezero(tmm4);
    tileloadd(tmm0, ptr[gap + astride]);
    tileloadd(tmm1, ptr[gp + c64]);
    tdpbssd(tmm3, tmm0, tmm1);
    tileloadd(tmm5, ptr[gap + astride + 32]);
    tileloadd(tmm2, ptr[gp + c64 + int(kB32Bytes)]);
    tdpbssd(tmm4, tmm5, tmm2);
    tilestored(ptr[buf + c64], tmm3);
    tilestored(ptr[buf + c64 + 1024], tmm4);
    for (int b = 0; b < 2; ++b) {
      const Zmm dw(16 + b);
      vmovups(dw, ptr[gp + int(b * kB32Bytes + kB32Tile)]);
      for (int t = 0; t < T(); ++t) {
        const Zmm sum(18 + 2 * (t % 4)), scale(19 + 2 * (t % 4));
        vcvtdq2ps(sum, ptr[buf + b * 1024 + t * 64]);
        vmulps(scale, dw, ptr_b[gdp + 4 * b + t * P()]);
        vfmadd231ps(Zmm(t), sum, scale);
      }
    }
  }

  // One super-block: 64 sum(a hi) + sum(a lo) over its 4 tiles of 64 elements (tmm3 / tmm4), then
  // per token acc += float(isum) * (d_w * d_a) - float(Σ_j m_j sums_j) * (dmin_w * d_a).
  void body_kquant() {
    const bool mins = key_.type == QuantType::Q4_K;
    tilezero(tmm3);
    tilezero(tmm4);
    for (int q = 0; q < 4; ++q) {
      tileloadd(tmm0, ptr[gap + astride + q * 64]);
      tileloadd(tmm1, ptr[gp + c64 + int(kKHi + q * kKTile)]);
      tileloadd(tmm2, ptr[gp + c64 + int(kKLo + q * kKTile)]);
      tdpbssd(tmm3, tmm0, tmm1);
      tdpbssd(tmm4, tmm0, tmm2);
    }
    tilestored(ptr[buf + c64], tmm3);
    tilestored(ptr[buf + c64 + 1024], tmm4);
    const Zmm dw(24), dmin(25);
    vmovups(dw, ptr[gp + int(kKd)]);
    if (mins) {
      vmovups(dmin, ptr[gp + int(kKdmin)]);
      for (int j = 0; j < 8; ++j) vmovups(Zmm(16 + j), ptr[gp + int(kKmins + 64 * j)]);
    }
    for (int t = 0; t < T(); ++t) {
      const Zmm isum(26 + (t % 2)), scale(28 + (t % 2)), msum(30), mscale(31);
      vmovdqu32(isum, ptr[buf + t * 64]);
      vpslld(isum, isum, 6);
      vpaddd(isum, isum, ptr[buf + 1024 + t * 64]);
      vcvtdq2ps(isum, isum);
      vmulps(scale, dw, ptr_b[gdp + t * P()]);
      vfmadd231ps(Zmm(t), isum, scale);
      if (mins) {
        const int s = t * sums_stride();
        vmulps(msum, Zmm(16), ptr_b[gsp + s]);
        for (int j = 1; j < 8; ++j) vfmadd231ps(msum, Zmm(16 + j), ptr_b[gsp + s + 4 * j]);
        vmulps(mscale, dmin, ptr_b[gdp + t * P()]);
        vfnmadd231ps(Zmm(t), msum, mscale);
      }
    }
  }

  // The tile configuration (palette 1): colsb[i] at byte 16 + 2 i, rows[i] at byte 48 + i.
  void emit_config() {
    uint8_t cfg[64] = {};
    cfg[0] = 1;
    auto set = [&](int tmm, int rows, int colsb) {
      cfg[16 + 2 * tmm] = uint8_t(colsb);
      cfg[48 + tmm] = uint8_t(rows);
    };
    if (block32()) {
      set(0, T(), 32);  // A: T tokens x 32 int8
      set(5, T(), 32);
      set(1, 8, 64);  // B: 8 rows of 4 elements x 16 weight rows
      set(2, 8, 64);
    } else {
      set(0, T(), 64);  // A: T tokens x 64 int8
      set(1, 16, 64);   // B: 16 rows of 4 elements x 16 weight rows
      set(2, 16, 64);
    }
    set(3, T(), 64);  // C: T tokens x 16 int32
    set(4, T(), 64);
    align(64);
    L(cfg_);
    for (uint8_t b : cfg) db(b);
  }
};

struct KeyHash {
  size_t operator()(const AmxKey& k) const {
    return (size_t(k.type) * 1000003u ^ size_t(k.k)) * 1000003u ^ size_t(k.tokens);
  }
};

}  // namespace

AmxFn amx_kernel(const AmxKey& key) {
  static std::mutex mutex;
  static std::unordered_map<AmxKey, std::unique_ptr<AmxEmitter>, KeyHash> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<AmxEmitter>(key);
  return slot->fn();
}

std::vector<uint8_t> amx_kernel_code(const AmxKey& key) {
  const AmxEmitter e(key);
  return std::vector<uint8_t>(e.getCode(), e.getCode() + e.getSize());
}

}  // namespace jitllm::jit
