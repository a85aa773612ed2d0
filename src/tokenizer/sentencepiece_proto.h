// The few fields of a SentencePiece .model (protobuf ModelProto) that libsentencepiece's public
// API does not expose: the normalizer spec (precompiled charsmap, dummy prefix, whitespace rules)
// and the model type. A small bounds-checked protobuf wire reader; a malformed file gives a
// jitllm::Error naming the file and the byte offset.
#pragma once

#include <string>

namespace jitllm {

struct SentencePieceSpec {
  int model_type = 1;  // TrainerSpec.model_type: 1 unigram, 2 BPE, 3 word, 4 char
  std::string normalizer_name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

SentencePieceSpec read_sentencepiece_spec(const std::string& model_bytes, const std::string& path);

}  // namespace jitllm
