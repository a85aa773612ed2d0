// ConvertSource over a GGUF or .jlm file (open_model_file), plus the dispatch by path kind and the
// provenance record.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "convert/source.h"
#include "core/error.h"
#include "io/jlm_hash.h"
#include "io/model_file.h"

namespace jitllm {

void drop_mapped_pages(const void* data, size_t bytes) {
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  // Only whole pages inside the range: a page shared with the next tensor stays.
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Metadata make_provenance(const std::string& path, const std::string& format,
                         const std::vector<std::string>& files) {
  namespace fs = std::filesystem;
  Metadata p;
  std::error_code ec;
  // The real file (links resolved), so one source has one recorded path however it was named.
  fs::path real = fs::absolute(path, ec);
  if (!ec) real = fs::weakly_canonical(real, ec);
  p.set("source.path", Value::string(ec ? path : real.string()));
  p.set("source.format", Value::string(format));
  uint64_t total = 0;
  int64_t newest_mtime_ns = 0;
  std::vector<uint8_t> digest_input;
  for (const std::string& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) throw_error("{}: cannot stat", f);
    total += uint64_t(st.st_size);
    newest_mtime_ns = std::max<int64_t>(newest_mtime_ns,
                                        int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> head(size_t(std::min<uint64_t>(uint64_t(st.st_size), 1 << 20)));
    in.read(reinterpret_cast<char*>(head.data()), std::streamsize(head.size()));
    const uint64_t h = xxh64(head.data(), head.size());
    const uint64_t size = uint64_t(st.st_size);
    digest_input.insert(digest_input.end(), reinterpret_cast<const uint8_t*>(&h),
                        reinterpret_cast<const uint8_t*>(&h) + 8);
    digest_input.insert(digest_input.end(), reinterpret_cast<const uint8_t*>(&size),
                        reinterpret_cast<const uint8_t*>(&size) + 8);
  }
  p.set("source.bytes", Value::u64(total));
  p.set("source.mtime_ns", Value::i64(newest_mtime_ns));
  p.set("source.fingerprint",
        Value::string(fmt::format("xxh64-1m:{:016x}", xxh64(digest_input.data(), digest_input.size()))));
  return p;
}

ConvertSource open_model_source(const std::string& path) {
  auto file = std::make_shared<ModelFile>(open_model_file(path));
  ConvertSource s;
  s.path = path;
  s.format = file->format;
  s.metadata = file->metadata;
  // A split GGUF ("name-00001-of-00003.gguf", opened from its first part) becomes one .jlm: the
  // split.* keys no longer apply, and the provenance covers every part.
  std::vector<std::string> files = {path};
  const int64_t parts = s.metadata.get_i64_or("split.count", 1);
  static const std::regex split_name(R"(^(.*)-00001-of-([0-9]{5})\.gguf$)");
  std::smatch match;
  if (parts > 1 && std::regex_match(path, match, split_name))
    for (int64_t i = 2; i <= parts; ++i)
      files.push_back(fmt::format("{}-{:05d}-of-{}.gguf", match[1].str(), i, match[2].str()));
  for (const char* key : {"split.count", "split.no", "split.tensors.count"}) s.metadata.erase(key);
  s.provenance = make_provenance(path, file->format, files);
  s.source_bytes = s.provenance.get_u64("source.bytes");
  for (const TensorInfo& t : file->tensors) {
    SourceTensor st;
    st.name = t.name;
    st.type = t.type;
    st.shape = t.shape;
    const TensorInfo* info = &t;
    if (t.slice_stride == 0) {
      st.load = [info](std::vector<uint8_t>&) { return std::span<const uint8_t>(info->data, info->bytes); };
      st.release = [info] { drop_mapped_pages(info->data, info->bytes); };
    } else {
      // A split expert tensor of a .jlm: gather the slices into the stacked GGUF layout.
      st.load = [info](std::vector<uint8_t>& scratch) {
        const int64_t n = info->shape.back();
        const size_t slice = info->bytes / size_t(n);
        scratch.resize(info->bytes);
        for (int64_t e = 0; e < n; ++e)
          std::memcpy(scratch.data() + size_t(e) * slice, info->data + uint64_t(e) * info->slice_stride,
                      slice);
        return std::span<const uint8_t>(scratch.data(), scratch.size());
      };
      st.release = [info] {
        const int64_t n = info->shape.back();
        for (int64_t e = 0; e < n; ++e)
          drop_mapped_pages(info->data + uint64_t(e) * info->slice_stride, info->bytes / size_t(n));
      };
    }
    s.tensors.push_back(std::move(st));
  }
  s.owner = file;
  return s;
}

ConvertSource open_convert_source(const std::string& path, const SourceOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return open_hf_source(path, options);
  if (!std::filesystem::exists(path, ec)) throw_error("{}: no such file or folder", path);
  return open_model_source(path);
}

}  // namespace jitllm
