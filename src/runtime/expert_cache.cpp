// ExpertCache (expert_cache.h): slots, use-count eviction, O_DIRECT reads through io_uring.
#include "runtime/expert_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "model/model.h"

namespace jitllm {

namespace {

constexpr unsigned kQueueDepth = ExpertCache::kQueueDepth;
constexpr uint64_t kReadBytes = uint64_t(1) << 20;  // an expert is read in pieces of this size

}  // namespace

// io_uring from liburing; where the kernel or a sandbox refuses it (seccomp in containers), the
// reads are plain preads, one after another.
struct ExpertCache::Ring {
  io_uring ring{};
  bool ok = false;
};

ExpertCache::ExpertCache(const std::string& jlm_path, const Model& model, uint64_t bytes)
    : file_(JlmFile::open(jlm_path)), ring_(std::make_unique<Ring>()) {
  const Config& c = model.config();
  n_expert_ = c.n_expert;
  const std::vector<JlmGroup>& groups = file_.groups();
  layer_first_.assign(size_t(c.n_layer), -1);
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = model.weights().layers[size_t(il)];
    if (!l.ffn_gate_exps || !l.ffn_up_exps || !l.ffn_down_exps) continue;
    const JlmTensor* parts[3] = {file_.find(l.ffn_gate_exps->name), file_.find(l.ffn_up_exps->name),
                                 file_.find(l.ffn_down_exps->name)};
    for (const JlmTensor* t : parts)
      if (!t || t->slice_count != uint32_t(c.n_expert))
        throw_error("{}: layer {}'s experts are not split into {} expert pages (convert the model "
                    "again with this version)", jlm_path, il, c.n_expert);
    layer_first_[size_t(il)] = int64_t(experts_.size());
    for (int e = 0; e < c.n_expert; ++e) {
      Expert x;
      x.group = parts[0]->group + uint32_t(e);
      const JlmGroup& g = groups.at(x.group);
      if (g.kind != JlmGroupKind::Expert || g.block != il || g.expert != e)
        throw_error("{}: page group {} is not expert {} of layer {}", jlm_path, x.group, e, il);
      for (const JlmTensor* t : parts)
        if (t->group + uint32_t(e) != x.group)
          throw_error("{}: {} expert {} is not in page group {}", jlm_path, t->name, e, x.group);
      const auto at = [&](const JlmTensor* t) { return t->offset + uint64_t(e) * t->slice_stride - g.offset; };
      x.gate_at = at(parts[0]);
      x.up_at = at(parts[1]);
      x.down_at = at(parts[2]);
      x.gate = l.gate_exp.at(size_t(e));
      x.up = l.up_exp.at(size_t(e));
      x.down = l.down_exp.at(size_t(e));
      for (TensorInfo* v : {&x.gate, &x.up, &x.down}) {
        v->data = nullptr;
        v->transient = true;
      }
      slot_bytes_ = std::max(slot_bytes_, g.bytes);
      experts_.push_back(std::move(x));
    }
  }
  if (experts_.empty()) throw_error("{}: the model has no experts to page", jlm_path);
  const int64_t slots = std::min<int64_t>(int64_t(bytes / slot_bytes_), int64_t(experts_.size()));
  if (slots < c.n_expert_used)
    throw_error("expert cache: {} MiB hold {} experts of {} KiB, fewer than a token's {} of a layer",
                bytes >> 20, slots, slot_bytes_ >> 10, c.n_expert_used);
  slots_.resize(size_t(slots));
  arena_bytes_ = size_t(slots) * size_t(slot_bytes_);
  // Anonymous pages: resident only once an expert has been read into them.
  void* p = ::mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw_error("expert cache: cannot reserve {} MiB: {}", arena_bytes_ >> 20, std::strerror(errno));
  arena_ = static_cast<uint8_t*>(p);
  fd_ = ::open(jlm_path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = fd_ >= 0;
  if (fd_ < 0) fd_ = ::open(jlm_path.c_str(), O_RDONLY | O_CLOEXEC);  // tmpfs refuses O_DIRECT
  if (fd_ < 0) {
    ::munmap(arena_, arena_bytes_);
    throw_error("{}: cannot open for expert reads: {}", jlm_path, std::strerror(errno));
  }
  const int r = io_uring_queue_init(kQueueDepth, &ring_->ring, 0);
  ring_->ok = r == 0;
  if (!ring_->ok)
    log(LogLevel::Warn, "io_uring is not available ({}): experts are read one pread at a time",
        std::strerror(-r));
}

ExpertCache::~ExpertCache() {
  try {
    drain();
  } catch (...) {
  }
  if (ring_->ok) io_uring_queue_exit(&ring_->ring);
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (arena_) ::munmap(arena_, arena_bytes_);
}

int64_t ExpertCache::index(int il, int32_t id) const {
  if (il < 0 || size_t(il) >= layer_first_.size() || layer_first_[size_t(il)] < 0)
    throw_error("expert cache: layer {} has no paged experts", il);
  if (id < 0 || id >= n_expert_) throw_error("expert cache: expert {} of {}", id, n_expert_);
  return layer_first_[size_t(il)] + id;
}

void ExpertCache::queue(const Read& rd) {
  while (in_flight_ >= int(kQueueDepth)) reap_one();
  uint32_t id;
  if (free_reads_.empty()) {
    id = uint32_t(reads_.size());
    reads_.emplace_back();
  } else {
    id = free_reads_.back();
    free_reads_.pop_back();
  }
  reads_[id] = rd;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  // The submission queue holds kQueueDepth entries and at most that many reads are in flight,
  // so a free entry is there once one read has completed.
  while (!sqe && in_flight_ > 0) {
    reap_one();
    sqe = io_uring_get_sqe(&ring_->ring);
  }
  if (!sqe) fail("io_uring has no free submission entry");
  io_uring_prep_read(sqe, fd_, rd.buf, unsigned(rd.bytes), rd.offset);
  io_uring_sqe_set_data64(sqe, id);
  ++in_flight_;
  if (rd.slot >= 0) ++slots_[size_t(rd.slot)].pending;
}

void ExpertCache::read_into(int32_t slot, uint8_t* buf, uint64_t offset, uint64_t bytes) {
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kReadBytes, bytes - done);
    if (!ring_->ok) {  // synchronous
      const ssize_t got = ::pread(fd_, buf + done, n, off_t(offset + done));
      if (got <= 0) {
        if (slot >= 0) slots_[size_t(slot)].error = got < 0 ? errno : EIO;
        if (slot < 0) throw_error("{}: read failed while measuring the disk", file_.path());
        return;
      }
      std::lock_guard<std::mutex> lock(stats_mutex_);
      stats_.bytes_read += uint64_t(got);
      done += uint64_t(got);
      continue;
    }
    queue(Read{slot, buf + done, offset + done, n});
    done += n;
  }
}

