// load_model_file's errors for paths: a missing file is "no such file", an unreadable one says
// why (it was reported as missing).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "runtime/model_loader.h"

namespace jitllm {
namespace {

std::string error_of(const std::string& path) {
  try {
    load_model_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelPath, MissingIsMissing) {
  EXPECT_NE(error_of("/nonexistent-dir/model.gguf").find("no such file"), std::string::npos);
}

// Root is not stopped by permissions: as root the check runs in a child process that has given
// up root for nobody (65534), so the test runs in CI (which runs as root) too.
TEST(ModelPath, UnreadableIsNotReportedAsMissing) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("jitllm-noperm-" + std::to_string(getpid()));
  const fs::path closed_dir = base / "closed", open_dir = base / "open";
  fs::create_directories(closed_dir);
  fs::create_directories(open_dir);
  std::ofstream(closed_dir / "model.gguf") << "GGUF";
  std::ofstream(open_dir / "model.gguf") << "GGUF";
  fs::permissions(base, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(open_dir, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(closed_dir, fs::perms::none);
  fs::permissions(open_dir / "model.gguf", fs::perms::none);
  auto check = [&] {
    const std::string in_closed_dir = error_of((closed_dir / "model.gguf").string());
    const std::string closed_file = error_of((open_dir / "model.gguf").string());
    return in_closed_dir.find("Permission denied") != std::string::npos &&
           closed_file.find("Permission denied") != std::string::npos;
  };
  bool ok = false;
  if (geteuid() != 0) {
    ok = check();
  } else {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
      _exit(check() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 2) << "could not become nobody";
    ok = WEXITSTATUS(status) == 0;
  }
  fs::permissions(closed_dir, fs::perms::owner_all);
  fs::remove_all(base);
  EXPECT_TRUE(ok) << "an unreadable file or folder was not reported as 'Permission denied'";
}

}  // namespace
}  // namespace jitllm
