// The three model tokenizers, each on one fragment of plain text (special tokens already cut
// out). Internal to src/tokenizer/: the public entry point is Tokenizer (tokenizer.h).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace jitllm {

class PreTokenizer;

// SentencePiece BPE as llama.cpp runs it: highest-score adjacent pair merged first (ties: the
// leftmost), pieces not in the vocab fall back to <0xXX> byte tokens. `text` already has spaces
// escaped to U+2581 and the optional leading space added.
void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);
// True when `text`, walked by UTF-8 lead bytes, has a U+2581 character right after a character
// that is not U+2581: a token like that could be merged across a word start (see
// Vocab::spm_words_independent).
bool spm_has_inner_word_start(std::string_view text);

// Byte-level BPE: pre-tokenize `text` (valid UTF-8), map each piece's bytes to GPT-2's printable
// codepoints, merge by rank (lowest first, ties leftmost).
void bpe_tokenize(const Vocab& vocab, const PreTokenizer& pre, std::string_view text,
                  std::vector<TokenId>& out);

// WordPiece: lowercase, strip accents, split on whitespace/punctuation/CJK, then greedy
// longest-match per word with the "▁" word prefix; an unmatchable word becomes [UNK].
void wpm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

// Unigram (T5, SentencePiece "unigram"): charsmap normalization, then the Viterbi best path over
// the vocab trie by summed scores (user-defined pieces score 0; an uncovered character is the
// unknown token at min score - 10, consecutive unknowns merged). The model (tries, parsed
// charsmap) is built once per vocabulary; a bad charsmap is a jitllm::Error.
struct UgmModel;
std::shared_ptr<const UgmModel> make_ugm_model(const Vocab& vocab);
void ugm_tokenize(const Vocab& vocab, const UgmModel& model, std::string_view text,
                  std::vector<TokenId>& out);

}  // namespace jitllm
