// The .jlm container on files built here with JlmWriter: layout (page-aligned groups, one group per
// block / expert / embedding / head), bit-exact read back through the map and through O_DIRECT
// group reads, metadata and provenance equality, and refusal of damaged files (older version,
// flipped data byte found by verify, damaged table, truncation, hostile counts).
#include <gtest/gtest.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "io/jlm_format.h"
#include "io/jlm_hash.h"
#include "io/jlm_reader.h"
#include "io/jlm_writer.h"
#include "io/model_file.h"

namespace jitllm {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("jlm_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

struct Model {
  Metadata metadata;
  Metadata source;
  std::vector<JlmTensorSpec> specs;
  std::vector<std::vector<uint8_t>> data;  // [tensor] bytes in GGUF layout (experts stacked)
};

// A small llama-shaped model with random bytes; `n_expert` > 0 adds stacked expert tensors
// [n_embd, n_ff, n_expert] and [n_ff, n_embd, n_expert] per block.
Model make_model(int n_block, int n_expert, QuantType matrix_type = QuantType::Q8_0) {
  Model m;
  m.metadata.set("general.architecture", Value::string("llama"));
  m.metadata.set("llama.block_count", Value::u32(uint32_t(n_block)));
  m.metadata.set("llama.rope.freq_base", Value::f32(10000.0f));
  m.metadata.set("tokenizer.ggml.tokens", Value::string_array({"<unk>", "<s>", "</s>", "a"}));
  m.metadata.set("tokenizer.ggml.scores", Value::f32_array({0.f, 0.f, 0.f, -1.5f}));
  m.metadata.set("general.flag", Value::boolean(true));
  m.metadata.set("general.i8", Value::i8(-5));
  m.metadata.set("general.u64", Value::u64(uint64_t(1) << 40));
  m.metadata.set("general.f64", Value::f64(0.1));
  m.source.set("source.path", Value::string("/models/x.gguf"));
  m.source.set("source.bytes", Value::u64(12345));
  const int64_t n_embd = 64, n_ff = 96, n_vocab = 40;
  auto add = [&](std::string name, QuantType type, std::vector<int64_t> shape) {
    m.specs.push_back({std::move(name), type, std::move(shape)});
  };
  add("token_embd.weight", matrix_type, {n_embd, n_vocab});
  for (int b = 0; b < n_block; ++b) {
    const std::string p = "blk." + std::to_string(b) + ".";
    add(p + "attn_norm.weight", QuantType::F32, {n_embd});
    add(p + "attn_q.weight", matrix_type, {n_embd, n_embd});
    if (n_expert > 0) {
      add(p + "ffn_gate_inp.weight", QuantType::F32, {n_embd, n_expert});
      add(p + "ffn_gate_exps.weight", matrix_type, {n_embd, n_ff, n_expert});
      add(p + "ffn_down_exps.weight", QuantType::F16, {n_ff, n_embd, n_expert});
    } else {
      add(p + "ffn_down.weight", QuantType::F16, {n_ff, n_embd});
    }
  }
  add("output_norm.weight", QuantType::F32, {n_embd});
  add("output.weight", QuantType::Q4_K, {256, n_vocab});
  add("rope_freqs.weight", QuantType::F32, {32});
  std::mt19937 rng(42);
  for (const auto& s : m.specs) {
    int64_t rows = 1;
    for (size_t d = 1; d < s.shape.size(); ++d) rows *= s.shape[d];
    std::vector<uint8_t> bytes(row_bytes(s.type, s.shape[0]) * size_t(rows));
    for (auto& b : bytes) b = uint8_t(rng());
    m.data.push_back(std::move(bytes));
  }
  return m;
}

void write_model(const Model& m, const std::string& path) {
  JlmWriter w(path, m.metadata, m.source, m.specs);
  for (size_t i = 0; i < m.specs.size(); ++i) w.write_tensor(i, m.data[i].data(), m.data[i].size());
  w.commit();
}

void patch_file(const std::string& path, uint64_t offset, const void* bytes, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  f.write(static_cast<const char*>(bytes), std::streamsize(n));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JlmContainer, RoundTripIsBitExactWithEqualMetadata) {
  TempDir dir;
  const Model m = make_model(3, 0);
  const std::string path = dir.file("m.jlm");
  write_model(m, path);
  for (const auto& e : fs::directory_iterator(dir.path))  // no temporary file left beside it
    EXPECT_EQ(e.path().filename().string(), "m.jlm");

  const JlmFile f = JlmFile::open(path);
  EXPECT_EQ(f.version(), kJlmVersion);
  EXPECT_EQ(f.metadata(), m.metadata);
  EXPECT_EQ(f.source(), m.source);
  EXPECT_EQ(f.file_bytes(), fs::file_size(path));
  ASSERT_EQ(f.tensors().size(), m.specs.size());
  for (size_t i = 0; i < m.specs.size(); ++i) {
    const JlmTensor& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, m.specs[i].name);
    EXPECT_EQ(t.type, m.specs[i].type);
    EXPECT_EQ(t.shape, m.specs[i].shape);
    ASSERT_EQ(t.bytes(), m.data[i].size());
    EXPECT_EQ(0, std::memcmp(f.slice_data(t), m.data[i].data(), m.data[i].size()));
    EXPECT_EQ(t.offset % kJlmTensorAlignment, 0u);
  }
  EXPECT_TRUE(f.verify().empty());

  // The generic entry point picks the reader by magic, not by extension.
  const std::string renamed = dir.file("m.bin");
  fs::copy_file(path, renamed);
  const ModelFile mf = open_model_file(renamed);
  EXPECT_EQ(mf.format, "jlm");
  EXPECT_EQ(mf.metadata, m.metadata);
  const TensorInfo& q = mf.get("blk.2.attn_q.weight");
  EXPECT_EQ(q.bytes, m.data[1 + 2 * 3 + 1].size());
  EXPECT_EQ(0, std::memcmp(q.data, m.data[1 + 2 * 3 + 1].data(), q.bytes));
  EXPECT_NE(error_of([&] { mf.get("blk.9.attn_q.weight"); }).find("blk.9.attn_q.weight"),
            std::string::npos);
}

TEST(JlmContainer, OneGroupPerBlockEmbeddingHeadAllPageAligned) {
  TempDir dir;
  const Model m = make_model(3, 0);
  write_model(m, dir.file("m.jlm"));
  const JlmFile f = JlmFile::open(dir.file("m.jlm"));
  // global (rope_freqs), embedding, 3 blocks, head, in file order.
  ASSERT_EQ(f.groups().size(), 6u);
  EXPECT_EQ(f.groups()[0].kind, JlmGroupKind::Global);
  EXPECT_EQ(f.groups()[1].kind, JlmGroupKind::Embedding);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(f.groups()[2 + b].kind, JlmGroupKind::Block);
    EXPECT_EQ(f.groups()[2 + b].block, b);
  }
  EXPECT_EQ(f.groups()[5].kind, JlmGroupKind::Head);
  uint64_t end = f.data_offset();
  for (const JlmGroup& g : f.groups()) {
    EXPECT_EQ(g.offset % 4096, 0u);
    EXPECT_EQ(g.bytes % 4096, 0u);
    EXPECT_EQ(g.offset, end);  // contiguous, no gaps
    end = g.offset + g.bytes;
  }
  EXPECT_EQ(end, f.file_bytes());
  for (const JlmTensor& t : f.tensors()) {
    const JlmGroup& g = f.groups()[t.group];
    const JlmPlacement p = jlm_place_tensor(t.name, t.shape.size());
    EXPECT_EQ(g.kind, p.kind) << t.name;
    EXPECT_EQ(g.block, p.block) << t.name;
  }
}

