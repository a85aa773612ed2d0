// What the converter reads from: a model as GGUF-named tensors plus GGUF-keyed metadata, whatever
// file it came from (a GGUF, a .jlm, or a Hugging Face folder). Tensors are loaded one at a time:
// load() returns a view of the bytes (straight into the source mapping when nothing needs to
// change, else into the caller's scratch buffer), and release() drops the source pages again, so a
// conversion holds at most one tensor in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/metadata.h"
#include "quant/types.h"

namespace jitllm {

class HfFolder;

struct SourceTensor {
  std::string name;            // GGUF name ("blk.0.attn_q.weight")
  QuantType type = QuantType::F32;  // type of the bytes load() returns
  std::vector<int64_t> shape;  // GGUF ne order; stacked experts contiguous in the last dimension
  // The tensor's bytes in GGUF layout; may use `scratch` (resized as needed).
  std::function<std::span<const uint8_t>(std::vector<uint8_t>& scratch)> load;
  std::function<void()> release;  // may be empty
};

// Turns an HF folder's tokenizer files into GGUF "tokenizer.ggml.*" metadata (provided by the
// tokenizer layer; the converter does not link it, the front end passes it in).
using HfTokenizerImport = std::function<void(const HfFolder& folder, Metadata& metadata)>;

struct SourceOptions {
  HfTokenizerImport hf_tokenizer;  // required for HF folders unless skip_hf_tokenizer
  bool skip_hf_tokenizer = false;  // tests and `info` on a folder: weights and config only
};

struct ConvertSource {
  std::string path;
  std::string format;    // "gguf" | "jlm" | "hf"
  Metadata metadata;     // GGUF keys
  Metadata provenance;   // "source.*" keys recorded in the .jlm
  std::vector<SourceTensor> tensors;
  uint64_t source_bytes = 0;
  std::shared_ptr<const void> owner;  // keeps mappings behind load() alive
};

// A directory is read as an HF folder; a file by its magic (GGUF or .jlm).
ConvertSource open_convert_source(const std::string& path, const SourceOptions& options = {});

// Each one by its kind (open_convert_source dispatches to these).
ConvertSource open_model_source(const std::string& path);  // .gguf / .jlm
ConvertSource open_hf_source(const std::string& dir, const SourceOptions& options);

// Tells the kernel the pages of [data, data + bytes) in a read-only file mapping are not needed
// now (they are re-read from the file if touched again). Keeps conversion RSS at one tensor.
void drop_mapped_pages(const void* data, size_t bytes);

// Provenance record of a source file or folder: path (absolute), format, bytes, mtime, and an
// XXH64 fingerprint over the first MiB of each file and the sizes (fast, and enough to notice that
// the source changed since the conversion).
Metadata make_provenance(const std::string& path, const std::string& format,
                         const std::vector<std::string>& files);

}  // namespace jitllm
