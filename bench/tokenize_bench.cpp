// Tokenizer speed on ~1 MB of English prose and code (the oracle's chat templates and READMEs,
// repeated): encode with each algorithm (SPM llama, byte-level BPE gpt-2 and deepseek-llm,
// WordPiece bert) and decode. Reports bytes/s of input text and tokens/s.
//   bench_tokenize [--benchmark_filter=...]   (oracle found like the tests: $JITLLM_SHARED)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string oracle_dir() {
  if (const char* env = std::getenv("JITLLM_SHARED")) return std::string(env) + "/oracle";
  return std::string(JITLLM_SOURCE_DIR) + "/../shared/oracle";
}

const std::string& prose() {
  static const std::string text = [] {
    std::string corpus;
    const std::filesystem::path root = oracle_dir();
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(root / "templates"))
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    files.push_back(root / "README.md");
    files.push_back(root / "tokenizer/README.md");
    files.push_back(root / "pydoc-llama/README.md");
    std::string once;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      once += ss.str();
    }
    if (once.empty()) {
      std::fprintf(stderr, "bench_tokenize: no text found under %s\n", root.c_str());
      std::exit(1);
    }
    while (corpus.size() < (size_t(1) << 20)) corpus += once;
    corpus.resize(size_t(1) << 20);
    // Cut back to a character boundary so the corpus stays valid UTF-8.
    while (!corpus.empty() && (uint8_t(corpus.back()) & 0xC0) == 0x80) corpus.pop_back();
    if (!corpus.empty() && uint8_t(corpus.back()) >= 0xC0) corpus.pop_back();
    return corpus;
  }();
  return text;
}

const jitllm::Tokenizer& tokenizer(const std::string& vocab) {
  static std::map<std::string, std::unique_ptr<jitllm::Tokenizer>> cache;
  auto& slot = cache[vocab];
  if (!slot) {
    const auto file = jitllm::GgufFile::open(oracle_dir() + "/tokenizer/ggml-vocab-" + vocab + ".gguf");
    slot = std::make_unique<jitllm::Tokenizer>(file.metadata());
  }
  return *slot;
}

void BM_Encode(benchmark::State& state, const char* vocab) {
  const jitllm::Tokenizer& tok = tokenizer(vocab);
  const std::string& text = prose();
  size_t n_tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * text.size()));
  state.counters["tokens"] = double(n_tokens);
  state.counters["tok_s"] =
      benchmark::Counter(double(n_tokens) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Decode(benchmark::State& state, const char* vocab) {
  const jitllm::Tokenizer& tok = tokenizer(vocab);
  const auto ids = tok.encode(prose(), false);
  for (auto _ : state) {
    const std::string text = tok.decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * prose().size()));
  state.counters["tok_s"] =
      benchmark::Counter(double(ids.size()) * double(state.iterations()), benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Encode, spm_llama, "llama-spm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, bpe_gpt2, "gpt-2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, bpe_deepseek_llm, "deepseek-llm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, wpm_bert, "bert-bge")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, spm_llama, "llama-spm")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, bpe_gpt2, "gpt-2")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
