#pragma once
// The engine's timers: a hashed timing wheel of QP deadlines (Varghese and Lauck). At many QPs
// every message arms a retransmission timer that its ACK then makes stale; a binary heap paid two
// sifts of log2(n) levels, over a heap larger than the cache, for each; the wheel pays a constant.
// Entries are lazy, as the heap's were: the engine keeps each QP's live deadline in the QP
// (QpSchedule::timer_at) and ignores an entry that no longer matches it when it comes due.
//
// Buckets of 2^kTickShift ns; a turn of the wheel is kBuckets of them (67 ms). An entry further
// away than a turn waits in the last bucket of the turn and is filed again when that bucket
// comes round. Deadlines fire exactly: the bucket of the current tick is looked at on every
// expire() for entries already due, the buckets of past ticks are emptied whole. Owning core only.

#include <cstdint>
#include <memory>
#include <new>

namespace rocedp::rc {

class TimerWheel {
 public:
  /// capacity: entries held at once (add() refuses beyond it; see drop_if).
  explicit TimerWheel(uint32_t capacity)
      : nodes_(new (std::nothrow) Node[capacity]), heads_(new (std::nothrow) uint32_t[kBuckets]) {
    if (!ok()) return;
    for (uint32_t i = 0; i < capacity; ++i) nodes_[i].next = i + 1 < capacity ? i + 1 : kNil;
    free_ = capacity != 0 ? 0 : kNil;
    for (uint32_t b = 0; b < kBuckets; ++b) heads_[b] = kNil;
  }
  bool ok() const { return nodes_ != nullptr && heads_ != nullptr; }
  uint32_t size() const { return size_; }

  /// Files `slot` to come due at `deadline` (ns). False when every entry is in use.
  bool add(uint64_t deadline, uint32_t slot) {
    if (free_ == kNil) return false;
    const uint32_t n = free_;
    free_ = nodes_[n].next;
    nodes_[n].deadline = deadline;
    nodes_[n].slot = slot;
    file(n);
    ++size_;
    return true;
  }

  /// Calls due(slot, deadline) once for every entry whose deadline is <= now, and removes it.
  template <typename Due>
  void expire(uint64_t now, Due&& due) {
    const uint64_t now_tick = now >> kTickShift;
    if (size_ == 0) {
      cursor_ = now_tick;
      return;
    }
    // Past ticks: their buckets empty out whole (a pause longer than a turn visits each once).
    if (now_tick > cursor_ && now_tick - cursor_ > kBuckets) cursor_ = now_tick - kBuckets;
    while (cursor_ < now_tick) {
      uint32_t n = heads_[cursor_ & kMask];
      heads_[cursor_ & kMask] = kNil;  // detached: an entry filed again lands in a fresh list
      ++cursor_;
      while (n != kNil) {
        const uint32_t next = nodes_[n].next;
        if (nodes_[n].deadline <= now) {
          release(n, due);
        } else {
          file(n);  // a far entry: its turn has not come yet
        }
        n = next;
      }
    }
    // The current tick: what is due now fires, the rest stays.
    uint32_t* link = &heads_[now_tick & kMask];
    while (*link != kNil) {
      const uint32_t n = *link;
      if (nodes_[n].deadline <= now) {
        *link = nodes_[n].next;
        release(n, due);
      } else {
        link = &nodes_[n].next;
      }
    }
  }

  /// Removes every entry for which stale(slot, deadline) is true (the engine, when add() fails).
  template <typename Stale>
  void drop_if(Stale&& stale) {
    for (uint32_t b = 0; b < kBuckets; ++b) {
      uint32_t* link = &heads_[b];
      while (*link != kNil) {
        const uint32_t n = *link;
        if (stale(nodes_[n].slot, nodes_[n].deadline)) {
          *link = nodes_[n].next;
          free_node(n);
        } else {
          link = &nodes_[n].next;
        }
      }
    }
  }

 private:
  static constexpr unsigned kTickShift = 11;  // 2.048 us
  static constexpr uint32_t kBuckets = 1u << 15;
  static constexpr uint64_t kMask = kBuckets - 1;
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    uint64_t deadline;
    uint32_t slot;
    uint32_t next;
  };

  // Into the bucket of its tick: not before the cursor (already due: the current bucket), not
  // past the turn (the turn's last bucket, filed again from there).
  void file(uint32_t n) {
    uint64_t tick = nodes_[n].deadline >> kTickShift;
    if (tick < cursor_) tick = cursor_;
    if (tick - cursor_ >= kBuckets) tick = cursor_ + kBuckets - 1;
    uint32_t& head = heads_[tick & kMask];
    nodes_[n].next = head;
    head = n;
  }
  void free_node(uint32_t n) {
    nodes_[n].next = free_;
    free_ = n;
    --size_;
  }
  template <typename Due>
  void release(uint32_t n, Due& due) {
    const uint32_t slot = nodes_[n].slot;
    const uint64_t deadline = nodes_[n].deadline;
    free_node(n);
    due(slot, deadline);
  }

  std::unique_ptr<Node[]> nodes_;
  std::unique_ptr<uint32_t[]> heads_;
  uint32_t free_ = kNil;
  uint32_t size_ = 0;
  uint64_t cursor_ = 0;  // the first tick whose bucket has not been emptied
};

}  // namespace rocedp::rc
