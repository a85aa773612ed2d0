// load_model_file's integrity rules: a .jlm's data checksums are verified as the engine opens it;
// the conversion cache of Hugging Face folders replaces a cached .jlm that fails them (it was
// reused forever before) and keeps nothing of a conversion that fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "core/error.h"
#include "io/jlm_reader.h"
#include "runtime/model_loader.h"
#include "testutil/shared_data.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;
using testing::oracle_path;

// A fresh folder as $XDG_CACHE_HOME for one test (the previous value comes back after it).
struct CacheHome {
  fs::path root;
  std::string saved;
  bool had = false;
  CacheHome() {
    root = fs::temp_directory_path() /
           ("jlm_loader_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root / "cache");
    if (const char* v = std::getenv("XDG_CACHE_HOME")) had = true, saved = v;
    setenv("XDG_CACHE_HOME", (root / "cache").c_str(), 1);
  }
  ~CacheHome() {
    if (had) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else unsetenv("XDG_CACHE_HOME");
    fs::remove_all(root);
  }
  std::vector<std::string> cache_files() const {
    std::vector<std::string> out;
    if (fs::exists(root / "cache" / "jitllm"))
      for (const auto& e : fs::directory_iterator(root / "cache" / "jitllm"))
        out.push_back(e.path().filename().string());
    return out;
  }
};

// Flips one byte inside the data of `tensor` of the .jlm at `path`.
void damage(const std::string& path, const std::string& tensor) {
  const JlmFile f = JlmFile::open(path);
  const JlmTensor* t = f.find(tensor);
  ASSERT_NE(t, nullptr) << tensor;
  const uint8_t flipped = uint8_t(f.slice_data(*t)[3] ^ 0x81);
  std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(std::streamoff(t->offset + 3));
  out.write(reinterpret_cast<const char*>(&flipped), 1);
}

TEST(ModelLoader, DamagedCachedConversionIsConvertedAgain) {
  CacheHome home;
  const std::string hf = oracle_path("pydoc-llama/hf");
  std::string cached;
  {
    const auto file = load_model_file(hf);
    cached = file->path;
    EXPECT_EQ(file->format, "jlm");
  }
  ASSERT_TRUE(JlmFile::open(cached).verify().empty());
  damage(cached, "blk.2.ffn_up.weight");
  ASSERT_EQ(JlmFile::open(cached).verify().size(), 1u);

  const auto again = load_model_file(hf);
  EXPECT_EQ(again->path, cached);
  EXPECT_TRUE(JlmFile::open(cached).verify().empty());
  EXPECT_EQ(home.cache_files().size(), 1u);  // the replacement, no temporary file beside it
}

TEST(ModelLoader, TruncatedCachedConversionIsConvertedAgain) {
  CacheHome home;
  const std::string hf = oracle_path("pydoc-llama/hf");
  const std::string cached = load_model_file(hf)->path;
  fs::resize_file(cached, fs::file_size(cached) / 2);
  EXPECT_EQ(load_model_file(hf)->path, cached);
  EXPECT_TRUE(JlmFile::open(cached).verify().empty());
}

// A conversion killed without unwinding leaves its temporary file; the next conversion of that
// folder removes it once it is a day old (a fresh one may belong to a live conversion).
TEST(ModelLoader, StaleTemporaryFilesOfKilledConversionsAreRemoved) {
  CacheHome home;
  const std::string hf = oracle_path("pydoc-llama/hf");
  const std::string cached = load_model_file(hf)->path;
  fs::remove(cached);
  const std::string stale = cached + ".tmp.AbC123", fresh = cached + ".tmp.XyZ789";
  std::ofstream(stale) << "half a conversion";
  std::ofstream(fresh) << "a live conversion";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(25));
  EXPECT_EQ(load_model_file(hf)->path, cached);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

TEST(ModelLoader, FailedConversionLeavesNothingInTheCache) {
  CacheHome home;
  const fs::path hf = home.root / "bad-hf";
  fs::create_directories(hf);
  for (const auto& e : fs::directory_iterator(oracle_path("pydoc-llama/hf")))
    fs::copy_file(e.path(), hf / e.path().filename());
  auto config = nlohmann::json::parse(testing::read_text((hf / "config.json").string()));
  config["num_hidden_layers"] = 4;  // the checkpoint has 6
  fs::permissions(hf / "config.json", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(hf / "config.json") << config.dump();
  try {
    load_model_file(hf.string());
    FAIL() << "a config that undercounts the layers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_hidden_layers is 4"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(home.cache_files().empty());
}

TEST(ModelLoader, DamagedJlmIsRefusedNamingTheTensor) {
  CacheHome home;
  const std::string jlm = (home.root / "m.jlm").string();
  convert_to_jlm(oracle_path("models/synth-llama.Q8_0.gguf"), jlm);
  EXPECT_NO_THROW(load_model_file(jlm));
  damage(jlm, "blk.1.attn_k.weight");
  try {
    load_model_file(jlm);
    FAIL() << "damaged data accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.1.attn_k.weight': data checksum"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace jitllm
