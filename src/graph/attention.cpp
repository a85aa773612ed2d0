// refuse_unplain_attention (see attention.h).
#include "graph/attention.h"

#include "core/error.h"

namespace jitllm {

void refuse_unplain_attention(const AttnSpec& s, const std::string& backend) {
  if (!s.causal) throw_error("{}: bidirectional attention is not implemented", backend);
  if (s.window != 0) throw_error("{}: sliding-window attention ({} positions) is not implemented", backend, s.window);
  if (s.softcap != 0.0f) throw_error("{}: attention logit soft-capping is not implemented", backend);
  if (s.sinks) throw_error("{}: attention sinks are not implemented", backend);
  if (s.v_in_k)
    throw_error("{}: V read from the K rows (multi-head latent attention's cache) is not "
                "implemented",
                backend);
  if (s.head_dim_k != s.head_dim_v)
    throw_error("{}: K head size {} != V head size {} is not implemented", backend, s.head_dim_k,
                s.head_dim_v);
}

}  // namespace jitllm
