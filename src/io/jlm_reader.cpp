// .jlm reader: header/table validation, map views, checksum verification, O_DIRECT group reads
// (see jlm_reader.h).
#include "io/jlm_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "io/jlm_hash.h"
#include "io/kv_codec.h"

namespace jitllm {

struct JlmFile::State {
  std::string path;
  std::shared_ptr<MappedFile> map;
  JlmHeader header;
  Metadata metadata;
  Metadata source;
  std::vector<JlmGroup> groups;
  std::vector<JlmTensor> tensors;
  std::unordered_map<std::string, size_t> by_name;

  std::mutex fd_mutex;
  int direct_fd = -1;    // O_DIRECT descriptor, opened on the first read_group
  int buffered_fd = -1;  // fallback when the filesystem refuses O_DIRECT
  std::atomic<bool> direct_ok{false};

  ~State() {
    if (direct_fd >= 0) ::close(direct_fd);
    if (buffered_fd >= 0) ::close(buffered_fd);
  }
};

namespace {

uint32_t load_u32(const uint8_t* p, size_t at) {
  uint32_t v;
  std::memcpy(&v, p + at, 4);
  return v;
}

uint64_t load_u64(const uint8_t* p, size_t at) {
  uint64_t v;
  std::memcpy(&v, p + at, 8);
  return v;
}

// start + bytes <= limit without overflow.
bool fits(uint64_t start, uint64_t bytes, uint64_t limit) {
  return start <= limit && bytes <= limit - start;
}

JlmHeader read_header(const std::string& path, const uint8_t* p, size_t size) {
  if (size < kJlmHeaderBytes)
    throw_error("{}: {} bytes is too small for a .jlm header ({} bytes)", path, size,
                kJlmHeaderBytes);
  if (std::memcmp(p, kJlmMagic, 4) != 0) throw_error("{}: not a .jlm file (bad magic)", path);
  const uint32_t endian = load_u32(p, jlm_header::kEndian);
  if (endian != kJlmEndianMark)
    throw_error("{}: endianness mark is {:#010x}, expected {:#010x}: the file was written for a "
                "machine of the other byte order",
                path, endian, kJlmEndianMark);
  JlmHeader h;
  h.version = load_u32(p, jlm_header::kVersion);
  if (h.version < kJlmVersion)
    throw_error("{}: container version {} is older than this jitllm's version {}: reconvert with "
                "`jitllm convert SOURCE {}`",
                path, h.version, kJlmVersion, path);
  if (h.version > kJlmVersion)
    throw_error("{}: container version {} is newer than this jitllm supports ({}): update jitllm "
                "or reconvert with this one",
                path, h.version, kJlmVersion);
  h.alignment = load_u32(p, jlm_header::kAlignment);
  if (h.alignment != kJlmPageBytes)
    throw_error("{}: group alignment {} is not {}", path, h.alignment, kJlmPageBytes);
  h.checksum = load_u64(p, jlm_header::kChecksum);
  h.file_bytes = load_u64(p, jlm_header::kFileBytes);
  h.metadata_offset = load_u64(p, jlm_header::kMetadataOffset);
  h.metadata_bytes = load_u64(p, jlm_header::kMetadataBytes);
  h.source_offset = load_u64(p, jlm_header::kSourceOffset);
  h.source_bytes = load_u64(p, jlm_header::kSourceBytes);
  h.groups_offset = load_u64(p, jlm_header::kGroupsOffset);
  h.group_count = load_u64(p, jlm_header::kGroupCount);
  h.tensors_offset = load_u64(p, jlm_header::kTensorsOffset);
  h.tensor_count = load_u64(p, jlm_header::kTensorCount);
  h.data_offset = load_u64(p, jlm_header::kDataOffset);
  h.tensor_alignment = load_u64(p, jlm_header::kTensorAlignment);

  // Size first: a truncated file is the common failure (an interrupted copy), so say so plainly.
  if (h.file_bytes != size)
    throw_error("{}: the header says the file has {} bytes but it has {}: {}", path, h.file_bytes,
                size,
                size < h.file_bytes ? "it is truncated (interrupted copy or conversion?)"
                                    : "it has trailing bytes");
  if (h.data_offset % kJlmPageBytes != 0 || !fits(0, h.data_offset, size) ||
      h.data_offset < kJlmHeaderBytes)
    throw_error("{}: data offset {} is not a page boundary inside the file", path, h.data_offset);
  const uint64_t head = h.data_offset;
  if (h.metadata_offset < kJlmHeaderBytes || !fits(h.metadata_offset, h.metadata_bytes, head))
    throw_error("{}: metadata section [{}, +{}) lies outside the header area (ends at {})", path,
                h.metadata_offset, h.metadata_bytes, head);
  if (h.source_offset < kJlmHeaderBytes || !fits(h.source_offset, h.source_bytes, head))
    throw_error("{}: source section [{}, +{}) lies outside the header area (ends at {})", path,
                h.source_offset, h.source_bytes, head);
  if (h.group_count > head / kJlmGroupEntryBytes ||
      !fits(h.groups_offset, h.group_count * kJlmGroupEntryBytes, head) ||
      h.groups_offset < kJlmHeaderBytes)
    throw_error("{}: group table ({} entries at {}) lies outside the header area", path,
                h.group_count, h.groups_offset);
  if (h.tensors_offset < kJlmHeaderBytes || h.tensors_offset > head)
    throw_error("{}: tensor table offset {} lies outside the header area", path, h.tensors_offset);
  if (h.tensor_alignment == 0 || h.tensor_alignment > kJlmPageBytes)
    throw_error("{}: tensor alignment {} is invalid", path, h.tensor_alignment);

  // Everything before the data is covered by one checksum: a damaged table is refused here.
  std::vector<uint8_t> copy(p, p + head);
  std::memset(copy.data() + jlm_header::kChecksum, 0, 8);
  const uint64_t actual = xxh64(copy.data(), copy.size());
  if (actual != h.checksum)
    throw_error("{}: header checksum mismatch (stored {:016x}, computed {:016x}): the header or "
                "tensor table is damaged; reconvert the model",
                path, h.checksum, actual);
  return h;
}

void read_groups(JlmFile::State& s, const uint8_t* p) {
  const JlmHeader& h = s.header;
  ByteCursor c(p + h.groups_offset, size_t(h.group_count * kJlmGroupEntryBytes),
               s.path + ": group table", h.groups_offset);
  uint64_t previous_end = h.data_offset;
  for (uint64_t i = 0; i < h.group_count; ++i) {
    JlmGroup g;
    const uint32_t kind = c.u32("group kind");
    if (kind > uint32_t(JlmGroupKind::Head)) c.fail(fmt::format("group {}: unknown kind {}", i, kind));
    g.kind = JlmGroupKind(kind);
    g.block = c.i32("group block");
    g.expert = c.i32("group expert");
    c.u32("reserved");
    g.offset = c.u64("group offset");
    g.bytes = c.u64("group bytes");
    if (g.offset % kJlmPageBytes != 0 || g.bytes % kJlmPageBytes != 0)
      throw_error("{}: group {} at offset {} ({} bytes) is not page aligned", s.path, i, g.offset,
                  g.bytes);
    if (g.offset < previous_end || !fits(g.offset, g.bytes, h.file_bytes))
      throw_error("{}: group {} [{}, +{}) overlaps another group or runs past the end ({} bytes)",
                  s.path, i, g.offset, g.bytes, h.file_bytes);
    previous_end = g.offset + g.bytes;
    s.groups.push_back(g);
  }
}

void read_tensors(JlmFile::State& s, const uint8_t* p) {
  const JlmHeader& h = s.header;
  ByteCursor c(p + h.tensors_offset, size_t(h.data_offset - h.tensors_offset),
               s.path + ": tensor table", h.tensors_offset);
  // An entry takes at least 8 + 4 + 4 + 8 + 4 + 4 + 8 * 4 bytes.
  if (h.tensor_count > c.remaining() / 56)
    c.fail(fmt::format("{} tensors cannot fit in the table's {} bytes", h.tensor_count,
                       c.remaining()));
  s.tensors.reserve(size_t(h.tensor_count));
  for (uint64_t i = 0; i < h.tensor_count; ++i) {
    JlmTensor t;
    t.name = c.string("tensor name");
    const std::string what = fmt::format("{}: tensor '{}'", s.path, t.name);
    const uint32_t type = c.u32("tensor type");
    const QuantTraits* traits = quant_traits(type);
    if (!traits) throw_error("{}: unknown type id {}", what, type);
    t.type = QuantType(type);
    const uint32_t n_dims = c.u32("tensor n_dims");
    if (n_dims == 0 || n_dims > 4) throw_error("{}: {} dimensions (1 to 4 supported)", what, n_dims);
    int64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const int64_t ne = c.i64("tensor dimension");
      if (ne <= 0 || ne > (int64_t(1) << 40))
        throw_error("{}: dimension {} is {}", what, d, ne);
      t.shape.push_back(ne);
      if (d > 0) {
        if (rows > (int64_t(1) << 48) / ne) throw_error("{}: shape is too large", what);
        rows *= ne;
      }
    }
    t.group = c.u32("tensor group");
    t.slice_count = c.u32("tensor slice count");
    t.offset = c.u64("tensor offset");
    t.slice_bytes = c.u64("tensor slice bytes");
    t.slice_stride = c.u64("tensor slice stride");
    if (t.slice_count == 0 || t.slice_count > c.remaining() / 8)
      throw_error("{}: slice count {} is invalid", what, t.slice_count);
    for (uint32_t k = 0; k < t.slice_count; ++k) t.checksums.push_back(c.u64("tensor checksum"));

    uint64_t want = 0;
    try {
      want = row_bytes(t.type, t.shape[0]) * uint64_t(rows);
    } catch (const std::exception& e) {
      rethrow_with_context(e, what);
    }
    if (t.slice_bytes * t.slice_count != want)
      throw_error("{}: {} slices of {} bytes, but a {} tensor of this shape has {} bytes", what,
                  t.slice_count, t.slice_bytes, quant_name(t.type), want);
    if (t.slice_count > 1 && (uint64_t(t.shape.back()) != t.slice_count || n_dims < 2))
      throw_error("{}: split into {} slices but its last dimension is {}", what, t.slice_count,
                  t.shape.back());
    if (t.offset % h.tensor_alignment != 0)
      throw_error("{}: offset {} is not {}-byte aligned", what, t.offset, h.tensor_alignment);
    for (uint32_t k = 0; k < t.slice_count; ++k) {
      const uint64_t gi = uint64_t(t.group) + k;
      if (gi >= s.groups.size())
        throw_error("{}: slice {} names group {} but the file has {} groups", what, k, gi,
                    s.groups.size());
      const JlmGroup& g = s.groups[gi];
      const uint64_t at = t.offset + uint64_t(k) * t.slice_stride;
      if (at < g.offset || !fits(at, t.slice_bytes, g.offset + g.bytes))
        throw_error("{}: slice {} [{}, +{}) lies outside its group {} [{}, +{})", what, k, at,
                    t.slice_bytes, gi, g.offset, g.bytes);
    }
    if (!s.by_name.emplace(t.name, s.tensors.size()).second)
      throw_error("{}: appears twice in the tensor table", what);
    s.tensors.push_back(std::move(t));
  }
}

}  // namespace

