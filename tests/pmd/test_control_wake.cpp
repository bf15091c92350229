// The control thread's nap and wake (pmd/control_wake.hpp): a wake before or during the nap ends
// it, a wake while nobody naps leaves nothing behind, and the handshake loses no hand-off.

#include "pmd/control_wake.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace rocedp::pmd {
namespace {

using std::chrono::milliseconds;

// Bounds on time are generous (a loaded 2-CPU machine); the naps they guard are far longer.
constexpr auto kLong = std::chrono::seconds(10);

TEST(ControlWake, ANapWithoutAWakeTimesOut) {
  ControlWake w;
  std::string error;
  ASSERT_TRUE(w.open(&error)) << error;
  w.arm();
  EXPECT_FALSE(w.nap(milliseconds(20)));
  EXPECT_EQ(w.naps(), 1u);
  EXPECT_EQ(w.woken(), 0u);
}

TEST(ControlWake, AWakeAfterArmingEndsTheNapAtOnce) {
  ControlWake w;
  std::string error;
  ASSERT_TRUE(w.open(&error)) << error;
  w.arm();
  w.wake();  // between the last look and the block: the eventfd stays readable
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(w.nap(kLong));
  EXPECT_LT(std::chrono::steady_clock::now() - start, kLong / 2);
  EXPECT_EQ(w.woken(), 1u);
  w.arm();
  EXPECT_FALSE(w.nap(milliseconds(10))) << "the wake was drained";
}

TEST(ControlWake, AWakeWhileAwakeLeavesNothingBehind) {
  ControlWake w;
  std::string error;
  ASSERT_TRUE(w.open(&error)) << error;
  w.wake();  // not armed: no eventfd write
  w.arm();
  w.disarm();
  w.wake();
  w.arm();
  EXPECT_FALSE(w.nap(milliseconds(20)));
}

TEST(ControlWake, AWakeFromAnotherThreadEndsALongNap) {
  ControlWake w;
  std::string error;
  ASSERT_TRUE(w.open(&error)) << error;
  w.arm();
  std::thread waker([&w] {
    std::this_thread::sleep_for(milliseconds(50));
    w.wake();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(w.nap(kLong));
  EXPECT_LT(std::chrono::steady_clock::now() - start, kLong / 2);
  waker.join();
}

// A producer publishes items and wakes; the napper looks once more after arming. A lost wake
// would leave the napper in a 10 s nap while items wait: every nap must end by a wake.
TEST(ControlWake, TheHandshakeLosesNoHandOff) {
  ControlWake w;
  std::string error;
  ASSERT_TRUE(w.open(&error)) << error;
  constexpr uint64_t kItems = 20'000;
  std::atomic<uint64_t> published{0};
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kItems; ++i) {
      published.store(i, std::memory_order_release);
      w.wake();
      if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  uint64_t seen = 0, timeouts = 0;
  bool armed = false;
  while (seen < kItems) {
    const uint64_t now = published.load(std::memory_order_acquire);
    if (now != seen) {
      seen = now;
      if (armed) w.disarm();
      armed = false;
    } else if (!armed) {
      w.arm();
      armed = true;
    } else {
      if (!w.nap(kLong)) ++timeouts;
      armed = false;
    }
  }
  producer.join();
  EXPECT_EQ(timeouts, 0u);
  EXPECT_GT(w.naps(), 0u) << "the napper did nap between items";
}

}  // namespace
}  // namespace rocedp::pmd
