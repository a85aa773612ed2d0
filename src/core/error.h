// Errors with context. Every failure the user can cause (a bad file, a bad flag, a bad request)
// is thrown as jitllm::Error whose message names what was wrong and where, e.g.
//   "model.gguf: tensor 'blk.3.attn_q.weight' at offset 81920: data runs past the end of the file".
// Lower layers throw; front ends catch and print one line. No error codes threaded by hand.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace jitllm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The model's own output is unusable (NaN or +inf logits): the request was fine, the model or
// the machine is not. Front ends answer it as a server fault (HTTP 500), not as a bad request.
class ModelOutputError : public Error {
 public:
  explicit ModelOutputError(const std::string& message) : Error(message) {}
};

// A resource shared by every request is full for now (the KV cache at its cap): the request was
// fine and may succeed later. Front ends answer it with 503.
class CapacityError : public Error {
 public:
  explicit CapacityError(const std::string& message) : Error(message) {}
};

// throw_error("{}: expected {} bytes, got {}", path, want, got)
template <typename... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Re-throws `e` with `context` prepended ("context: message"), for adding the file or tensor name
// at the layer that knows it.
[[noreturn]] inline void rethrow_with_context(const std::exception& e, const std::string& context) {
  throw Error(context + ": " + e.what());
}

}  // namespace jitllm