JlmFile JlmFile::open(const std::string& path) {
  auto s = std::make_shared<State>();
  s->path = path;
  s->map = std::make_shared<MappedFile>(path);
  const uint8_t* p = s->map->data();
  s->header = read_header(path, p, s->map->size());
  const JlmHeader& h = s->header;
  s->metadata = decode_metadata(p + h.metadata_offset, size_t(h.metadata_bytes),
                                path + ": metadata", h.metadata_offset);
  s->source = decode_metadata(p + h.source_offset, size_t(h.source_bytes),
                              path + ": source record", h.source_offset);
  read_groups(*s, p);
  read_tensors(*s, p);
  JlmFile f;
  f.state_ = std::move(s);
  return f;
}

const std::string& JlmFile::path() const { return state_->path; }
uint32_t JlmFile::version() const { return state_->header.version; }
uint64_t JlmFile::file_bytes() const { return state_->header.file_bytes; }
uint64_t JlmFile::data_offset() const { return state_->header.data_offset; }
const Metadata& JlmFile::metadata() const { return state_->metadata; }
const Metadata& JlmFile::source() const { return state_->source; }
const std::vector<JlmGroup>& JlmFile::groups() const { return state_->groups; }
const std::vector<JlmTensor>& JlmFile::tensors() const { return state_->tensors; }
std::shared_ptr<const void> JlmFile::owner() const { return state_->map; }
bool JlmFile::direct_io() const { return state_->direct_ok.load(); }

