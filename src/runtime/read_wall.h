// The memory wall a decode step runs against, for `jitllm speed` and `jitllm batched`: the read
// bandwidth measured in this process (the card's read-only reduction for --devices cuda*, the
// host's streaming read otherwise), and the weight bytes one decode step reads. In runtime
// because it measures the devices the backends run on; front ends only read the numbers.
#pragma once

#include <string>

#include "io/model_file.h"

namespace jitllm {

struct ReadWall {
  double gbs = 0;   // GB/s
  std::string how;  // what measured it, for the report line
};

// devices: the --devices value ("cpu", "cuda", "cuda:N", ...).
ReadWall measure_read_wall(const std::string& devices);

// Weight bytes one decode step of `sessions` sessions reads: every matrix and vector once,
// except the embedding table (one row per session) unless it is also the head, and a stack of
// experts (a "_exps." tensor) only for the experts the step chooses: expert_used_count of
// expert_count for one session, for S sessions the expected share of distinct experts when each
// row chooses uniformly, 1 - (1 - used / count)^S (the least a step can read).
double weight_bytes_per_token(const ModelFile& f, int sessions = 1);

}  // namespace jitllm
