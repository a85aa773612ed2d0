// .jlm writer: layout planning (groups, offsets, expert slices), streamed data writes with
// per-slice XXH64, and the final header/table write + atomic rename (see jlm_writer.h).
#include "io/jlm_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/temp_file.h"
#include "io/jlm_hash.h"
#include "io/kv_codec.h"

namespace jitllm {
namespace {

// File order of groups: globals, embedding, then per block its dense group followed by its
// expert groups, then the head (the order a forward pass touches them).
using GroupKey = std::tuple<int, int32_t, int, int32_t>;  // (rank, block, dense=0/expert=1, expert)

GroupKey group_key(JlmGroupKind kind, int32_t block, int32_t expert) {
  switch (kind) {
    case JlmGroupKind::Global: return {0, -1, 0, -1};
    case JlmGroupKind::Embedding: return {1, -1, 0, -1};
    case JlmGroupKind::Block: return {2, block, 0, -1};
    case JlmGroupKind::Expert: return {2, block, 1, expert};
    case JlmGroupKind::Head: return {3, -1, 0, -1};
  }
  return {4, -1, 0, -1};
}

void put_i64(std::vector<uint8_t>& out, int64_t v) { put_u64(out, uint64_t(v)); }

void store_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); }
void store_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); }

}  // namespace

size_t jlm_tensor_entry_bytes(const JlmTensor& t) {
  return 8 + t.name.size() + 4 + 4 + 8 * t.shape.size() + 4 + 4 + 8 + 8 + 8 + 8 * t.slice_count;
}

std::vector<uint8_t> jlm_encode_head(const JlmHeader& h, const std::vector<uint8_t>& metadata,
                                     const std::vector<uint8_t>& source,
                                     const std::vector<JlmGroup>& groups,
                                     const std::vector<JlmTensor>& tensors) {
  std::vector<uint8_t> out(kJlmHeaderBytes, 0);
  std::memcpy(&out[jlm_header::kMagic], kJlmMagic, 4);
  store_u32(out, jlm_header::kVersion, h.version);
  store_u32(out, jlm_header::kEndian, kJlmEndianMark);
  store_u32(out, jlm_header::kAlignment, h.alignment);
  store_u64(out, jlm_header::kFileBytes, h.file_bytes);
  store_u64(out, jlm_header::kMetadataOffset, h.metadata_offset);
  store_u64(out, jlm_header::kMetadataBytes, h.metadata_bytes);
  store_u64(out, jlm_header::kSourceOffset, h.source_offset);
  store_u64(out, jlm_header::kSourceBytes, h.source_bytes);
  store_u64(out, jlm_header::kGroupsOffset, h.groups_offset);
  store_u64(out, jlm_header::kGroupCount, h.group_count);
  store_u64(out, jlm_header::kTensorsOffset, h.tensors_offset);
  store_u64(out, jlm_header::kTensorCount, h.tensor_count);
  store_u64(out, jlm_header::kDataOffset, h.data_offset);
  store_u64(out, jlm_header::kTensorAlignment, h.tensor_alignment);

  std::vector<uint8_t> group_table;
  for (const JlmGroup& g : groups) {
    put_u32(group_table, uint32_t(g.kind));
    put_u32(group_table, uint32_t(g.block));
    put_u32(group_table, uint32_t(g.expert));
    put_u32(group_table, 0);
    put_u64(group_table, g.offset);
    put_u64(group_table, g.bytes);
  }
  std::vector<uint8_t> tensor_table;
  for (const JlmTensor& t : tensors) {
    put_string(tensor_table, t.name);
    put_u32(tensor_table, uint32_t(t.type));
    put_u32(tensor_table, uint32_t(t.shape.size()));
    for (int64_t d : t.shape) put_i64(tensor_table, d);
    put_u32(tensor_table, t.group);
    put_u32(tensor_table, t.slice_count);
    put_u64(tensor_table, t.offset);
    put_u64(tensor_table, t.slice_bytes);
    put_u64(tensor_table, t.slice_stride);
    for (uint64_t c : t.checksums) put_u64(tensor_table, c);
  }
  // Sections at their planned offsets; the gaps stay zero.
  out.resize(h.data_offset, 0);
  auto place = [&](const std::vector<uint8_t>& section, uint64_t at) {
    if (!section.empty()) std::memcpy(out.data() + at, section.data(), section.size());
  };
  place(metadata, h.metadata_offset);
  place(source, h.source_offset);
  place(group_table, h.groups_offset);
  place(tensor_table, h.tensors_offset);
  store_u64(out, jlm_header::kChecksum, 0);
  store_u64(out, jlm_header::kChecksum, xxh64(out.data(), out.size()));
  return out;
}

