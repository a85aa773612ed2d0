// Generator of the llama.cpp reference vectors in tests/tokenizer/data/llamacpp/ (not part of the
// jitllm build). Built against a llama.cpp checkout (the snapshot in /work/peers/llama.cpp, which
// reproduces the oracle's .out files byte for byte), it tokenizes every string of an inputs file
// (test-tokenizer-0 format) with a vocab-only GGUF and prints, per string i:
//   i E<add_special><parse_special> ids...      for (0,0), (0,1), (1,1)
//   i D<remove_special><unparse_special> hex    llama_detokenize of E00's ids with (0,0), of
//                                                E11's ids with (1,1), as hex bytes
// Build: g++ -O2 -std=c++17 gen_llamacpp.cpp -I<llama.cpp>/include -I<llama.cpp>/ggml/include
//        -L<build>/bin -lllama -lggml -lggml-base -o gen_llamacpp
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text,
                                         bool add_special, bool parse_special) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()),
                         add_special, parse_special);
  if (n < 0) {
    ids.resize(size_t(-n));
    n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()),
                       add_special, parse_special);
  }
  ids.resize(size_t(n));
  return ids;
}

static std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& ids,
                              bool remove_special, bool unparse_special) {
  std::string text(ids.size() * 8 + 16, '\0');
  int n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()),
                           remove_special, unparse_special);
  if (n < 0) {
    text.resize(size_t(-n));
    n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()),
                         remove_special, unparse_special);
  }
  text.resize(size_t(n));
  return text;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gen_llamacpp VOCAB.gguf INPUTS\n");
    return 1;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0, i = 0;
  for (size_t next; (next = all.find(sep, pos)) != std::string::npos; pos = next + sep.size(), ++i) {
    const std::string text = all.substr(pos, next - pos);
    std::vector<llama_token> e00, e11;
    for (int combo = 0; combo < 3; ++combo) {
      const bool add = combo == 2, parse = combo >= 1;
      const auto ids = tokenize(vocab, text, add, parse);
      if (combo == 0) e00 = ids;
      if (combo == 2) e11 = ids;
      std::printf("%zu E%d%d", i, int(add), int(parse));
      for (llama_token id : ids) std::printf(" %d", id);
      std::printf("\n");
    }
    for (int combo = 0; combo < 2; ++combo) {
      const std::string out = detokenize(vocab, combo ? e11 : e00, combo, combo);
      std::printf("%zu D%d%d ", i, combo, combo);
      for (unsigned char c : out) std::printf("%02x", c);
      std::printf("\n");
    }
  }
  llama_model_free(model);
  return 0;
}
