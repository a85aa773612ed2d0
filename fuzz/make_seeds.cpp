// Writes seed inputs for the fuzz targets into <dir>/gguf and <dir>/safetensors: small valid
// files that reach every branch of the parsers (all GGUF value types, a nested array, a custom
// alignment, quantized and empty tensors; every safetensors dtype and __metadata__).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/gguf.h"

using namespace jitllm;

namespace {

TensorInfo tensor(const std::string& name, QuantType type, std::vector<int64_t> shape,
                  std::vector<uint8_t>& storage) {
  TensorInfo t;
  t.name = name;
  t.type = type;
  t.shape = std::move(shape);
  t.bytes = row_bytes(type, t.row_length()) * size_t(t.rows());
  storage.assign(t.bytes, 0x3c);
  t.data = storage.data();
  return t;
}

void write_st(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\x38');
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "fuzz-seeds";
  std::filesystem::create_directories(dir + "/gguf");
  std::filesystem::create_directories(dir + "/safetensors");

  Metadata md;
  md.set("general.architecture", Value::string("llama"));
  md.set("t.u8", Value::u8(1));
  md.set("t.i8", Value::i8(-1));
  md.set("t.u16", Value::u16(2));
  md.set("t.i16", Value::i16(-2));
  md.set("t.u32", Value::u32(3));
  md.set("t.i32", Value::i32(-3));
  md.set("t.u64", Value::u64(4));
  md.set("t.i64", Value::i64(-4));
  md.set("t.f32", Value::f32(0.5f));
  md.set("t.f64", Value::f64(0.25));
  md.set("t.bool", Value::boolean(true));
  md.set("t.strings", Value::string_array({"a", "bc"}));
  md.set("t.nested", Value::array(ValueType::Array, {Value::i32_array({1, 2}), Value::i32_array({})}));
  std::vector<uint8_t> a, b, c, d;
  std::vector<TensorInfo> ts = {tensor("f32", QuantType::F32, {4, 2}, a),
                                tensor("q4_0", QuantType::Q4_0, {32, 1}, b),
                                tensor("q4_K", QuantType::Q4_K, {256}, c),
                                tensor("empty", QuantType::F16, {0, 3}, d)};
  write_gguf(dir + "/gguf/all_types.gguf", md, ts);
  write_gguf(dir + "/gguf/align64.gguf", Metadata{}, {ts[0], ts[1]}, 64);
  write_gguf(dir + "/gguf/empty.gguf", Metadata{}, {});

  write_st(dir + "/safetensors/dtypes.safetensors",
           R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
           R"("b":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
           R"("c":{"dtype":"BF16","shape":[1,1,2],"data_offsets":[22,26]},)"
           R"("d":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[26,30]},)"
           R"("e":{"dtype":"F32","shape":[0],"data_offsets":[30,30]}})",
           30);
  write_st(dir + "/safetensors/empty.safetensors", "{}", 0);
  return 0;
}
