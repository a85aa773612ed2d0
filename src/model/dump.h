// Dumping intermediate tensors by name, for comparing with llama.cpp's or transformers'.
//   JITLLM_DUMP=attn_norm,ffn_out   names to dump ("all" dumps every named tensor)
//   JITLLM_DUMP_DIR=dir             where to write (default: the current directory)
// Each named tensor of layer L is written as <dir>/<name>.<L>.f32 (layer-less tensors such as
// inp_embd and result_output as <dir>/<name>.f32): little-endian float32 rows [n_rows, cols].
// The first write of a file in a process truncates it, later steps append their rows, so a
// chunked prefill dumps every prompt row in order. Names follow llama.cpp's callbacks: inp_embd,
// attn_norm, Qcur, Kcur, Vcur (Q/K after RoPE), kqv_out, attn_out, ffn_inp, ffn_norm, ffn_swiglu,
// ffn_out, l_out, result_norm, result_output.
#pragma once

#include <set>
#include <string>

#include "graph/ops.h"

namespace jitllm {

class TensorDumper {
 public:
  TensorDumper();  // reads JITLLM_DUMP / JITLLM_DUMP_DIR
  bool enabled() const { return !paused_ && (all_ || !names_.empty()); }
  // While paused nothing is written (the engine's warm-up steps are not the caller's).
  void pause(bool paused) { paused_ = paused; }
  // Writes `x` if `name` is selected; il < 0 for tensors outside the layers.
  void operator()(Ops& ops, Act x, const char* name, int il);

 private:
  bool all_ = false;
  bool paused_ = false;
  std::set<std::string> names_;
  std::string dir_ = ".";
  std::set<std::string> written_;
};

}  // namespace jitllm
