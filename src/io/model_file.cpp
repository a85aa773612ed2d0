// open_model_file: picks the reader by the file's magic bytes (not its extension, so a renamed
// file still opens) and turns its result into a ModelFile.
#include "io/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "io/jlm_format.h"
#include "io/jlm_reader.h"

namespace jitllm {
namespace {

struct GgufOwner {
  GgufFile file;
};

// First 4 bytes of `path`; fewer when the file is shorter.
std::string read_magic(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error("{}: cannot open: {}", path, std::strerror(errno));
  char magic[4] = {};
  const ssize_t n = ::pread(fd, magic, 4, 0);
  ::close(fd);
  return std::string(magic, n > 0 ? size_t(n) : 0);
}

}  // namespace

const TensorInfo* ModelFile::find(const std::string& name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& ModelFile::get(const std::string& name) const {
  if (const TensorInfo* t = find(name)) return *t;
  throw_error("{}: tensor '{}' not found ({} tensors in the file)", path, name, tensors.size());
}

ModelFile open_model_file(const std::string& path, const ModelFileOptions& options) {
  const std::string magic = read_magic(path);
  ModelFile m;
  m.path = path;
  if (magic == "GGUF") {
    auto owner = std::make_shared<GgufOwner>(GgufOwner{GgufFile::open(path)});
    m.format = "gguf";
    m.metadata = owner->file.metadata();
    m.tensors = owner->file.tensors();
    m.owner = owner;
    return m;
  }
  if (magic.size() == 4 && std::memcmp(magic.data(), kJlmMagic, 4) == 0) {
    const JlmFile file = JlmFile::open(path);
    if (options.verify_checksums)
      file.check_data(options.verify_experts ? JlmFile::Slices::All : JlmFile::Slices::Dense);
    m.format = "jlm";
    m.experts_verified = options.verify_checksums && options.verify_experts;
    if (!m.experts_verified) {  // nothing to verify later in a file without split experts
      bool split = false;
      for (const JlmTensor& t : file.tensors()) split |= t.slice_count > 1;
      m.experts_verified = !split;
    }
    m.metadata = file.metadata();
    m.tensors = file.tensor_infos();
    m.owner = file.owner();
    return m;
  }
  throw_error("{}: not a model file (expected a GGUF or .jlm; the first bytes are not a known "
              "magic)",
              path);
}

}  // namespace jitllm
