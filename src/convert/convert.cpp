// The conversion driver: plans output formats, lays out the container, streams every tensor
// (load -> optional format conversion -> write -> release), then commits (see convert.h).
#include "convert/convert.h"

#include <filesystem>

#include "convert/requantize.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/jlm_writer.h"

namespace jitllm {

ConvertResult convert_to_jlm(const std::string& input, const std::string& output,
                             const ConvertOptions& options) {
  std::error_code ec;
  if (std::filesystem::exists(output, ec) && std::filesystem::equivalent(input, output, ec))
    throw_error("{}: the output is the input; write the .jlm to another path", output);
  const ConvertSource source = open_convert_source(input, options.source);
  return convert_source_to_jlm(source, output, options);
}

ConvertResult convert_source_to_jlm(const ConvertSource& source, const std::string& output,
                                    const ConvertOptions& options) {
  const ConvertTarget& target = options.target;
  const std::vector<TensorChoice> choices = plan_tensor_types(source, target);
  std::vector<JlmTensorSpec> specs;
  specs.reserve(source.tensors.size());
  for (size_t i = 0; i < source.tensors.size(); ++i)
    specs.push_back({source.tensors[i].name, choices[i].type, source.tensors[i].shape});

  Metadata metadata = source.metadata;
  if (target.type) {
    const int32_t ftype =
        target.preset ? preset_file_type(*target.preset) : llama_file_type(*target.type);
    if (ftype >= 0) metadata.set("general.file_type", Value::u32(uint32_t(ftype)));
  }
  Metadata provenance = source.provenance;
  provenance.set("convert.type",
                 Value::string(target.preset ? preset_name(*target.preset)
                               : target.type  ? quant_name(*target.type)
                                              : "keep"));
  provenance.set("convert.tool", Value::string("jitllm convert"));

  JlmWriter writer(output, metadata, provenance, specs);
  ConvertResult result;
  result.output = output;
  result.tensors = specs.size();
  result.groups = writer.groups().size();
  result.source_bytes = source.source_bytes;
  result.output_bytes = writer.file_bytes();

  ConvertProgress progress;
  progress.count = specs.size();
  for (size_t i = 0; i < specs.size(); ++i) {
    const JlmTensor& t = writer.tensors()[i];
    progress.bytes_total += t.bytes();
    result.plan.push_back({specs[i].name, source.tensors[i].type, specs[i].type, choices[i].reason,
                           t.bytes()});
  }

  std::vector<uint8_t> scratch;    // source bytes when load() must transform them
  std::vector<uint8_t> converted;  // output bytes when the format changes
  for (size_t i = 0; i < source.tensors.size(); ++i) {
    if (options.cancel && options.cancel->load())
      throw_error("{}: conversion cancelled; nothing was written", output);
    const SourceTensor& t = source.tensors[i];
    const JlmTensorSpec& spec = specs[i];
    try {
      const std::span<const uint8_t> bytes = t.load(scratch);
      int64_t rows = 1;
      for (size_t d = 1; d < t.shape.size(); ++d) rows *= t.shape[d];
      if (bytes.size() != row_bytes(t.type, t.shape[0]) * size_t(rows))
        throw_error("source gave {} bytes, a {} tensor of this shape has {}", bytes.size(),
                    quant_name(t.type), row_bytes(t.type, t.shape[0]) * size_t(rows));
      if (spec.type == t.type) {
        writer.write_tensor(i, bytes.data(), bytes.size());
      } else {
        convert_tensor_data(t.type, spec.type, bytes.data(), t.shape[0], rows, converted,
                            &ThreadPool::global());
        writer.write_tensor(i, converted.data(), converted.size());
        ++result.requantized;
      }
      if (t.release) t.release();
    } catch (const Error& e) {
      rethrow_with_context(e, fmt::format("{}: tensor '{}'", source.path, t.name));
    }
    progress.index = i + 1;
    progress.tensor = t.name;
    progress.bytes_done += writer.tensors()[i].bytes();
    if (options.progress) options.progress(progress);
    if (options.after_tensor) options.after_tensor(i);
  }
  writer.commit();
  return result;
}

}  // namespace jitllm
