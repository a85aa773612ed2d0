// See temp_file.h.
#include "core/temp_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace jitllm {

int create_temp_beside(const std::string& dest, std::string& tmp_path) {
  const std::string pattern = dest + ".tmp.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) throw_error("{}: cannot create a temporary file: {}", pattern, std::strerror(errno));
  tmp_path = name.data();
  // mkstemp makes the file 0600; the published file should read like any other the tool writes.
  if (::fchmod(fd, 0644) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp_path.c_str());
    throw_error("{}: cannot set its mode: {}", tmp_path, std::strerror(err));
  }
  return fd;
}

}  // namespace jitllm
