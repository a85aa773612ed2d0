// Hugging Face tokenizer files -> GGUF-style tokenizer.ggml.* metadata, so an HF folder runs
// without a GGUF. Follows what llama.cpp's convert_hf_to_gguf.py writes for the same folder:
//  - tokenizer.model (SentencePiece, read with libsentencepiece): model "llama", pieces, scores,
//    types (unknown/control/unused/byte/normal), added tokens from tokenizer_config.json;
//    for T5-family configs (model_type t5/mt5/umt5) model "t5" with the normalizer's charsmap;
//  - tokenizer.json with a byte-level BPE model: model "gpt2", vocab + added tokens, merges, and
//    the pre-tokenizer name recognised from its split regex (gpt-2, llama-bpe, qwen2, ...).
// Special ids and add_bos/add_eos come from tokenizer_config.json and config.json.
#pragma once

#include <string>

#include "io/metadata.h"

namespace jitllm {

// `folder` holds tokenizer.json and/or tokenizer.model (tokenizer.json with a BPE model is
// preferred, as llama.cpp does for byte-level BPE; otherwise tokenizer.model). Throws
// jitllm::Error naming the file and field that is missing or not understood.
Metadata hf_tokenizer_metadata(const std::string& folder);

// The pieces of the above, for tests and the converter.
Metadata sentencepiece_metadata(const std::string& model_path);
// A SentencePiece unigram model as a T5-style "t5" vocabulary (Unigram algorithm, with the
// model's precompiled charsmap and whitespace rules), as convert_hf_to_gguf.py writes T5 models.
Metadata sentencepiece_t5_metadata(const std::string& model_path);

}  // namespace jitllm