void ExpertCache::reap_one() {
  io_uring_cqe* cqe = nullptr;
  int r;
  do {  // submits what is queued (a refused submit is retried here) and waits for one
    r = io_uring_submit_and_wait(&ring_->ring, 1);
    if (r >= 0 || r == -EAGAIN || r == -EBUSY) r = io_uring_peek_cqe(&ring_->ring, &cqe);
  } while (r == -EINTR || r == -EAGAIN || r == -EBUSY);
  if (r < 0 || !cqe) fail(fmt::format("io_uring wait failed: {}", std::strerror(-r)));
  const uint32_t id = uint32_t(io_uring_cqe_get_data64(cqe));
  const int res = cqe->res;
  io_uring_cqe_seen(&ring_->ring, cqe);
  --in_flight_;
  const Read rd = reads_.at(id);
  free_reads_.push_back(id);
  Slot* s = rd.slot >= 0 ? &slots_[size_t(rd.slot)] : nullptr;
  if (res == -EINVAL && direct_) {
    // The filesystem took O_DIRECT at open but refuses its reads (some FUSE and network
    // filesystems), or a read went past a cut file's end at an unaligned offset: read through
    // the page cache from now on and ask again.
    const int buffered = ::open(file_.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (buffered >= 0) {
      // The O_DIRECT descriptor stays open until the end: reads queued on it still name it.
      direct_ = false;
      direct_fd_ = fd_;
      fd_ = buffered;
      if (s) --s->pending;
      return queue(rd);
    }
  }
  if (res <= 0) {
    if (s) {
      s->error = res < 0 ? -res : EIO;  // 0: the file ends before the expert does
      --s->pending;
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.bytes_read += uint64_t(res);
  }
  if (s) --s->pending;
  if (uint64_t(res) < rd.bytes)  // a short read: ask for the rest
    queue(Read{rd.slot, rd.buf + res, rd.offset + uint64_t(res), rd.bytes - uint64_t(res)});
}

void ExpertCache::fail(const std::string& why) {
  // Reads may still be in flight into the slots: none of them can be trusted or reused.
  broken_ = why;
  throw_error("expert cache: {}", why);
}

void ExpertCache::drain() {
  while (in_flight_ > 0) reap_one();
}

void ExpertCache::fetch(int il, std::span<const int32_t> ids) {
  if (!broken_.empty())
    throw_error("expert cache: unusable after an earlier failure ({}); restart to page again", broken_);
  if (!fetched_.empty()) release();
  if (ids.size() > slots_.size())
    throw_error("expert cache: {} experts fetched at once, {} slots", ids.size(), slots_.size());
  uint64_t hits = 0, misses = 0;
  // Hits first: pinned, so no miss of the same fetch evicts them.
  for (const int32_t id : ids) {
    Expert& x = experts_[size_t(index(il, id))];
    if (x.slot < 0) continue;
    Slot& s = slots_[size_t(x.slot)];
    s.pinned = true;
    s.last_use = ++clock_;
    if (s.uses < UINT32_MAX) ++s.uses;
    fetched_.push_back(x.slot);
    unhanded_.push_back(id);  // next() hands the hits out first
    ++hits;
  }
  for (const int32_t id : ids) {
    Expert& x = experts_[size_t(index(il, id))];
    if (x.slot >= 0) continue;
    // The victim, among the slots no step is running: the least used since it came in (counts
    // halved each time the cache turns over, so a choice gone cold can leave); among equally
    // used ones the least recently used, but among those never asked for again the newest.
    // When a token's experts outnumber the slots, every layer's come round once a token: plain
    // LRU then evicts each just before it is asked for again (no hits at all), while this keeps
    // a stable set and only the newcomers churn (slots - 1 hits a round).
    int32_t victim = -1;
    const auto before = [](const Slot& a, const Slot& b) {
      if (a.uses != b.uses) return a.uses < b.uses;
      return a.uses == 0 ? a.last_use > b.last_use : a.last_use < b.last_use;
    };
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.pinned) continue;
      if (s.expert < 0) {  // an empty slot: take it
        victim = int32_t(i);
        break;
      }
      if (victim < 0 || before(s, slots_[size_t(victim)])) victim = int32_t(i);
    }
    if (victim < 0) throw_error("expert cache: every slot is in use (ids repeated in a fetch?)");
    Slot& s = slots_[size_t(victim)];
    if (s.expert >= 0) experts_[size_t(s.expert)].slot = -1;
    s = Slot{};
    s.expert = &x - experts_.data();
    s.pinned = true;
    s.last_use = ++clock_;
    x.slot = victim;
    if (++misses_since_aging_ >= slots_.size()) {  // a cache's worth of misses: age the counts
      misses_since_aging_ = 0;
      for (Slot& a : slots_) a.uses >>= 1;
    }
    fetched_.push_back(victim);
    unhanded_.push_back(id);
    const JlmGroup& g = file_.groups()[x.group];
    read_into(victim, slot_data(victim), g.offset, g.bytes);
    ++misses;
  }
  if (ring_->ok && in_flight_ > 0) {
    const int r = io_uring_submit(&ring_->ring);  // refused now: reap_one submits again
    if (r < 0 && r != -EAGAIN && r != -EBUSY && r != -EINTR)
      fail(fmt::format("io_uring submit failed: {}", std::strerror(-r)));
  }
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.hits += hits;
  stats_.misses += misses;
}

