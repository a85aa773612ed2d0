// resolve_cpu_kernels: names -> the process-wide CpuKernels (one JitKernels per ISA level, made
// on first use; their kernel caches live as long as the process).
#include "runtime/cpu_kernels.h"

#include <iterator>
#include <memory>
#include <mutex>

#include "backend/cpu/jit_kernels.h"
#include "backend/cpu/tuning.h"
#include "core/error.h"

namespace jitllm {

namespace {

constexpr jit::Isa kLevels[] = {jit::Isa::Avx2, jit::Isa::AvxVnni, jit::Isa::Avx512Vnni};
constexpr const char* kKnown = "jit, jit-avx2, jit-avxvnni, jit-avx512, jit-amx or reference";

// The kernels of kLevels[i], made on first use.
const CpuKernels& jit_at(size_t i) {
  static std::mutex mutex;
  static std::unique_ptr<JitKernels> made[std::size(kLevels)];
  std::lock_guard lock(mutex);
  if (!made[i]) made[i] = std::make_unique<JitKernels>(kLevels[i]);
  return *made[i];
}

// `what` is the flag or variable with its value, for the error ("--kernels x", "JITLLM_KERNELS=x").
// AVX-512 with AMX tiles for the prompt GEMMs, made on first use.
const CpuKernels& jit_amx(const std::string& what) {
  if (!jit::amx_usable())
    throw_error("{}: this CPU or kernel does not let the process use AMX tiles (use jit or reference)",
                what);
  if (jit::selected_amx()) return jit_kernels();  // the same kernels (and kernel cache) as "jit"
  static const JitKernels kernels(jit::Isa::Avx512Vnni, true);
  return kernels;
}

const CpuKernels& by_name(const std::string& name, const std::string& what) {
  if (name == "jit") return jit_kernels();
  if (name == "jit-amx") return jit_amx(what);
  if (name == "reference" || name == "ref") return reference_kernels();
  for (size_t i = 0; i < std::size(kLevels); ++i)
    if (name == std::string("jit-") + jit::isa_name(kLevels[i])) {
      if (!jit::cpu_supports(kLevels[i]))
        throw_error("{}: this CPU cannot run {} (use jit or reference)", what,
                    jit::isa_name(kLevels[i]));
      return jit_at(i);
    }
  throw_error("{}: unknown CPU kernels (use {})", what, kKnown);
}

}  // namespace

namespace {

const CpuKernels& chosen(const std::string& name) {
  if (!name.empty()) return by_name(name, "--kernels " + name);
  if (const tuning::Choice& k = jit::knobs().kernels; !k.is("auto"))
    return by_name(k.text(), "JITLLM_KERNELS=" + k.text());
  return jit::cpu_supports(jit::Isa::Avx2) ? jit_kernels() : reference_kernels();
}

}  // namespace

const CpuKernels& resolve_cpu_kernels(const std::string& name, bool batch_invariant) {
  const CpuKernels& k = chosen(name);
  if (!batch_invariant || k.batch_invariant()) return k;
  const auto* jk = dynamic_cast<const JitKernels*>(&k);
  const std::string asked = !name.empty() ? name : jit::knobs().kernels.text();
  if (!jk || asked == "jit-amx")
    throw_error("kernels {} are not batch-invariant (AMX tiles); deterministic steps need jit, "
                "jit-avx512 or reference", k.name());
  for (size_t i = 0; i < std::size(kLevels); ++i)
    if (kLevels[i] == jk->isa()) return jit_at(i);
  throw_error("no batch-invariant kernels for {}", k.name());
}

std::vector<std::string> jit_kernel_names() {
  std::vector<std::string> out;
  for (jit::Isa isa : kLevels)
    if (jit::cpu_supports(isa)) out.push_back(std::string("jit-") + jit::isa_name(isa));
  if (jit::amx_usable()) out.push_back("jit-amx");
  return out;
}

}  // namespace jitllm
