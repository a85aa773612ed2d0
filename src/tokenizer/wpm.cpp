// WordPiece (llama.cpp's llm_tokenizer_wpm): BERT's basic pre-processing (with strip_accents:
// first codepoint of NFD and combining marks dropped; lowercase; controls dropped; split on
// whitespace, punctuation, ASCII symbols and CJK ideographs), then per word a greedy longest
// match over "▁" + word. GGUF vocabularies store
// word-initial pieces with "▁" and continuation pieces bare (the converter drops "##").
#include <string>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

bool is_chinese_char(uint32_t cpt) {
  // BERT's CJK ranges (one bound follows HF's Rust code: 0x2B920, not 0x2B820).
  return (cpt >= 0x4E00 && cpt <= 0x9FFF) || (cpt >= 0x3400 && cpt <= 0x4DBF) ||
         (cpt >= 0x20000 && cpt <= 0x2A6DF) || (cpt >= 0x2A700 && cpt <= 0x2B73F) ||
         (cpt >= 0x2B740 && cpt <= 0x2B81F) || (cpt >= 0x2B920 && cpt <= 0x2CEAF) ||
         (cpt >= 0xF900 && cpt <= 0xFAFF) || (cpt >= 0x2F800 && cpt <= 0x2FA1F);
}

std::vector<std::string> split_words(const Vocab& vocab, std::string_view text) {
  std::vector<std::string> words(1);
  for (uint32_t cpt : unicode::decode(text)) {
    if (vocab.wpm_strip_accents) cpt = unicode::nfd_first(cpt);
    const unicode::CodepointFlags f = unicode::flags(cpt);
    if (f.whitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cpt == 0 || cpt == unicode::kReplacement || f.control) continue;
    if (vocab.wpm_strip_accents && f.accent_mark) continue;
    const std::string s = unicode::encode(vocab.wpm_lowercase ? unicode::to_lower(cpt) : cpt);
    if (f.punctuation || (cpt < 0x7F && f.symbol) || is_chinese_char(cpt)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  for (const std::string& word : split_words(vocab, text)) {
    if (word.empty()) continue;
    const std::string w = "\xE2\x96\x81" + word;  // "▁" marks the start of a word
    const size_t n = w.size();
    const size_t first = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool matched = false;
      for (size_t j = std::min(n, i + vocab.max_token_bytes + 1); j > i; --j) {
        const TokenId id = vocab.find(std::string_view(w).substr(i, j - i));
        if (id != kNoToken) {
          out.push_back(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {  // one unmatchable position discards the whole word
        out.resize(first);
        break;
      }
    }
    if (out.size() == first && vocab.unk != kNoToken) out.push_back(vocab.unk);
  }
}

}  // namespace jitllm