ExpertMatrices ExpertCache::wait(int il, int32_t id) {
  Expert& x = experts_[size_t(index(il, id))];
  if (x.slot < 0 || !slots_[size_t(x.slot)].pinned)
    throw_error("expert cache: expert {} of layer {} was not fetched", id, il);
  const int32_t slot = x.slot;
  Slot& s = slots_[size_t(slot)];
  while (s.pending > 0) reap_waited();
  const auto forget = [&] {  // never hand out this slot's bytes as the expert again
    x.slot = -1;
    s.expert = -1;
    s.checked = false;
    s.last_use = 0;
  };
  if (s.error) {
    const int err = s.error;
    forget();
    throw_error("{}: expert {} of layer {} ({}) could not be read: {}", file_.path(), id, il,
                x.gate.name, err == EIO ? "the file ends before it (truncated?)" : std::strerror(err));
  }
  if (!s.checked) {
    const std::vector<JlmChecksumFailure> bad = file_.verify_group(x.group, slot_data(slot));
    if (!bad.empty()) {
      forget();
      throw_error("{}: expert {} of layer {} is damaged: {} (slice {}) has checksum {:016x}, the "
                  "file says {:016x}; convert the model again (a conversion in the model cache: "
                  "delete the file and the next load converts it)",
                  file_.path(), id, il, bad[0].tensor, bad[0].slice, bad[0].actual, bad[0].expected);
    }
    s.checked = true;
  }
  uint8_t* base = slot_data(slot);
  x.gate.data = base + x.gate_at;
  x.up.data = base + x.up_at;
  x.down.data = base + x.down_at;
  return {&x.gate, &x.up, &x.down};
}