TEST(JlmContainer, ExpertsGetOneGroupEachAndStackedViewReadsBack) {
  TempDir dir;
  const int n_block = 2, n_expert = 4;
  const Model m = make_model(n_block, n_expert);
  write_model(m, dir.file("moe.jlm"));
  const JlmFile f = JlmFile::open(dir.file("moe.jlm"));
  int expert_groups = 0;
  for (const JlmGroup& g : f.groups()) expert_groups += g.kind == JlmGroupKind::Expert;
  EXPECT_EQ(expert_groups, n_block * n_expert);

  const ModelFile mf = open_model_file(dir.file("moe.jlm"));
  for (size_t i = 0; i < m.specs.size(); ++i) {
    const JlmTensor& t = *f.find(m.specs[i].name);
    const TensorInfo& info = mf.get(m.specs[i].name);
    SCOPED_TRACE(t.name);
    const bool split = t.name.find("_exps.") != std::string::npos;
    ASSERT_EQ(t.slice_count, split ? uint32_t(n_expert) : 1u);
    EXPECT_EQ(t.shape, m.specs[i].shape);  // the stacked shape is kept
    for (uint32_t e = 0; e < t.slice_count; ++e) {
      const JlmGroup& g = f.groups()[t.group + e];
      if (split) {
        EXPECT_EQ(g.kind, JlmGroupKind::Expert);
        EXPECT_EQ(g.expert, int32_t(e));
      }
      // Slice e equals the e-th [.., n_expert] plane of the stacked GGUF bytes, via the table
      // and via the strided TensorInfo view.
      const uint8_t* want = m.data[i].data() + e * t.slice_bytes;
      EXPECT_EQ(0, std::memcmp(f.slice_data(t, e), want, t.slice_bytes)) << "expert " << e;
      EXPECT_EQ(0, std::memcmp(info.data + e * info.slice_stride, want, t.slice_bytes));
    }
  }
  EXPECT_TRUE(f.verify().empty());

  // Each expert group alone through O_DIRECT: bytes equal the map's and checksums hold.
  auto buffer = make_aligned<uint8_t>(1 << 20);
  for (uint32_t id = 0; id < f.groups().size(); ++id) {
    const JlmGroup& g = f.groups()[id];
    ASSERT_LE(g.bytes, 1u << 20);
    f.read_group(id, buffer.get(), 1 << 20);
    const uint8_t* mapped = f.slice_data(f.tensors()[0]) - f.tensors()[0].offset;
    EXPECT_EQ(0, std::memcmp(buffer.get(), mapped + g.offset, g.bytes)) << "group " << id;
    EXPECT_TRUE(f.verify_group(id, buffer.get()).empty()) << "group " << id;
  }
}

