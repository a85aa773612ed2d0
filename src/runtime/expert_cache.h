// ExpertCache: a model's MoE experts paged from its .jlm under a host budget. Each expert is one
// page group of the file (io/jlm_format.h), read with O_DIRECT through io_uring into one of a
// fixed number of slots, every read of a step's fetch in flight together; a layer's chosen
// experts are fetched as soon as its router has chosen (graph/moe.cpp) and each runs as soon as
// its own pages are in. Eviction: the least used (counts halved as the cache turns over) of the
// experts no step is running (expert_cache.cpp says why not plain LRU).
// Every read is checked against the slices' XXH64 before it is used. docs/paging.md.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graph/moe.h"
#include "io/jlm_reader.h"

namespace jitllm {

class Model;

struct ExpertCacheStats {
  uint64_t hits = 0;        // experts asked for that were in a slot
  uint64_t misses = 0;      // experts read from disk
  uint64_t bytes_read = 0;  // bytes read from disk
  double wait_seconds = 0;  // time a step waited for pages
};

class ExpertCache final : public ExpertPages {
 public:
  static constexpr unsigned kQueueDepth = 64;  // reads in flight at most
  // Slots for as many experts as `bytes` hold (at least a layer's n_expert_used, else it
  // throws). The model must have been bound from the .jlm at `jlm_path`, and outlive the cache.
  // Throws naming what does not match.
  ExpertCache(const std::string& jlm_path, const Model& model, uint64_t bytes);
  ~ExpertCache() override;
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  int capacity() const override { return int(slots_.size()); }
  void fetch(int il, std::span<const int32_t> ids) override;
  ExpertMatrices wait(int il, int32_t id) override;
  ExpertMatrices next(int il, int32_t* id) override;
  void release() noexcept override;

  ExpertCacheStats stats() const;
  uint64_t slot_bytes() const { return slot_bytes_; }
  bool direct_io() const { return direct_; }
  bool uring() const;  // false: the reads are plain preads (io_uring refused)

  // The disk's read rate with this cache's reads (expert groups, O_DIRECT, the same queue
  // depth), over about `bytes` spread through the file's experts: bytes per second. Uses a
  // buffer of its own; the slots are untouched.
  double measure_read_wall(uint64_t bytes);

 private:
  struct Expert {          // one (layer, expert)
    uint32_t group = 0;    // its page group in the file
    int32_t slot = -1;     // where it is, -1: on disk only
    // The views the matmuls get (data into the slot once it is in), gate / up / down.
    TensorInfo gate, up, down;
    uint64_t gate_at = 0, up_at = 0, down_at = 0;  // byte offsets inside the group
  };
  struct Slot {
    int64_t expert = -1;   // index into experts_, -1: empty
    int pending = 0;       // reads in flight into it
    bool pinned = false;   // part of the current fetch
    bool checked = false;  // its checksums held
    int error = 0;         // a failed read's errno
    uint64_t last_use = 0;
    uint32_t uses = 0;     // hits since it was read, halved each time the cache turns over
  };
  struct Read {            // one read in flight (an expert is read in pieces of kReadBytes)
    int32_t slot = -1;
    uint8_t* buf = nullptr;
    uint64_t offset = 0, bytes = 0;
  };

  int64_t index(int il, int32_t id) const;
  // Reads [offset, offset + bytes) of the file into buf in pieces, into `slot` (its pending
  // count) or, with slot -1, for a measurement.
  void read_into(int32_t slot, uint8_t* buf, uint64_t offset, uint64_t bytes);
  void queue(const Read& rd);  // one piece on the ring
  void reap_one();          // waits for one completion and books it
  void reap_waited();       // reap_one for a step that waits: the time counts as waited
  [[noreturn]] void fail(const std::string& why);  // the ring failed: the cache is unusable
  void drain();             // waits for every read in flight
  uint8_t* slot_data(int32_t s) const { return arena_ + uint64_t(s) * slot_bytes_; }

  JlmFile file_;
  int fd_ = -1;
  int direct_fd_ = -1;  // the O_DIRECT descriptor after a fall-back to buffered reads
  std::string broken_;  // why the cache can no longer be used (a failed ring), empty: fine
  bool direct_ = false;
  struct Ring;
  std::unique_ptr<Ring> ring_;
  std::vector<int64_t> layer_first_;  // [n_layer] first index into experts_, -1: no experts
  int n_expert_ = 0;
  std::vector<Expert> experts_;
  std::vector<Slot> slots_;
  uint64_t slot_bytes_ = 0;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<Read> reads_;           // by io_uring user data
  std::vector<uint32_t> free_reads_;
  int in_flight_ = 0;
  uint64_t clock_ = 0;
  size_t misses_since_aging_ = 0;
  std::vector<int32_t> fetched_;      // slots pinned by the current fetch
  std::vector<int32_t> unhanded_;     // experts of the current fetch next() has not returned
  mutable std::mutex stats_mutex_;
  ExpertCacheStats stats_;
};

}  // namespace jitllm
