// --devices, --vram-budget and --host-budget, the same on every command that loads a model (runtime/placement.h
// says what they mean; bad values are reported by the Engine, naming the flag).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace jitllm::cli {

inline void add_device_flags(CLI::App& app, std::string& devices, std::string& vram_budget,
                             int& gpu_layers, std::string& host_budget) {
  app.add_option("--devices", devices,
                 "where the model runs: cpu (default), cuda (every card), cuda:N or a list "
                 "(cuda:0,cuda:1); layers that do not fit on the cards run on the host");
  app.add_option("--vram-budget", vram_budget,
                 "most memory to use on each card, e.g. 6G, or one per card: 6G,4G (ignored with "
                 "--devices cpu)");
  app.add_option("--gpu-layers,--n-gpu-layers", gpu_layers,
                 "at most this many layers on the cards, the first ones (-ngl; default: all that fit)");
  app.add_option("--host-budget", host_budget,
                 "most host memory for the model with --devices cpu, e.g. 6G (default: what the "
                 "machine can spare); MoE experts that do not fit are paged from disk");
}

// llama.cpp's -fa / -ctk / -ctv (runtime/attention_flags.h says what jitllm takes).
struct AttentionFlags {
  std::string flash_attn = "auto", cache_type_k = "f16", cache_type_v = "f16";
};

inline void add_attention_flags(CLI::App& app, AttentionFlags& flags) {
  app.add_option("--flash-attn", flags.flash_attn,
                 "-fa: on or auto (jitllm's attention is always fused); off is refused")
      ->expected(0, 1);
  app.add_option("--cache-type-k", flags.cache_type_k, "-ctk: KV cache type, f16 (default) or f32");
  app.add_option("--cache-type-v", flags.cache_type_v, "-ctv: the same as -ctk (K and V share one type)");
}

}  // namespace jitllm::cli
