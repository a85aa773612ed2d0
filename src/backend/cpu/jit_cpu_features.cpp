// CPUID-based instruction-set detection (through Xbyak's CPUID wrapper) and the JITLLM_ISA override.
#include "backend/cpu/jit_cpu_features.h"

#include <sys/syscall.h>
#include <unistd.h>
#include <xbyak/xbyak_util.h>

#include "backend/cpu/tuning.h"
#include "core/error.h"

namespace jitllm::jit {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512Vnni: return "avx512";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
  static const Xbyak::util::Cpu cpu;
  using C = Xbyak::util::Cpu;
  const bool avx2 = cpu.has(C::tAVX2) && cpu.has(C::tFMA) && cpu.has(C::tF16C);
  switch (isa) {
    case Isa::Avx2: return avx2;
    case Isa::AvxVnni: return avx2 && cpu.has(C::tAVX_VNNI);
    case Isa::Avx512Vnni:
      return avx2 && cpu.has(C::tAVX512F) && cpu.has(C::tAVX512BW) && cpu.has(C::tAVX512VL) &&
             cpu.has(C::tAVX512_VNNI);
  }
  return false;
}

Isa cpu_best_isa() {
  static const Isa best = [] {
    if (cpu_supports(Isa::Avx512Vnni)) return Isa::Avx512Vnni;
    if (cpu_supports(Isa::AvxVnni)) return Isa::AvxVnni;
    if (cpu_supports(Isa::Avx2)) return Isa::Avx2;
    throw_error("jit kernels need AVX2, FMA and F16C; this CPU lacks them");
  }();
  return best;
}

Isa selected_isa() {
  const tuning::Choice& knob = knobs().isa;
  if (knob.is("auto")) return cpu_best_isa();
  const Isa isa = knob.is("avx2") ? Isa::Avx2 : knob.is("avxvnni") ? Isa::AvxVnni : Isa::Avx512Vnni;
  if (knob.is("amx") && !amx_usable())
    throw_error("JITLLM_ISA=amx: this CPU or kernel does not let the process use AMX tiles");
  if (!cpu_supports(isa)) throw_error("JITLLM_ISA={}: this CPU does not support it", knob.text());
  return isa;
}

namespace {

constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an XSAVE feature's state
constexpr int kXfeatureTileData = 18;      // XTILEDATA

bool cpu_has_amx() {
  static const Xbyak::util::Cpu cpu;
  using C = Xbyak::util::Cpu;
  if (!cpu.has(C::tAMX_TILE) || !cpu.has(C::tAMX_INT8) || !cpu_supports(Isa::Avx512Vnni))
    return false;
  // XCR0 bits 17 (TILECFG) and 18 (TILEDATA): the OS saves the tile state.
  const uint64_t xcr0 = Xbyak::util::Cpu::getXfeature();
  return (xcr0 & (3ull << 17)) == (3ull << 17);
}

bool request_tile_data() {
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0;
}

}  // namespace

bool amx_usable() {
  static const bool usable = cpu_has_amx() && request_tile_data();
  return usable;
}

bool amx_thread_ready() {
  thread_local const bool ready = amx_usable() && request_tile_data();
  return ready;
}

bool selected_amx() {
  const tuning::Choice& knob = knobs().isa;
  if (knob.is("amx")) {
    if (!amx_usable())
      throw_error("JITLLM_ISA=amx: this CPU or kernel does not let the process use AMX tiles");
    return true;
  }
  return knob.is("auto") && amx_usable();
}

}  // namespace jitllm::jit