const JlmTensor* JlmFile::find(const std::string& name) const {
  const auto it = state_->by_name.find(name);
  return it == state_->by_name.end() ? nullptr : &state_->tensors[it->second];
}

const uint8_t* JlmFile::slice_data(const JlmTensor& t, uint32_t slice) const {
  if (slice >= t.slice_count)
    throw_error("{}: tensor '{}' has {} slices, not {}", path(), t.name, t.slice_count, slice + 1);
  return state_->map->data() + t.offset + uint64_t(slice) * t.slice_stride;
}

std::vector<TensorInfo> JlmFile::tensor_infos() const {
  std::vector<TensorInfo> out;
  out.reserve(state_->tensors.size());
  for (const JlmTensor& t : state_->tensors) {
    TensorInfo info;
    info.name = t.name;
    info.type = t.type;
    info.shape = t.shape;
    info.offset = t.offset;
    info.bytes = size_t(t.bytes());
    info.data = slice_data(t, 0);
    info.slice_stride = t.slice_count > 1 ? t.slice_stride : 0;
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<JlmChecksumFailure> JlmFile::verify(int max_threads, uint64_t min_bytes_per_thread,
                                                Slices which) const {
  struct Slice {
    const JlmTensor* tensor;
    uint32_t index;
  };
  std::vector<Slice> slices;
  uint64_t total = 0;
  for (const JlmTensor& t : state_->tensors) {
    if (which != Slices::All && (t.slice_count > 1) != (which == Slices::Experts)) continue;
    for (uint32_t k = 0; k < t.slice_count; ++k) {
      slices.push_back({&t, k});
      total += t.slice_bytes;
    }
  }
  std::vector<uint64_t> actual(slices.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < slices.size();)
      actual[i] = xxh64(slice_data(*slices[i].tensor, slices[i].index),
                        size_t(slices[i].tensor->slice_bytes));
  };
  // Threads only pay off past a few tens of MB (a thread start costs ~50 us, 64 MB ~5 ms).
  const uint64_t wanted = total / std::max<uint64_t>(min_bytes_per_thread, 1);
  const int threads = int(std::clamp<uint64_t>(
      std::min<uint64_t>(wanted, slices.size()), 1, uint64_t(std::max(1, max_threads))));
  std::vector<std::thread> helpers;
  for (int i = 1; i < threads; ++i) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the ones running (and this one) do the rest
    }
  }
  work();
  for (std::thread& h : helpers) h.join();
  std::vector<JlmChecksumFailure> failures;
  for (size_t i = 0; i < slices.size(); ++i) {
    const JlmTensor& t = *slices[i].tensor;
    const uint64_t expected = t.checksums[slices[i].index];
    if (actual[i] != expected) failures.push_back({t.name, slices[i].index, expected, actual[i]});
  }
  return failures;
}