JlmWriter::JlmWriter(std::string path, const Metadata& metadata, const Metadata& source,
                     const std::vector<JlmTensorSpec>& specs)
    : path_(std::move(path)) {
  encode_metadata(metadata, metadata_bytes_);
  encode_metadata(source, source_bytes_);
  plan(specs);
  fd_ = create_temp_beside(path_, tmp_path_);
  // Size the file up front: the padding between tensors and groups reads as zeros (sparse).
  if (::ftruncate(fd_, off_t(header_.file_bytes)) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_path_.c_str());
    throw_error("{}: cannot size to {} bytes: {}", tmp_path_, header_.file_bytes,
                std::strerror(err));
  }
}

JlmWriter::~JlmWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
}

void JlmWriter::plan(const std::vector<JlmTensorSpec>& specs) {
  // 1. Tensor shapes, slice sizes and the group each slice belongs to.
  std::set<std::string> names;
  std::map<GroupKey, JlmGroup> group_map;
  std::map<int32_t, int64_t> experts_of_block;  // block -> n_expert of its split tensors
  std::vector<JlmPlacement> placement;
  tensors_.reserve(specs.size());
  for (const JlmTensorSpec& s : specs) {
    if (s.name.empty()) throw_error("{}: a tensor has an empty name", path_);
    if (!names.insert(s.name).second) throw_error("{}: tensor '{}' appears twice", path_, s.name);
    if (s.shape.empty() || s.shape.size() > 4)
      throw_error("{}: tensor '{}' has {} dimensions (1 to 4 supported)", path_, s.name,
                  s.shape.size());
    int64_t rows = 1;
    for (size_t d = 0; d < s.shape.size(); ++d) {
      if (s.shape[d] <= 0)
        throw_error("{}: tensor '{}' dimension {} is {}", path_, s.name, d, s.shape[d]);
      if (d > 0) rows *= s.shape[d];
    }
    uint64_t bytes = 0;
    try {
      bytes = row_bytes(s.type, s.shape[0]) * uint64_t(rows);
    } catch (const std::exception& e) {
      rethrow_with_context(e, fmt::format("{}: tensor '{}'", path_, s.name));
    }
    JlmPlacement p = jlm_place_tensor(s.name, s.shape.size());
    JlmTensor t;
    t.name = s.name;
    t.type = s.type;
    t.shape = s.shape;
    if (p.split_experts) {
      const int64_t n_expert = s.shape.back();
      auto [it, fresh] = experts_of_block.emplace(p.block, n_expert);
      if (!fresh && it->second != n_expert)
        throw_error("{}: tensor '{}' has {} experts but another expert tensor of block {} has {}",
                    path_, s.name, n_expert, p.block, it->second);
      t.slice_count = uint32_t(n_expert);
      t.slice_bytes = bytes / uint64_t(n_expert);
      t.checksums.assign(t.slice_count, 0);
      for (int32_t e = 0; e < n_expert; ++e)
        group_map.emplace(group_key(JlmGroupKind::Expert, p.block, e),
                          JlmGroup{JlmGroupKind::Expert, p.block, e, 0, 0});
    } else {
      t.slice_bytes = bytes;
      t.checksums.assign(1, 0);
      group_map.emplace(group_key(p.kind, p.block, -1), JlmGroup{p.kind, p.block, -1, 0, 0});
    }
    placement.push_back(p);
    tensors_.push_back(std::move(t));
  }

  // 2. Group ids in file order.
  std::map<GroupKey, uint32_t> group_id;
  for (auto& [key, g] : group_map) {
    group_id[key] = uint32_t(groups_.size());
    groups_.push_back(g);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const JlmPlacement& p = placement[i];
    tensors_[i].group = p.split_experts ? group_id.at(group_key(JlmGroupKind::Expert, p.block, 0))
                                        : group_id.at(group_key(p.kind, p.block, -1));
  }

  // 3. Header area: header, metadata, source, group table, tensor table; data starts on a page.
  header_.metadata_offset = kJlmHeaderBytes;
  header_.metadata_bytes = metadata_bytes_.size();
  header_.source_offset = jlm_align_up(header_.metadata_offset + header_.metadata_bytes, 8);
  header_.source_bytes = source_bytes_.size();
  header_.groups_offset = jlm_align_up(header_.source_offset + header_.source_bytes, 8);
  header_.group_count = groups_.size();
  header_.tensors_offset = header_.groups_offset + groups_.size() * kJlmGroupEntryBytes;
  header_.tensor_count = tensors_.size();
  uint64_t table_end = header_.tensors_offset;
  for (const JlmTensor& t : tensors_) table_end += jlm_tensor_entry_bytes(t);
  header_.data_offset = jlm_align_up(table_end, kJlmPageBytes);

  // 4. Offsets. Dense groups hold their tensors in table order. The expert groups of a block are
  // laid out once (slice 0 of each split tensor, in table order) and repeated, so all of them
  // have one size and every split tensor has a constant slice stride.
  uint64_t cursor = header_.data_offset;
  for (uint32_t gi = 0; gi < groups_.size(); ++gi) {
    JlmGroup& g = groups_[gi];
    g.offset = cursor;
    uint64_t end = cursor;
    if (g.kind != JlmGroupKind::Expert) {
      for (JlmTensor& t : tensors_) {
        if (t.group != gi) continue;
        t.offset = jlm_align_up(end, kJlmTensorAlignment);
        end = t.offset + t.slice_bytes;
      }
    } else if (g.expert == 0) {
      for (JlmTensor& t : tensors_) {
        if (t.group != gi) continue;
        t.offset = jlm_align_up(end, kJlmTensorAlignment);
        end = t.offset + t.slice_bytes;
      }
    } else {
      end = cursor + groups_[gi - 1].bytes;  // same size as expert 0 of this block
    }
    g.bytes = jlm_align_up(end - cursor, kJlmPageBytes);
    cursor += g.bytes;
  }
  for (JlmTensor& t : tensors_)
    if (t.slice_count > 1) t.slice_stride = groups_[t.group].bytes;
  header_.file_bytes = cursor;

  written_.resize(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) written_[i].assign(tensors_[i].slice_count, false);
}