ExpertMatrices ExpertCache::next(int il, int32_t* id) {
  if (unhanded_.empty()) throw_error("expert cache: every expert of the fetch was handed out");
  for (;;) {
    for (size_t i = 0; i < unhanded_.size(); ++i) {
      const int32_t e = unhanded_[i];
      const Expert& x = experts_[size_t(index(il, e))];
      if (x.slot >= 0 && slots_[size_t(x.slot)].pending > 0) continue;
      unhanded_.erase(unhanded_.begin() + std::ptrdiff_t(i));
      *id = e;
      return wait(il, e);  // in (or failed: wait says how)
    }
    if (in_flight_ == 0) throw_error("expert cache: expert reads lost (none in flight)");
    reap_waited();  // none in yet: the next completion
  }
}

void ExpertCache::reap_waited() {
  const auto t0 = std::chrono::steady_clock::now();
  reap_one();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.wait_seconds += waited;
}

void ExpertCache::release() noexcept {
  try {
    drain();
  } catch (...) {  // fail() marked the cache unusable: no slot is trusted from now on
  }
  for (const int32_t slot : fetched_) {
    Slot& s = slots_[size_t(slot)];
    s.pinned = false;
    if (s.error && s.expert >= 0) {  // a failed read not yet waited for
      experts_[size_t(s.expert)].slot = -1;
      s = Slot{};
    }
  }
  fetched_.clear();
  unhanded_.clear();
}

bool ExpertCache::uring() const { return ring_->ok; }

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

double ExpertCache::measure_read_wall(uint64_t bytes) {
  if (!fetched_.empty()) release();
  const uint64_t groups = std::max<uint64_t>(1, std::min<uint64_t>(experts_.size(), bytes / slot_bytes_));
  constexpr uint64_t kBuffers = 16;  // group buffers reused round-robin
  const size_t buf_bytes = size_t(kBuffers * slot_bytes_);
  void* p = ::mmap(nullptr, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw_error("expert cache: no memory to measure the disk");
  auto* buf = static_cast<uint8_t*>(p);
  const ExpertCacheStats before = stats();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const uint64_t stride = std::max<uint64_t>(1, experts_.size() / groups);
    for (uint64_t i = 0; i < groups; ++i) {
      const JlmGroup& g = file_.groups()[experts_[size_t(i * stride % experts_.size())].group];
      read_into(-1, buf + (i % kBuffers) * slot_bytes_, g.offset, g.bytes);
    }
    drain();
  } catch (...) {
    ::munmap(buf, buf_bytes);
    throw;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::munmap(buf, buf_bytes);
  uint64_t read;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    read = stats_.bytes_read - before.bytes_read;
    stats_.bytes_read = before.bytes_read;  // the measurement is not the model's reading
  }
  return seconds > 0 ? double(read) / seconds : 0.0;
}

}  // namespace jitllm
