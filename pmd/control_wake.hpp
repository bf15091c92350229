#pragma once
// How the control thread naps and how the threads that hand it something end the nap.
//
// Why: the control thread naps when idle, and every wake-up of it preempts whatever runs on its
// CPU, in a pinned process the polling core. So it naps long, and the cores wake it when they
// hand it something (a completion, a frame for control) instead of it looking often. A core must
// not take a lock or make a system call for that in the common case: the napper raises `napping`
// before it blocks, and a waker writes the eventfd only when it sees the flag raised. While
// control is awake (a flood of control frames) the flag is down and waking costs a fence and a
// load.
//
// Nothing is lost (a Dekker handshake, a seq_cst fence on each side): the waker publishes its
// item, fences, then reads `napping`; the napper raises `napping`, fences, then looks at its
// inputs once more before it blocks. Either the waker sees the flag and writes the eventfd (which
// stays readable until drained, so a write before the block still ends it), or the napper's last
// look finds the item.
//
// Threads: arm/disarm/nap on the napping thread only; wake() on any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace rocedp::pmd {

class ControlWake {
 public:
  ControlWake() = default;
  ~ControlWake();
  ControlWake(const ControlWake&) = delete;
  ControlWake& operator=(const ControlWake&) = delete;

  /// Creates the eventfd. False and *error when it cannot be created (out of descriptors). The
  /// napper calls it before its first nap().
  bool open(std::string* error);

  /// Napper: raise the flag; look at every input once more after it, then nap() or disarm().
  void arm() {
    napping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  /// Napper: found work after arm(); wakers stop paying for the eventfd.
  void disarm() { napping_.store(false, std::memory_order_relaxed); }
  /// Napper, after arm(): blocks until wake() or `timeout` passed, then disarms. Returns true when
  /// a wake() ended it (or came before it).
  bool nap(std::chrono::microseconds timeout);

  /// Any thread, after it published something for the napper: ends its nap if it naps.
  void wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (napping_.load(std::memory_order_relaxed)) signal();
  }

  /// Naps that blocked, and those of them a wake() ended (tests, telemetry).
  uint64_t naps() const { return naps_.load(std::memory_order_relaxed); }
  uint64_t woken() const { return woken_.load(std::memory_order_relaxed); }

 private:
  void signal();

  std::atomic<bool> napping_{false};
  int fd_ = -1;
  std::atomic<uint64_t> naps_{0};  // written by the napper only
  std::atomic<uint64_t> woken_{0};
};

}  // namespace rocedp::pmd
