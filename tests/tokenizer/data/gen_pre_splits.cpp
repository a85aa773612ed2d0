// Generator of tests/tokenizer/data/llamacpp/pre_splits.txt (not part of the jitllm build).
// Build: g++ -std=c++17 -O1 -I<llama.cpp>/src gen_pre_splits.cpp <llama.cpp>/src/unicode.cpp
//        <llama.cpp>/src/unicode-data.cpp; run with specs.txt (every pre name: "name\tN" then N
//        hex-encoded regexes, dumped from pre_tokenizer_spec) and inputs.txt.
// Prints llama.cpp's unicode_regex_split (byte_encode = false) piece end offsets for every
// pre-tokenizer regex set of specs.txt and every input string.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "unicode.h"
static std::string unhex(const std::string& h) { std::string o; for (size_t i = 0; i + 1 < h.size(); i += 2) o += char(std::stoi(h.substr(i, 2), nullptr, 16)); return o; }
int main(int argc, char** argv) {
  std::ifstream sp(argv[1]); std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss; ss << in.rdbuf(); const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> tests;
  for (size_t pos = 0, next; (next = all.find(sep, pos)) != std::string::npos; pos = next + sep.size()) tests.push_back(all.substr(pos, next - pos));
  std::string line;
  while (std::getline(sp, line)) {
    const std::string name = line.substr(0, line.find('\t')); const int n = std::stoi(line.substr(line.find('\t') + 1));
    std::vector<std::string> res; for (int i = 0; i < n; ++i) { std::getline(sp, line); res.push_back(unhex(line)); }
    for (size_t i = 0; i < tests.size(); ++i) {
      std::printf("%s %zu", name.c_str(), i);
      try {
        size_t off = 0;
        for (const auto& w : unicode_regex_split(tests[i], res, false)) { off += w.size(); std::printf(" %zu", off); }
      } catch (const std::exception& e) { std::printf(" ERR"); }
      std::printf("\n");
    }
  }
}
