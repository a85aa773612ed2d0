// Minimal protobuf reading of SentencePiece's ModelProto (see sentencepiece_proto.h). Field
// numbers from sentencepiece_model.proto: ModelProto{2: trainer_spec, 3: normalizer_spec},
// TrainerSpec{3: model_type}, NormalizerSpec{1: name, 2: precompiled_charsmap,
// 3: add_dummy_prefix, 4: remove_extra_whitespaces, 5: escape_whitespaces}.
#include "tokenizer/sentencepiece_proto.h"

#include <cstdint>
#include <functional>
#include <string_view>

#include "core/error.h"

namespace jitllm {

namespace {

class WireReader {
 public:
  WireReader(std::string_view bytes, size_t base, const std::string& path)
      : bytes_(bytes), base_(base), path_(path) {}
  bool done() const { return pos_ >= bytes_.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) fail("truncated varint");
      const uint8_t b = uint8_t(bytes_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view bytes(size_t n) {
    if (n > bytes_.size() - pos_) fail("length-delimited field runs past the end");
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  size_t offset() const { return base_ + pos_; }
  // Calls on_field(number, wire_type) for each field; the callback consumes varint/bytes fields
  // it wants via the reader, others are skipped here.
  void for_each(const std::function<bool(uint32_t, uint32_t)>& on_field) {
    while (!done()) {
      const uint64_t key = varint();
      const uint32_t number = uint32_t(key >> 3), type = uint32_t(key & 7);
      if (on_field(number, type)) continue;
      switch (type) {
        case 0: varint(); break;
        case 1: bytes(8); break;
        case 2: bytes(size_t(varint())); break;
        case 5: bytes(4); break;
        default: fail(fmt::format("unsupported wire type {} for field {}", type, number));
      }
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw_error("{}: SentencePiece model at byte {}: {}", path_, base_ + pos_, what);
  }

 private:
  std::string_view bytes_;
  size_t base_;
  size_t pos_ = 0;
  const std::string& path_;
};

}  // namespace

SentencePieceSpec read_sentencepiece_spec(const std::string& model_bytes, const std::string& path) {
  SentencePieceSpec spec;
  WireReader top(model_bytes, 0, path);
  top.for_each([&](uint32_t number, uint32_t type) {
    if (type != 2 || (number != 2 && number != 3)) return false;
    const size_t start = top.offset();
    const std::string_view body = top.bytes(size_t(top.varint()));
    WireReader sub(body, start, path);
    if (number == 2) {
      sub.for_each([&](uint32_t n, uint32_t t) {
        if (n == 3 && t == 0) {
          spec.model_type = int(sub.varint());
          return true;
        }
        return false;
      });
    } else {
      sub.for_each([&](uint32_t n, uint32_t t) {
        if (t == 2 && (n == 1 || n == 2)) {
          const std::string_view s = sub.bytes(size_t(sub.varint()));
          (n == 1 ? spec.normalizer_name : spec.precompiled_charsmap) = std::string(s);
          return true;
        }
        if (t == 0 && n >= 3 && n <= 5) {
          const bool v = sub.varint() != 0;
          (n == 3 ? spec.add_dummy_prefix : n == 4 ? spec.remove_extra_whitespaces
                                                   : spec.escape_whitespaces) = v;
          return true;
        }
        return false;
      });
    }
    return true;
  });
  return spec;
}

}  // namespace jitllm
