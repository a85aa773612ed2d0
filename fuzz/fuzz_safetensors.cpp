// libFuzzer target: parse_safetensors (header length, JSON header, tensor entries) on arbitrary
// bytes. Any outcome but a result or a jitllm::Error is a bug; on success every tensor's first
// and last byte are read so a view past the input is caught by ASan.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    jitllm::SafetensorsParsed p = jitllm::parse_safetensors(data, size, "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const auto& t : p.tensors) {
      if (t.info.bytes == 0) continue;
      sink = sink ^ t.info.data[0] ^ t.info.data[t.info.bytes - 1];
      if (t.dtype == jitllm::SafetensorsDtype::F8_E4M3) (void)jitllm::f8_e4m3_to_f32(t.info.data[0]);
    }
  } catch (const jitllm::Error&) {
  }
  return 0;
}