TEST(JlmContainer, ReadGroupUsesDirectIoAndChecksArguments) {
  TempDir dir;
  write_model(make_model(1, 0), dir.file("m.jlm"));
  const JlmFile f = JlmFile::open(dir.file("m.jlm"));
  auto buffer = make_aligned<uint8_t>(1 << 20);
  f.read_group(1, buffer.get(), 1 << 20);
  // Disk filesystems take O_DIRECT; tmpfs refuses it on older kernels (the reader then falls back
  // to pread, so only disk filesystems are held to it).
  struct statfs st {};
  ASSERT_EQ(::statfs(dir.path.c_str(), &st), 0);
  const bool tmpfs = st.f_type == 0x01021994;  // TMPFS_MAGIC
  if (!tmpfs) {
    EXPECT_TRUE(f.direct_io());
  }
  EXPECT_EQ(0, std::memcmp(buffer.get(), f.slice_data(*f.find("token_embd.weight")),
                           f.find("token_embd.weight")->bytes()));
  EXPECT_NE(error_of([&] { f.read_group(99, buffer.get(), 1 << 20); }).find("no page group 99"),
            std::string::npos);
  EXPECT_NE(error_of([&] { f.read_group(1, buffer.get() + 1, 1 << 19); }).find("aligned"),
            std::string::npos);
  EXPECT_NE(error_of([&] { f.read_group(1, buffer.get(), 16); }).find("buffer"),
            std::string::npos);
}

