// Text <-> token ids for every vocabulary the engine reads (SentencePiece "llama", byte-level BPE
// "gpt2", WordPiece "bert", Unigram "t5"), matching llama.cpp's llama_tokenize / llama_detokenize /
// llama_token_to_piece id for id and byte for byte.
//
// encode(): special-token texts are cut out of the input first (user-defined tokens always,
// control tokens only with parse_special), then each plain fragment goes through the model's
// algorithm. decode(): pieces concatenated, leading space of SPM removed, BPE clean-up applied.
// StreamDecoder: the same pieces one token at a time, never splitting a UTF-8 character.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/metadata.h"
#include "tokenizer/vocab.h"

namespace jitllm {

class PreTokenizer;
struct UgmModel;

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from `metadata`; throws jitllm::Error naming the bad key.
  explicit Tokenizer(const Metadata& metadata);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Inputs larger than this are refused with an error (memory stays bounded).
  static constexpr size_t kMaxInputBytes = size_t(256) << 20;

  // add_special: BOS/EOS/SEP as the vocabulary asks (tokenizer.ggml.add_bos_token, ...).
  // parse_special: control-token texts such as "<s>" in `text` become their ids.
  std::vector<TokenId> encode(std::string_view text, bool add_special = true,
                              bool parse_special = false) const;
  // encode(text, add_special, parse_special = true), except that a control, unknown or
  // structural (vocab.h) token's text overlapping one of `literal_spans` (sorted, disjoint [begin, end) byte ranges: what a
  // chat request wrote, chat/content_guard.h) is tokenized as text. Without spans, the same ids
  // as encode(); outside them, the same cuts. Throws for spans that are unsorted or out of range.
  std::vector<TokenId> encode_with_literals(
      std::string_view text, bool add_special,
      std::span<const std::pair<size_t, size_t>> literal_spans) const;
  // What a chat request must not be able to spell: the texts encode() cuts out as tokens only
  // with parse_special (control and unknown tokens), and the structural ones (vocab.h).
  std::vector<std::string> parse_special_texts() const;

  // The bytes of one token. special=false renders control/unknown tokens as "" (llama.cpp's
  // `special` flag of llama_token_to_piece).
  const std::string& piece(TokenId id) const;  // with special = true, cached
  std::string piece(TokenId id, bool special) const;

  // remove_special: drop a leading BOS / trailing EOS the vocabulary adds.
  // unparse_special: render control tokens' text (otherwise they produce nothing).
  std::string decode(const std::vector<TokenId>& ids, bool remove_special = false,
                     bool unparse_special = false) const;

  const Vocab& vocab() const { return vocab_; }
  size_t n_vocab() const { return vocab_.size(); }

 private:
  std::vector<TokenId> encode_impl(std::string_view text, bool add_special, bool parse_special,
                                   std::span<const std::pair<size_t, size_t>> literal) const;
  std::string render_piece(TokenId id) const;  // llama.cpp's token_to_piece, special = true
  void encode_fragment(std::string_view text, bool prev_special, std::vector<TokenId>& out) const;

  Vocab vocab_;
  std::unique_ptr<PreTokenizer> pre_;       // BPE only
  std::shared_ptr<const UgmModel> ugm_;     // Unigram only
  std::vector<std::string> piece_cache_;    // [n_vocab] piece(id, special = true)
};

// Incremental detokenizer for streaming generated text: push() returns the text that became
// complete (whole UTF-8 characters only); finish() returns what is left, with an incomplete
// trailing sequence replaced by U+FFFD. The concatenation equals the pieces joined (the first
// token's leading space removed for SPM vocabularies), without detokenize's BPE clean-up, as
// llama.cpp's server streams.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool unparse_special = false);
  // Control tokens among `rendered` are written as their text; other control tokens are not.
  StreamDecoder(const Tokenizer& tokenizer, std::vector<TokenId> rendered);
  std::string push(TokenId id);
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool unparse_special_;
  std::vector<TokenId> rendered_;  // a few ids
  bool first_ = true;
  std::string pending_;  // bytes of an unfinished UTF-8 character
};

}  // namespace jitllm
