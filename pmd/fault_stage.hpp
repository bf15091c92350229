#pragma once
// The fault-injection stage of one queue in one direction: drop, duplicate, corrupt, reorder
// within a window and delay, applied to mbufs. One owner (the lcore that owns the queue): no locks.
// No allocation after construction except mbufs for duplicates (rte_pktmbuf_copy from the pool).
//
// Pipeline per frame: decide (drop / corrupt / duplicate) -> reorder window (if any) -> delay
// FIFO (release time = time the frame left the window + delay_us) -> ready for delivery.
// A window that is not full is released after kWindowHoldUs so a quiet sender is never stuck.
// Frames that do not take part in the shuffle (reorder_pct) skip the window, so they also pass
// the frames it holds.

#include <atomic>
#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "pmd/fault_plan.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace rocedp::pmd {

struct FaultStats;

// Counters written by the owner only, read by anyone (relaxed atomics: plain stores on x86).
struct FaultCounters {
  std::atomic<uint64_t> dropped{0}, duplicated{0}, corrupted{0}, reordered{0}, delayed{0};
  std::atomic<uint64_t> ce_marked{0};         // ECN-capable IPv4 frames marked CE
  std::atomic<uint64_t> duplicate_failed{0};  // no mbuf for the copy: the original still goes
  std::atomic<uint64_t> flushed{0};           // held frames freed by flush()
  void add_to(FaultStats& out) const;
};

class FaultStage {
 public:
  static constexpr uint32_t kWindowHoldUs = 100;

  // `capacity` = frames the stage can hold (window + delay FIFO); rounded up to a power of two.
  // `dup_pool` supplies the copies; `cycles_per_us` converts delay_us to the clock given to
  // push()/pop_ready() (rte_get_tsc_hz()/1e6 in ports, anything in tests).
  FaultStage(const config::FaultConfig& cfg, uint64_t stream, rte_mempool* dup_pool,
             uint32_t capacity, double cycles_per_us);
  ~FaultStage();  // flush()
  FaultStage(const FaultStage&) = delete;
  FaultStage& operator=(const FaultStage&) = delete;

  // Frames push() can take right now with no risk of overflow (each may be duplicated).
  uint32_t room() const;
  // Takes ownership of pkts[0..n). n must be <= room(). Dropped frames are freed here.
  void push(rte_mbuf** pkts, uint32_t n, uint64_t now);
  // Releases a timed-out partial window; then copies up to `max` frames whose release time has
  // come into out[] WITHOUT removing them (the TX path removes only what the device took).
  uint32_t peek_ready(rte_mbuf** out, uint32_t max, uint64_t now);
  // Removes the first k frames returned by peek_ready (ownership passes to the caller).
  void consume(uint32_t k);
  // peek_ready + consume.
  uint32_t pop_ready(rte_mbuf** out, uint32_t max, uint64_t now);
  // Frames held (window + FIFO).
  uint32_t held() const;
  // Frees every held frame (port stop): nothing leaks. Returns how many.
  uint32_t flush();

  const FaultCounters& counters() const { return counters_; }
  FaultPlan& plan() { return plan_; }

 private:
  struct Held {
    rte_mbuf* m;
    uint64_t release;
  };
  void corrupt(rte_mbuf* m, const FaultDecision& d);
  rte_mbuf* writable(rte_mbuf* m);
  void mark_ce(rte_mbuf* m);
  void enqueue(rte_mbuf* m, bool reorder, uint64_t now);
  void release_window(uint64_t now);
  static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  FaultPlan plan_;
  rte_mempool* dup_pool_;
  uint64_t delay_cycles_;
  uint64_t window_hold_cycles_;
  std::vector<Held> fifo_;  // ring of capacity (power of two), sized once
  uint32_t mask_;
  uint32_t head_ = 0, tail_ = 0;   // free-running indices
  std::vector<rte_mbuf*> window_;  // reorder_window entries, sized once
  std::vector<uint32_t> order_;
  uint32_t window_fill_ = 0;
  uint64_t window_start_ = 0;
  FaultCounters counters_;
};

}  // namespace rocedp::pmd