TEST(JlmContainer, OlderVersionIsRefusedWithReconvertHint) {
  TempDir dir;
  const std::string path = dir.file("old.jlm");
  write_model(make_model(1, 0), path);
  const uint32_t old_version = kJlmVersion - 1;
  patch_file(path, jlm_header::kVersion, &old_version, 4);
  const std::string err = error_of([&] { JlmFile::open(path); });
  EXPECT_NE(err.find("older"), std::string::npos) << err;
  EXPECT_NE(err.find("reconvert with `jitllm convert"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;

  const uint32_t newer = kJlmVersion + 1;
  patch_file(path, jlm_header::kVersion, &newer, 4);
  EXPECT_NE(error_of([&] { JlmFile::open(path); }).find("newer"), std::string::npos);
}

TEST(JlmContainer, VerifyFindsAFlippedDataByte) {
  TempDir dir;
  const std::string path = dir.file("m.jlm");
  write_model(make_model(2, 2), path);
  const JlmFile f0 = JlmFile::open(path);
  const JlmTensor& target = *f0.find("blk.1.ffn_gate_exps.weight");
  const uint64_t at = target.offset + target.slice_stride + 17;  // inside expert 1
  uint8_t byte = 0;
  std::memcpy(&byte, f0.slice_data(target, 1) + 17, 1);
  byte ^= 0x40;
  patch_file(path, at, &byte, 1);

  const JlmFile f = JlmFile::open(path);  // data damage does not stop open, verify finds it
  const auto failures = f.verify();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].tensor, "blk.1.ffn_gate_exps.weight");
  EXPECT_EQ(failures[0].slice, 1u);
  EXPECT_NE(failures[0].expected, failures[0].actual);

  auto buffer = make_aligned<uint8_t>(1 << 20);
  const uint32_t group = f.find("blk.1.ffn_gate_exps.weight")->group + 1;
  // A group read checks its slices: the damaged expert is refused on that first read.
  EXPECT_NE(error_of([&] { f.read_group(group, buffer.get(), 1 << 20); })
                .find("tensor 'blk.1.ffn_gate_exps.weight' slice 1: data checksum"),
            std::string::npos);
  EXPECT_NO_THROW(f.read_group(group - 1, buffer.get(), 1 << 20));  // expert 0 is intact
  f.read_group(group, buffer.get(), 1 << 20, /*verify=*/false);
  EXPECT_EQ(f.verify_group(group, buffer.get()).size(), 1u);
}

// The engine's load path opens with verify_checksums: damaged data is refused on that first read,
// naming the tensor (it was found only by `info --verify` before).
TEST(JlmContainer, DamagedDataIsRefusedWhenOpenedForTheEngine) {
  TempDir dir;
  const std::string path = dir.file("m.jlm");
  write_model(make_model(3, 2), path);
  EXPECT_NO_THROW(open_model_file(path, {.verify_checksums = true}));
  const JlmFile f0 = JlmFile::open(path);
  for (const char* name : {"blk.2.attn_q.weight", "blk.0.ffn_down_exps.weight"}) {
    const JlmTensor& t = *f0.find(name);
    const uint32_t last = t.slice_count - 1;
    const uint8_t flipped = uint8_t(f0.slice_data(t, last)[5] ^ 0xFF);
    patch_file(path, t.offset + t.slice_stride * last + 5, &flipped, 1);
  }
  EXPECT_NO_THROW(open_model_file(path));  // info, tokenize: metadata only, no data read
  try {
    open_model_file(path, {.verify_checksums = true});
    FAIL() << "damaged data accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    // The first damaged tensor in table order, its expert, the count and what to do.
    EXPECT_NE(what.find(path + ": tensor 'blk.0.ffn_down_exps.weight' expert 1: data checksum"),
              std::string::npos) << what;
    EXPECT_NE(what.find("2 damaged slices in all"), std::string::npos) << what;
    EXPECT_NE(what.find("reconvert"), std::string::npos) << what;
  }
  // Hashing on several threads finds the same slices as one thread.
  const JlmFile f = JlmFile::open(path);
  const auto one = f.verify(1), many = f.verify(8, /*min_bytes_per_thread=*/1);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(many.size(), 2u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].tensor, many[i].tensor);
    EXPECT_EQ(one[i].slice, many[i].slice);
    EXPECT_EQ(one[i].actual, many[i].actual);
  }
}

