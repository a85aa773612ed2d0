// llama.cpp's attention flags as jitllm honours them: -ctk/-ctv (--cache-type-k/-v) choose the
// KV cache's type, -fa (--flash-attn) the attention path. What jitllm cannot do is refused with a
// message, never accepted and ignored.
#pragma once

#include <string>

#include "quant/types.h"

namespace jitllm {

// K and V share one type here: f16 (default) or f32. A quantized KV cache (q8_0, q4_0, ...) and
// K != V are refused, naming the flag.
QuantType kv_cache_type(const std::string& type_k, const std::string& type_v);

// jitllm has one attention path per device, fused (scores never leave the kernel): "on", "auto"
// (and "1"/"true"/"") select it; "off" is refused (there is no unfused path to switch to).
void check_flash_attn(const std::string& value);

}  // namespace jitllm
