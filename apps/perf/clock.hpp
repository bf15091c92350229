#pragma once
// Time for rocedp-perf's loops, and the run's time limit. The loops read the clock around every
// message, so it must cost what DPDK's rte_rdtsc costs: the TSC on x86-64, calibrated once
// against steady_clock; other machines use steady_clock's nanoseconds.

#include <chrono>
#include <cstdint>

#include "apps/perf/watchdog.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace rocedp::perf::clock {

/// Ticks of a monotonic counter.
inline uint64_t now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

/// Marks the start of the calibration window (call first thing in main).
void start();
extern uint64_t g_hz;  ///< ticks per second; 0 until calibrate() ran
/// Ticks per second. The first call ends the calibration (at least 20 ms after start(), waiting
/// for the rest if need be); later calls return the cached value.
uint64_t calibrate();
inline uint64_t hz() {
  return g_hz != 0 ? g_hz : calibrate();
}
inline double to_ns(uint64_t ticks) {
  return static_cast<double>(ticks) * 1e9 / static_cast<double>(hz());
}

/// True once per period: a server's loop looks at the out-of-band exchange (a recv(2) system
/// call) on a ticker rather than every N polls, so the call lands on few of its round trips (at
/// 1 ms, on about one in a thousand of the 1 us bounces; every 256 idle polls it hit one in
/// tens, which showed as the p99).
class Ticker {
 public:
  explicit Ticker(uint64_t period) : period_(period), next_(now() + period) {}
  bool due() {
    const uint64_t t = now();
    if (t < next_) return false;
    next_ = t + period_;
    return true;
  }

 private:
  uint64_t period_, next_;
};

/// The run's time limit (--timeout): every wait checks it, and the exit status tells a run it
/// stopped (3) from a failure (1).
class Deadline {
 public:
  /// Also arms the watchdog, which ends a process still alive well past the limit.
  void arm(uint32_t seconds) {
    at_ = now() + static_cast<uint64_t>(seconds) * hz();
    watchdog::arm(seconds);
    watchdog::phase("running the test");
  }
  /// True once the limit passed (and from then on).
  bool passed() {
    if (!timed_out_ && now() > at_) timed_out_ = true;
    return timed_out_;
  }
  bool timed_out() const { return timed_out_; }

 private:
  uint64_t at_ = UINT64_MAX;
  bool timed_out_ = false;
};

/// The process's one run deadline.
Deadline& deadline();

}  // namespace rocedp::perf::clock
