// The vocabulary as the tokenizers see it, built from GGUF-style `tokenizer.ggml.*` metadata with
// llama.cpp's defaults and fix-ups (per-model-type special ids and flags, control-looking tokens
// forced to CONTROL, the special-token match order). Owns no algorithm: spm/bpe/wpm read it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/metadata.h"

namespace jitllm {

using TokenId = int32_t;
constexpr TokenId kNoToken = -1;

enum class VocabType { Spm, Bpe, Wpm, Ugm };

// GGUF's tokenizer.ggml.token_type values (stored in files; do not renumber).
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// Token attributes (bit set), derived from the token type plus per-model rules.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
  // Ours: a user-defined token that marks a chat's structure (gpt-oss's harmony headers and
  // <|end|>): cut out of any text like other user-defined tokens, except text a chat request
  // wrote (chat/content_guard.h), where it stays text, as control tokens do.
  kAttrStructural = 1u << 9,
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

// Hash that accepts std::string_view, so lookups by a slice of the input build no string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TextMap = std::unordered_map<std::string, TokenId, TextHash, std::equal_to<>>;

struct Vocab {
  VocabType type = VocabType::Spm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("" when absent)

  std::vector<TokenData> tokens;                     // [n_vocab]
  TextMap text_to_id;
  // BPE merges: key = left + '\xFF' + right (0xFF never occurs in UTF-8), value = rank.
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> merge_ranks;
  size_t max_token_bytes = 0;
  // SPM: true when no token text has a U+2581 character right after a character that is not
  // U+2581 (walking characters by lead byte, as spm.cpp does). Then no merge can join the text
  // before a word start ("x" | "\u2581...") with the word, so words can be tokenized apart.
  bool spm_words_independent = false;

  TokenId bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken;
  TokenId sep = kNoToken, pad = kNoToken, mask = kNoToken, linefeed = kNoToken;
  std::vector<TokenId> eog;  // end-of-generation ids, sorted

  bool add_bos = false, add_eos = false, add_sep = false;
  bool add_space_prefix = false;
  bool ignore_merges = false;  // BPE: a whole pre-token found in the vocab skips merging
  bool clean_spaces = false;   // detokenize: " ." -> "." etc. (HF clean_up_tokenization_spaces)
  // Unigram (T5) normalization: SentencePiece's precompiled charsmap (XCDA + replacements).
  std::string precompiled_charsmap;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;
  // WordPiece normalizer (tokenizer.ggml.normalizer.*; BERT's defaults).
  bool wpm_lowercase = true;
  bool wpm_strip_accents = true;

  // Ids with CONTROL / USER_DEFINED / UNKNOWN attributes, longest text first: the order in
  // which their texts are cut out of the input before the model's tokenizer runs.
  std::vector<TokenId> special_match_order;

  size_t size() const { return tokens.size(); }
  TokenId find(std::string_view text) const {
    auto it = text_to_id.find(text);
    return it == text_to_id.end() ? kNoToken : it->second;
  }
  const TokenData& at(TokenId id) const;  // throws naming the id
  bool is_eog(TokenId id) const;
  int32_t merge_rank(std::string_view left, std::string_view right) const;
  // SPM byte-fallback token for a raw byte (<0xXX>, else the byte itself), or kNoToken.
  TokenId byte_token(uint8_t byte) const;
};

// Builds the vocabulary; every missing or malformed key gives a jitllm::Error naming the key
// (and the index for per-token arrays).
Vocab load_vocab(const Metadata& metadata);

}  // namespace jitllm
