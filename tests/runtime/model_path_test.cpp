// load_model_file's errors for paths: a missing file is "no such file", an unreadable one says
// why (it was reported as missing).
#include <gtest/gtest.h>
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

TEST(ModelPath, UnreadableIsNotReportedAsMissing) {
  if (geteuid() == 0) GTEST_SKIP() << "running as root: permissions do not apply";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("jitllm-noperm-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "model.gguf") << "GGUF";
  fs::permissions(dir, fs::perms::none);
  const std::string in_closed_dir = error_of((dir / "model.gguf").string());
  fs::permissions(dir, fs::perms::owner_all);
  fs::permissions(dir / "model.gguf", fs::perms::none);
  const std::string closed_file = error_of((dir / "model.gguf").string());
  fs::remove_all(dir);
  EXPECT_NE(in_closed_dir.find("Permission denied"), std::string::npos) << in_closed_dir;
  EXPECT_NE(closed_file.find("Permission denied"), std::string::npos) << closed_file;
}

}  // namespace
}  // namespace jitllm
