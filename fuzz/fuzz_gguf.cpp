// libFuzzer target: parse_gguf on arbitrary bytes. Any outcome but a result or a jitllm::Error
// (a crash, a sanitizer report, another exception, a huge allocation) is a bug. On success every
// tensor's bytes are read, so a tensor view past the input is caught by ASan.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    jitllm::GgufParsed p = jitllm::parse_gguf(data, size, "fuzz.gguf");
    volatile uint8_t sink = 0;
    for (const auto& t : p.tensors) {
      if (t.bytes == 0) continue;
      sink = sink ^ t.data[0] ^ t.data[t.bytes - 1];
      (void)t.elements();
      (void)t.rows();
    }
    (void)p.metadata.to_json(4).dump();
  } catch (const jitllm::Error&) {
  }
  return 0;
}
