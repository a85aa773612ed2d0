// Side-by-side tokenizer speed: jitllm's Tokenizer against llama.cpp's llama_tokenize on the same
// GGUF vocab and the same ~1 MiB of prose, in one process. llama.cpp is not built or vendored
// here: its shared library is dlopen'ed from --peer-lib and the handful of C API entry points are
// declared below from the facts in its llama.h (b10472). Per vocab: both engines must give
// identical ids, then encode is timed (thread CPU time) alternating A B B A for R rounds; the row
// reports medians in ms/MB, the median per-round ratio ours/peer and the ratio's IQR/median. A row
// whose IQR/median is above --max-spread is refused (printed, not counted as a result). An A/A
// self-control (ours against ours) runs first to show what "no difference" looks like.
//   bench_tokenize_ab --peer-lib /path/libllama.so [--vocabs llama-spm,gpt-2,...] [--rounds 9]
//                     [--text FILE] [--max-spread 0.10]
// Text: models/demo/heldout_sample.txt + Python's own docs (Debian python3.11-doc, PSF licence,
// html/_sources/{tutorial,howto,faq}/*.rst.txt sorted), cut to 1 MiB; without the docs, the
// oracle tokenizer .inp files repeated. The source used is printed.
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

// ---- llama.cpp C API, as declared in its include/llama.h (b10472) -------------------------------
struct PeerModel;
struct PeerVocab;
// struct llama_model_params, field for field (enums are int-sized).
struct PeerModelParams {
  void* devices;
  const void* tensor_buft_overrides;
  int32_t n_gpu_layers;
  int32_t split_mode;
  int32_t load_mode;
  int32_t main_gpu;
  const float* tensor_split;
  bool (*progress_callback)(float, void*);
  void* progress_callback_user_data;
  const void* kv_overrides;
  bool vocab_only;
  bool check_tensors;
  bool use_extra_bufts;
  bool no_host;
  bool no_alloc;
  bool load_mtp;
};
using LogCallback = void (*)(int level, const char* text, void* user_data);

struct Peer {
  void* handle = nullptr;
  void (*backend_init)() = nullptr;
  void (*log_set)(LogCallback, void*) = nullptr;
  PeerModelParams (*model_default_params)() = nullptr;
  PeerModel* (*model_load_from_file)(const char*, PeerModelParams) = nullptr;
  void (*model_free)(PeerModel*) = nullptr;
  const PeerVocab* (*model_get_vocab)(const PeerModel*) = nullptr;
  int32_t (*tokenize)(const PeerVocab*, const char*, int32_t, int32_t*, int32_t, bool, bool) = nullptr;

  template <class F>
  void bind(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    if (!fn) {
      std::fprintf(stderr, "bench_tokenize_ab: %s not found in the peer library\n", name);
      std::exit(2);
    }
  }
  explicit Peer(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::fprintf(stderr, "bench_tokenize_ab: dlopen %s: %s\n", path.c_str(), dlerror());
      std::exit(2);
    }
    bind(backend_init, "llama_backend_init");
    bind(log_set, "llama_log_set");
    bind(model_default_params, "llama_model_default_params");
    bind(model_load_from_file, "llama_model_load_from_file");
    bind(model_free, "llama_model_free");
    bind(model_get_vocab, "llama_model_get_vocab");
    bind(tokenize, "llama_tokenize");
    log_set([](int, const char*, void*) {}, nullptr);
    backend_init();
  }
  std::vector<int32_t> encode(const PeerVocab* vocab, const std::string& text) const {
    std::vector<int32_t> ids(text.size() + 16);
    int32_t n = tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()),
                         false, false);
    if (n < 0) {
      ids.resize(size_t(-int64_t(n)));
      n = tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), false,
                   false);
    }
    if (n < 0) {
      std::fprintf(stderr, "bench_tokenize_ab: llama_tokenize failed (%d)\n", n);
      std::exit(2);
    }
    ids.resize(size_t(n));
    return ids;
  }
};

