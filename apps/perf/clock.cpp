#include "apps/perf/clock.hpp"

#include <thread>

namespace rocedp::perf::clock {

uint64_t g_hz = 0;

namespace {
uint64_t g_start_ticks = 0;
std::chrono::steady_clock::time_point g_start_time;

// A tick count and the steady_clock time read together (the tick count is the mean of two reads
// around the clock read).
void sample(uint64_t* ticks, std::chrono::steady_clock::time_point* t) {
  const uint64_t a = now();
  *t = std::chrono::steady_clock::now();
  *ticks = a + (now() - a) / 2;
}
}  // namespace

void start() {
  sample(&g_start_ticks, &g_start_time);
}

uint64_t calibrate() {
#if defined(__x86_64__)
  if (g_start_ticks == 0) start();
  constexpr auto kWindow = std::chrono::milliseconds(20);
  const auto waited = std::chrono::steady_clock::now() - g_start_time;
  if (waited < kWindow) std::this_thread::sleep_for(kWindow - waited);
  uint64_t ticks = 0;
  std::chrono::steady_clock::time_point t;
  sample(&ticks, &t);
  const double seconds = std::chrono::duration<double>(t - g_start_time).count();
  g_hz = static_cast<uint64_t>(static_cast<double>(ticks - g_start_ticks) / seconds);
#else
  g_hz = 1000000000ull;
#endif
  return g_hz;
}

Deadline& deadline() {
  static Deadline d;
  return d;
}

}  // namespace rocedp::perf::clock