void JlmFile::check_data(Slices which) const {
  const std::vector<JlmChecksumFailure> failures = verify(8, uint64_t(64) << 20, which);
  if (failures.empty()) return;
  const JlmChecksumFailure& f = failures.front();
  const bool split = find(f.tensor)->slice_count > 1;
  throw_error("{}: tensor '{}'{}: data checksum {:016x}, stored {:016x}: the file is damaged "
              "({} damaged slice{} in all); reconvert it",
              path(), f.tensor, split ? fmt::format(" expert {}", f.slice) : "", f.actual,
              f.expected, failures.size(), failures.size() == 1 ? "" : "s");
}

void JlmFile::read_group(uint32_t id, uint8_t* buffer, size_t capacity, bool verify) const {
  State& s = *state_;
  if (id >= s.groups.size())
    throw_error("{}: no page group {} (the file has {})", s.path, id, s.groups.size());
  const JlmGroup& g = s.groups[id];
  if (capacity < g.bytes)
    throw_error("{}: group {} needs a {}-byte buffer, got {}", s.path, id, g.bytes, capacity);
  if (reinterpret_cast<uintptr_t>(buffer) % kJlmPageBytes != 0)
    throw_error("{}: read_group buffer is not {}-byte aligned", s.path, kJlmPageBytes);

  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(s.fd_mutex);
    if (s.direct_fd < 0 && s.buffered_fd < 0) {
      s.direct_fd = ::open(s.path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      if (s.direct_fd < 0) {
        // tmpfs and some network filesystems refuse O_DIRECT (EINVAL): read through the cache.
        s.buffered_fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (s.buffered_fd < 0)
          throw_error("{}: cannot open for group reads: {}", s.path, std::strerror(errno));
      }
    }
    fd = s.direct_fd >= 0 ? s.direct_fd : s.buffered_fd;
  }

  uint64_t done = 0;
  while (done < g.bytes) {
    const ssize_t n = ::pread(fd, buffer + done, size_t(g.bytes - done), off_t(g.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && fd == s.direct_fd) {
      // The filesystem accepted O_DIRECT at open but refuses the read: switch to buffered.
      std::lock_guard<std::mutex> lock(s.fd_mutex);
      if (s.buffered_fd < 0) s.buffered_fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (s.buffered_fd < 0)
        throw_error("{}: cannot open for group reads: {}", s.path, std::strerror(errno));
      fd = s.buffered_fd;
      s.direct_ok = false;
      continue;
    }
    if (n < 0)
      throw_error("{}: reading group {} at offset {}: {}", s.path, id, g.offset + done,
                  std::strerror(errno));
    if (n == 0)
      throw_error("{}: group {} ends at {} but the file ended at {} (truncated?)", s.path, id,
                  g.offset + g.bytes, g.offset + done);
    done += uint64_t(n);
  }
  if (fd == s.direct_fd) s.direct_ok = true;
  if (!verify) return;
  // A group read this way is its pages' first read: hash them before anyone computes with them.
  const std::vector<JlmChecksumFailure> failures = verify_group(id, buffer);
  if (!failures.empty())
    throw_error("{}: group {}: tensor '{}' slice {}: data checksum {:016x}, stored {:016x}: the "
                "file is damaged; reconvert it",
                s.path, id, failures[0].tensor, failures[0].slice, failures[0].actual,
                failures[0].expected);
}

std::vector<JlmChecksumFailure> JlmFile::verify_group(uint32_t id,
                                                      const uint8_t* buffer) const {
  const State& s = *state_;
  if (id >= s.groups.size())
    throw_error("{}: no page group {} (the file has {})", s.path, id, s.groups.size());
  const JlmGroup& g = s.groups[id];
  std::vector<JlmChecksumFailure> failures;
  for (const JlmTensor& t : s.tensors) {
    if (id < t.group || id >= t.group + t.slice_count) continue;
    const uint32_t k = id - t.group;
    const uint64_t at = t.offset + uint64_t(k) * t.slice_stride - g.offset;
    const uint64_t actual = xxh64(buffer + at, size_t(t.slice_bytes));
    if (actual != t.checksums[k]) failures.push_back({t.name, k, t.checksums[k], actual});
  }
  return failures;
}

}  // namespace jitllm
