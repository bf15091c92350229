#pragma once
// Keeps DPDK 22.11's net_memif from unmapping a peer's shared memory while a thread is inside
// rx_burst/tx_burst of that port.
//
// Why: when the peer leaves (or is killed), memif_disconnect runs on EAL's interrupt thread and
// munmaps the regions the peer shared, with no event raised before (memif raises no link-state
// interrupt) and no synchronisation with the data path. A polling thread that passed the driver's
// "connected" check an instant earlier then touches unmapped memory and the process dies.
// The one point memif_disconnect passes before it unmaps is its control-channel spinlock
// (pmd_internals.cc_lock; the driver takes it nowhere else). A guard holds that lock while the
// link is up and the port's queues may be polled. When the link goes down, a watcher thread stops
// the port's bursts (they return 0), waits until every queue owner has passed a quiescent state
// (rte_rcu_qsbr: one report per burst), and only then lets go of the lock, so memif unmaps with
// nobody inside. When the link comes back the watcher takes the lock again and bursts resume.
// The watcher looks every 100 us while a link changes, every 100 ms while the link is up and
// its queues are being polled, and every 1 ms otherwise (each wake-up of it preempts a polling
// core that shares its CPU); the first burst that sees the peer's connected flag drop wakes it
// at once.
//
// The lock's place is private to the driver: attach() checks the driver name, the DPDK version
// (22.11) and the layout it expects before it trusts it, and returns no guard otherwise (the port
// then runs unguarded, as before, with a warning in the log).
//
// Threads: attach/start/stop/destructor on the control path; enter/leave on the owner of queue q.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

struct rte_rcu_qsbr;

namespace rocedp::pmd {

class MemifGuard {
 public:
  // nullptr when port_id is not net_memif of DPDK 22.11 with the expected layout (logged).
  static std::unique_ptr<MemifGuard> attach(uint16_t port_id, uint16_t queues,
                                            const std::string& port_name);
  ~MemifGuard();
  MemifGuard(const MemifGuard&) = delete;
  MemifGuard& operator=(const MemifGuard&) = delete;

  // After rte_eth_dev_start: the watcher follows the link from now on.
  void start();
  // Before rte_eth_dev_stop (memif_disconnect takes the lock too): bursts stop, the lock is let
  // go and not taken again until start(). The caller guarantees nobody bursts any more.
  void stop();

  // Queue owner, around every burst on queue q: enter() says whether the burst may touch the
  // device; leave() reports the quiescent state (call it after the burst, also when enter() said
  // no).
  // A burst that finds the peer's connected flag dropped while bursts are still allowed wakes
  // the watcher (once per departure; it may be asleep for 100 ms). memif's own bursts read the
  // same flag word, so the check costs a load from a line already in cache.
  bool enter(uint16_t q) {
    if (!online_[q]) go_online(q);
    const bool polling = polling_.load(std::memory_order_relaxed);
    if (polling && !connected()) [[unlikely]]
      peer_leaving();
    return polling;
  }
  void leave(uint16_t q);

  // Whether bursts may touch the device now (the link as the data path sees it).
  bool polling() const { return polling_.load(std::memory_order_acquire); }
  // For tests and telemetry: times the watcher let memif tear down after a quiescent wait.
  uint64_t teardowns() const { return teardowns_.load(std::memory_order_relaxed); }
  // For tests: the watcher's looks at this link so far (each one a wake-up of its thread).
  uint64_t looks() const { return looks_.load(std::memory_order_relaxed); }

 private:
  friend class MemifWatcher;
  MemifGuard() = default;
  void go_online(uint16_t q);
  [[gnu::cold]] void peer_leaving();
  // Watcher, lock held while connected: maps every page of the port's region 0 (rings, buffers).
  void populate_regions() const;
  // Watcher thread: one look at the link; takes or lets go of the lock as needed. Returns how
  // soon the link wants the next look (memif_guard.cpp, kWatchPeriod).
  std::chrono::microseconds step();
  // step() with the lock held and the peer connected: long while the queue owners burst.
  std::chrono::microseconds connected_period();
  // pmd_internals.flags: ETH_MEMIF_FLAG_CONNECTED (memif_guard.cpp checks the layout).
  static constexpr uint32_t kFlagConnected = 1u << 1;
  bool connected() const {
    return (__atomic_load_n(flags_, __ATOMIC_ACQUIRE) & kFlagConnected) != 0;
  }
  bool disconnected() const;  // memif_disconnect has run to its end

  std::string name_;
  uint16_t port_id_ = 0;
  uint16_t queues_ = 0;
  volatile uint32_t* flags_ = nullptr;        // pmd_internals.flags (bit 1: connected)
  volatile int* cc_lock_ = nullptr;           // pmd_internals.cc_lock (rte_spinlock_t)
  void* volatile* cc_ = nullptr;              // pmd_internals.cc
  volatile uint16_t* regions_num_ = nullptr;  // pmd_process_private.regions_num
  void* const volatile* regions_ = nullptr;   // pmd_process_private.regions
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::unique_ptr<bool[]> online_;  // per queue, written by its owner only
  std::atomic<bool> polling_{false};
  std::atomic<bool> running_{false};       // between start() and stop()
  std::atomic<bool> leaving_seen_{false};  // a queue owner woke the watcher for this departure
  std::atomic<uint64_t> teardowns_{0};
  std::atomic<uint64_t> looks_{0};
  std::atomic<uint32_t> owners_{0};  // queues whose owner went online (go_online)
  std::mutex step_mutex_;            // one of step()/stop() at a time
  bool locked_ = false;              // we hold cc_lock (under step_mutex_)
  bool draining_ = false;            // waiting for the queue owners' quiescent states
  uint64_t drain_token_ = 0;
  uint64_t bursts_token_ = 0;  // connected_period(): owners reported since this token?
};

}  // namespace rocedp::pmd