// ---- text ----------------------------------------------------------------------------------------
std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string corpus(const std::string& explicit_file, std::string& source) {
  constexpr size_t kBytes = size_t(1) << 20;
  const fs::path root = JITLLM_SOURCE_DIR;
  const char* shared_env = std::getenv("JITLLM_SHARED");
  const fs::path oracle = shared_env ? fs::path(shared_env) / "oracle" : root / "../shared/oracle";
  std::string text;
  if (!explicit_file.empty()) {
    text = read_file(explicit_file);
    source = explicit_file;
  } else {
    text = read_file(root / "models/demo/heldout_sample.txt");
    source = "models/demo/heldout_sample.txt";
    const fs::path docs = "/usr/share/doc/python3.11-doc/html/_sources";
    std::vector<fs::path> files;
    for (const char* dir : {"tutorial", "howto", "faq"}) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(docs / dir, ec))
        if (e.path().string().ends_with(".rst.txt")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      if (text.size() >= kBytes) break;
      text += read_file(f);
    }
    if (!files.empty()) {
      source += " + python3.11-doc _sources/{tutorial,howto,faq}/*.rst.txt (sorted)";
    } else {
      std::vector<fs::path> inps;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(oracle / "tokenizer", ec))
        if (e.path().extension() == ".inp") inps.push_back(e.path());
      std::sort(inps.begin(), inps.end());
      std::string once;
      for (const auto& f : inps) once += read_file(f);
      while (!once.empty() && text.size() < kBytes) text += once;
      source += " + oracle tokenizer/*.inp repeated";
    }
  }
  if (text.empty()) {
    std::fprintf(stderr, "bench_tokenize_ab: no text\n");
    std::exit(2);
  }
  while (text.size() < kBytes) text += text;
  text.resize(std::min(text.size(), kBytes));
  // Cut back to a character boundary so the text stays valid UTF-8.
  while (!text.empty() && (uint8_t(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && uint8_t(text.back()) >= 0xC0) text.pop_back();
  return text;
}

// ---- timing --------------------------------------------------------------------------------------
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

struct Row {
  double a_ms, b_ms, ratio, spread;
};

// A B B A per round; ratio per round = (A1 + A2) / (B1 + B2). Times scaled to ms per MB (1e6 B).
Row abba(const std::function<size_t()>& a, const std::function<size_t()>& b, int rounds,
         size_t bytes) {
  std::vector<double> as, bs, ratios;
  volatile size_t sink = 0;
  sink = sink + a() + b();  // warm-up: caches, page faults, lazy tables
  for (int r = 0; r < rounds; ++r) {
    double t0 = cpu_ms();
    sink = sink + a();
    double t1 = cpu_ms();
    sink = sink + b();
    double t2 = cpu_ms();
    sink = sink + b();
    double t3 = cpu_ms();
    sink = sink + a();
    double t4 = cpu_ms();
    const double ta = (t1 - t0) + (t4 - t3), tb = (t2 - t1) + (t3 - t2);
    as.push_back(ta / 2);
    bs.push_back(tb / 2);
    ratios.push_back(ta / tb);
  }
  const double scale = 1e6 / double(bytes);
  const double med = quantile(ratios, 0.5);
  return {quantile(as, 0.5) * scale, quantile(bs, 0.5) * scale, med,
          (quantile(ratios, 0.75) - quantile(ratios, 0.25)) / med};
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string peer_lib, text_file;
  std::string vocabs = "llama-spm,phi-3,gpt-2,deepseek-llm,deepseek-coder,falcon,starcoder,bert-bge";
  int rounds = 9;
  double max_spread = 0.10;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_tokenize_ab: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--peer-lib") peer_lib = value();
    else if (arg == "--vocabs") vocabs = value();
    else if (arg == "--rounds") rounds = std::max(3, std::atoi(value().c_str()));
    else if (arg == "--text") text_file = value();
    else if (arg == "--max-spread") max_spread = std::atof(value().c_str());
    else {
      std::fprintf(stderr,
                   "usage: bench_tokenize_ab --peer-lib libllama.so [--vocabs a,b] [--rounds N] "
                   "[--text FILE] [--max-spread 0.10]\n");
      return 2;
    }
  }
  if (peer_lib.empty()) {
    std::fprintf(stderr, "bench_tokenize_ab: --peer-lib /path/to/libllama.so is required\n");
    return 2;
  }
  const char* shared_env = std::getenv("JITLLM_SHARED");
  const std::string oracle = shared_env ? std::string(shared_env) + "/oracle"
                                        : std::string(JITLLM_SOURCE_DIR) + "/../shared/oracle";
  std::string source;
  const std::string text = corpus(text_file, source);
  std::printf("text: %zu bytes from %s\n", text.size(), source.c_str());
  std::printf("timing: thread CPU time, ABBA x %d rounds after one warm-up; ratio = ours/llama.cpp\n",
              rounds);
  Peer peer(peer_lib);

  int refused = 0, mismatched = 0;
  bool control_done = false;
  std::printf("| vocab | ours ms/MB | llama.cpp ms/MB | ratio | IQR/median | ids equal |\n");
  std::printf("|---|---:|---:|---:|---:|---|\n");
  for (const std::string& name : split_list(vocabs)) {
    const std::string path = oracle + "/tokenizer/ggml-vocab-" + name + ".gguf";
    const auto file = jitllm::GgufFile::open(path);
    const jitllm::Tokenizer ours(file.metadata());
    PeerModelParams params = peer.model_default_params();
    params.vocab_only = true;
    PeerModel* model = peer.model_load_from_file(path.c_str(), params);
    if (!model) {
      std::fprintf(stderr, "bench_tokenize_ab: llama.cpp could not load %s\n", path.c_str());
      return 2;
    }
    const PeerVocab* pv = peer.model_get_vocab(model);

    const std::vector<int32_t> ids_ours = ours.encode(text, false, false);
    const std::vector<int32_t> ids_peer = peer.encode(pv, text);
    const bool equal = ids_ours == ids_peer;
    if (!equal) {
      ++mismatched;
      size_t k = 0;
      while (k < std::min(ids_ours.size(), ids_peer.size()) && ids_ours[k] == ids_peer[k]) ++k;
      std::fprintf(stderr, "%s: ids differ at %zu (ours %zu tokens, llama.cpp %zu)\n", name.c_str(),
                   k, ids_ours.size(), ids_peer.size());
    }
    auto run_ours = [&] { return ours.encode(text, false, false).size(); };
    auto run_peer = [&] { return peer.encode(pv, text).size(); };
    if (!control_done) {
      const Row c = abba(run_ours, run_ours, rounds, text.size());
      std::printf("| A/A control (%s, ours vs ours) | %.1f | %.1f | %.3f | %.3f | - |\n",
                  name.c_str(), c.a_ms, c.b_ms, c.ratio, c.spread);
      control_done = true;
    }
    const Row r = abba(run_ours, run_peer, rounds, text.size());
    const bool refuse = r.spread > max_spread;
    refused += refuse;
    std::printf("| %s (%zu tok) | %.1f | %.1f | %.3f | %.3f%s | %s |\n", name.c_str(),
                ids_ours.size(), r.a_ms, r.b_ms, r.ratio, r.spread,
                refuse ? " REFUSED (> max spread)" : "", equal ? "yes" : "NO");
    std::fflush(stdout);
    peer.model_free(model);
  }
  if (refused) std::printf("%d row(s) refused: spread above %.2f, rerun on a quieter machine\n",
                           refused, max_spread);
  return mismatched ? 1 : 0;
}
