// The 64-bit checksum of .jlm tensor data and tables: XXH64 (seed 0), the public xxHash algorithm,
// implemented here from its specification (about 60 lines). Why no library: the checksum is part of
// the on-disk format, so its exact definition must not move with a dependency's version, and the
// whole function is smaller than the build glue a library would need. Why XXH64 and not CRC32C:
// it runs near memory bandwidth in plain C++ (~10 GB/s on one core) without CPU-specific
// instructions, and 64 bits make an accidental match on a damaged tensor negligible.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitllm {

// XXH64 (seed 0) of `bytes` bytes at `data`; identical to `xxhsum -H64` (xxHash 0.8).
uint64_t xxh64(const void* data, size_t bytes);

}  // namespace jitllm
