// The round trip of one cache line between two CPUs, for the benchmark scripts: on a VM the
// hypervisor may place the two vCPUs near each other (a shared cache) or far apart, and the
// two-process rates over net_memif follow that placement, not the code (README, "rocedp vs the
// wire"). Two threads, pinned, hand a counter back and forth; prints {"rtt_ns": median of five
// runs} on one line.
//   cpu_pair_rtt [CPU_A CPU_B [ROUND_TRIPS]]   (default 0 1 100000)
// Exit status 2 for bad arguments, 1 if a thread cannot be pinned.

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

bool pin(unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

bool parse(const char* s, unsigned long max, unsigned long* out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v > max) return false;
  *out = v;
  return true;
}

// One run: `n` round trips; the line is written by one CPU and read by the other each way.
double run_once(unsigned a, unsigned b, unsigned long n, bool* pinned) {
  alignas(64) std::atomic<unsigned long> line{0};
  std::atomic<bool> ok{true};
  std::thread other([&] {
    if (!pin(b)) ok = false;
    for (unsigned long i = 0; i < n; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
        if (!ok.load(std::memory_order_relaxed)) return;
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  if (!pin(a)) ok = false;
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned long i = 0; i < n && ok.load(std::memory_order_relaxed); ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2) {
      if (!ok.load(std::memory_order_relaxed)) break;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  other.join();
  *pinned = ok.load();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long a = 0, b = 1, n = 100000;
  const unsigned long ncpu = std::thread::hardware_concurrency();
  if (argc != 1 && argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: cpu_pair_rtt [CPU_A CPU_B [ROUND_TRIPS]]\n");
    return 2;
  }
  if (argc >= 3 && (!parse(argv[1], ncpu - 1, &a) || !parse(argv[2], ncpu - 1, &b) || a == b)) {
    std::fprintf(stderr, "cpu_pair_rtt: two different CPUs below %lu\n", ncpu);
    return 2;
  }
  if (argc == 4 && (!parse(argv[3], 100'000'000, &n) || n == 0)) {
    std::fprintf(stderr, "cpu_pair_rtt: ROUND_TRIPS: 1 to 100000000\n");
    return 2;
  }
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    bool pinned = false;
    runs.push_back(run_once(static_cast<unsigned>(a), static_cast<unsigned>(b), n, &pinned));
    if (!pinned) {
      std::fprintf(stderr, "cpu_pair_rtt: cannot pin to CPUs %lu and %lu\n", a, b);
      return 1;
    }
  }
  std::sort(runs.begin(), runs.end());
  std::printf("{\"rtt_ns\": %.1f, \"cpus\": [%lu, %lu], \"round_trips\": %lu}\n", runs[2], a, b, n);
  return 0;
}