TEST(JlmContainer, DamagedTableIsRefusedAtOpen) {
  TempDir dir;
  const std::string path = dir.file("m.jlm");
  write_model(make_model(1, 0), path);
  const JlmFile f0 = JlmFile::open(path);
  const uint8_t junk = 0x7f;
  patch_file(path, kJlmHeaderBytes + 20, &junk, 1);  // inside the metadata section
  const std::string err = error_of([&] { JlmFile::open(path); });
  EXPECT_NE(err.find("header checksum mismatch"), std::string::npos) << err;
}

TEST(JlmContainer, TruncatedFileIsRefusedClearly) {
  TempDir dir;
  const std::string path = dir.file("m.jlm");
  write_model(make_model(2, 0), path);
  const uint64_t full = fs::file_size(path);
  for (uint64_t keep : {full - 1, full - 4096, full / 2, uint64_t(200), uint64_t(100), uint64_t(0)}) {
    const std::string cut = dir.file("cut.jlm");
    fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    const std::string err = error_of([&] { JlmFile::open(cut); });
    SCOPED_TRACE(keep);
    EXPECT_NE(err.find(cut), std::string::npos) << err;
    if (keep >= kJlmHeaderBytes)
      EXPECT_NE(err.find("truncated"), std::string::npos) << err;
    else
      EXPECT_NE(err.find("too small"), std::string::npos) << err;
  }
}

// A header that is self-consistent (checksum recomputed) but whose table lies: every lie must be
// caught by bounds checks with an error, never a crash.
TEST(JlmContainer, HostileTablesAreRefused) {
  TempDir dir;
  const Model m = make_model(1, 2);
  const std::string path = dir.file("m.jlm");
  write_model(m, path);
  const JlmFile good = JlmFile::open(path);

  auto rebuild = [&](const std::string& name, const std::function<void(JlmHeader&,
                                                                    std::vector<JlmGroup>&,
                                                                    std::vector<JlmTensor>&)>& lie) {
    JlmHeader h;
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
    auto u64 = [&](size_t at) { uint64_t v; std::memcpy(&v, &file[at], 8); return v; };
    h.file_bytes = u64(jlm_header::kFileBytes);
    h.metadata_offset = u64(jlm_header::kMetadataOffset);
    h.metadata_bytes = u64(jlm_header::kMetadataBytes);
    h.source_offset = u64(jlm_header::kSourceOffset);
    h.source_bytes = u64(jlm_header::kSourceBytes);
    h.groups_offset = u64(jlm_header::kGroupsOffset);
    h.group_count = u64(jlm_header::kGroupCount);
    h.tensors_offset = u64(jlm_header::kTensorsOffset);
    h.tensor_count = u64(jlm_header::kTensorCount);
    h.data_offset = u64(jlm_header::kDataOffset);
    std::vector<uint8_t> meta(file.begin() + long(h.metadata_offset),
                              file.begin() + long(h.metadata_offset + h.metadata_bytes));
    std::vector<uint8_t> src(file.begin() + long(h.source_offset),
                             file.begin() + long(h.source_offset + h.source_bytes));
    std::vector<JlmGroup> groups = good.groups();
    std::vector<JlmTensor> tensors = good.tensors();
    lie(h, groups, tensors);
    const auto head = jlm_encode_head(h, meta, src, groups, tensors);
    const std::string out = dir.file(name);
    fs::copy_file(path, out, fs::copy_options::overwrite_existing);
    patch_file(out, 0, head.data(), std::min<size_t>(head.size(), h.data_offset));
    return error_of([&] { JlmFile::open(out); });
  };

  EXPECT_EQ(rebuild("same.jlm", [](auto&, auto&, auto&) {}), "");  // the rebuild itself is faithful
  EXPECT_NE(rebuild("g.jlm", [](auto&, auto& g, auto&) { g[1].offset += 4096; }).find("group"),
            std::string::npos);
  EXPECT_NE(rebuild("g2.jlm", [](auto&, auto& g, auto&) { g.back().bytes += 4096; })
                .find("runs past the end"),
            std::string::npos);
  EXPECT_NE(rebuild("t.jlm", [](auto&, auto&, auto& t) { t[0].offset += 1 << 20; })
                .find("outside its group"),
            std::string::npos);
  EXPECT_NE(rebuild("s.jlm", [](auto&, auto&, auto& t) { t[0].shape[1] *= 2; })
                .find("token_embd.weight"),
            std::string::npos);
  EXPECT_NE(rebuild("c.jlm", [](auto& h, auto&, auto&) { h.group_count = uint64_t(1) << 60; })
                .find("group table"),
            std::string::npos);
  EXPECT_NE(rebuild("e.jlm", [](auto&, auto& g, auto& t) {
              for (auto& x : t)
                if (x.slice_count > 1) x.group = uint32_t(g.size() - 1);
            }).find("group"),
            std::string::npos);
}

