#include "apps/perf/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

namespace rocedp::perf::watchdog {

namespace {

// Plain atomics with trivial destructors: the detached thread may read them during exit.
std::atomic<const char*> g_phase{"starting"};
std::atomic<int64_t> g_limit_ms{INT64_MAX};  // steady_clock, milliseconds
std::atomic<uint32_t> g_timeout_s{0};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void expire() {
  const uint32_t t = g_timeout_s.load();
  char msg[256];
  const int n = std::snprintf(msg, sizeof msg,
                              "rocedp-perf: still running %u s after --timeout %u s, while %s: "
                              "stopping (status 3)\n",
                              grace_s(t), t, g_phase.load());
  // stdout may hold a result not yet written: flushed unless its lock is held (the hang may be
  // there); the message goes out through write(2), past stdio's locks.
  if (ftrylockfile(stdout) == 0) {
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
  if (n > 0)
    (void)!write(STDERR_FILENO, msg, std::min<size_t>(static_cast<size_t>(n), sizeof msg - 1));
  _exit(3);
}

// Sleeps towards the limit (a second at most: arm may move it) and wakes at most once a second,
// so it barely touches the CPU it shares with a polling core.
void watch() {
  for (;;) {
    const int64_t left = g_limit_ms.load() - now_ms();
    if (left <= 0) expire();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(left, 1000)));
  }
}

}  // namespace

uint32_t grace_s(uint32_t timeout_s) {
  return std::max<uint32_t>(5, timeout_s / 2);
}

void arm(uint32_t timeout_s) {
  g_timeout_s.store(timeout_s);
  g_limit_ms.store(now_ms() + (int64_t{timeout_s} + grace_s(timeout_s)) * 1000);
  static std::once_flag started;
  std::call_once(started, [] { std::thread(watch).detach(); });
}

bool armed() {
  return g_limit_ms.load() != INT64_MAX;
}

void phase(const char* what) {
  g_phase.store(what);
}

}  // namespace rocedp::perf::watchdog