void JlmWriter::pwrite_all(const uint8_t* data, size_t bytes, uint64_t offset,
                           const std::string& what) {
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, data, std::min<size_t>(bytes, size_t(1) << 30), off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_error("{}: writing {} at offset {}: {}", tmp_path_, what, offset, std::strerror(errno));
    }
    data += n;
    bytes -= size_t(n);
    offset += uint64_t(n);
  }
}

void JlmWriter::write_slice(size_t index, uint32_t slice, const uint8_t* data, size_t bytes) {
  if (index >= tensors_.size()) throw_error("{}: no tensor #{}", path_, index);
  JlmTensor& t = tensors_[index];
  if (slice >= t.slice_count)
    throw_error("{}: tensor '{}' has {} slices, not {}", path_, t.name, t.slice_count, slice + 1);
  if (bytes != t.slice_bytes)
    throw_error("{}: tensor '{}' slice {}: got {} bytes, expected {}", path_, t.name, slice, bytes,
                t.slice_bytes);
  if (fd_ < 0) throw_error("{}: write after commit", path_);
  pwrite_all(data, bytes, t.offset + uint64_t(slice) * t.slice_stride, t.name);
  t.checksums[slice] = xxh64(data, bytes);
  written_[index][slice] = true;
}

void JlmWriter::write_tensor(size_t index, const uint8_t* data, size_t bytes) {
  if (index >= tensors_.size()) throw_error("{}: no tensor #{}", path_, index);
  const JlmTensor& t = tensors_[index];
  if (bytes != t.bytes())
    throw_error("{}: tensor '{}': got {} bytes, expected {}", path_, t.name, bytes, t.bytes());
  for (uint32_t s = 0; s < t.slice_count; ++s)
    write_slice(index, s, data + uint64_t(s) * t.slice_bytes, size_t(t.slice_bytes));
}

void JlmWriter::commit() {
  if (committed_) return;
  for (size_t i = 0; i < tensors_.size(); ++i)
    for (uint32_t s = 0; s < tensors_[i].slice_count; ++s)
      if (!written_[i][s])
        throw_error("{}: tensor '{}' slice {} was never written", path_, tensors_[i].name, s);
  const std::vector<uint8_t> head =
      jlm_encode_head(header_, metadata_bytes_, source_bytes_, groups_, tensors_);
  pwrite_all(head.data(), head.size(), 0, "header");
  if (::fsync(fd_) != 0) throw_error("{}: fsync: {}", tmp_path_, std::strerror(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_error("{}: close: {}", tmp_path_, std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    throw_error("{}: cannot rename {} to it: {}", path_, tmp_path_, std::strerror(errno));
  committed_ = true;
  // Make the rename itself durable (best effort: some filesystems refuse fsync on a folder).
  const std::string parent = std::filesystem::path(path_).parent_path().string();
  const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace jitllm