// Every single-byte change in the header area, with the header checksum recomputed so the change
// reaches the parsers: open() either succeeds (the byte was padding or a value that is still
// consistent) or throws jitllm::Error; it never crashes or reads outside the file.
TEST(JlmContainer, EveryHeaderByteFlipIsHandled) {
  TempDir dir;
  const std::string path = dir.file("m.jlm");
  write_model(make_model(1, 2), path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
  const uint64_t data_offset = JlmFile::open(path).data_offset();
  const std::string bad = dir.file("flip.jlm");
  fs::copy_file(path, bad);
  size_t refused = 0, opened = 0;
  for (uint64_t at = 0; at < data_offset; ++at) {
    if (at >= jlm_header::kChecksum && at < jlm_header::kChecksum + 8) continue;
    std::vector<uint8_t> head(file.begin(), file.begin() + long(data_offset));
    head[at] ^= 0xA5;
    std::memset(&head[jlm_header::kChecksum], 0, 8);
    const uint64_t sum = xxh64(head.data(), head.size());
    std::memcpy(&head[jlm_header::kChecksum], &sum, 8);
    patch_file(bad, 0, head.data(), head.size());  // in place: no truncation, no writeback wait
    try {
      const JlmFile f = JlmFile::open(bad);
      f.verify();
      ++opened;
    } catch (const Error& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(refused, 200u);  // the tables are dense: most flips are caught
  EXPECT_GT(opened, 0u);     // padding between sections is not checked beyond the checksum
}

TEST(JlmContainer, WriterRefusesBadInputAndCleansUp) {
  TempDir dir;
  const std::string path = dir.file("bad.jlm");
  Metadata md;
  EXPECT_NE(error_of([&] {
              JlmWriter w(path, md, md, {{"a", QuantType::Q8_0, {33, 2}}});
            }).find("'a'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              JlmWriter w(path, md, md, {{"a", QuantType::F32, {4}}, {"a", QuantType::F32, {4}}});
            }).find("twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              JlmWriter w(path, md, md,
                          {{"blk.0.ffn_up_exps.weight", QuantType::F32, {4, 4, 2}},
                           {"blk.0.ffn_down_exps.weight", QuantType::F32, {4, 4, 3}}});
            }).find("experts"),
            std::string::npos);
  std::string tmp;
  {
    JlmWriter w(path, md, md, {{"a", QuantType::F32, {4}}, {"b", QuantType::F32, {4}}});
    const float x[4] = {1, 2, 3, 4};
    w.write_tensor(0, reinterpret_cast<const uint8_t*>(x), 16);
    tmp = w.tmp_path();
    EXPECT_TRUE(tmp.starts_with(path + ".tmp.")) << tmp;
    EXPECT_TRUE(fs::exists(tmp));
    EXPECT_NE(error_of([&] { w.commit(); }).find("'b' slice 0 was never written"),
              std::string::npos);
  }
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace jitllm
