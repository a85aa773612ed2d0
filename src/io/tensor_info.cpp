// Shape arithmetic of TensorInfo. Readers check shapes for overflow before building a TensorInfo,
// so these products cannot overflow for a tensor that came out of a reader.
#include "io/tensor_info.h"

namespace jitllm {

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorInfo::rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace jitllm
