// The engine's timing wheel: every entry fires once, never before its deadline and on the first
// expire() at or after it, whether near (the current tick), far (more than a turn away) or
// overdue; a long pause fires everything due; a full wheel refuses until drop_if frees room.
#include "dataplane/rc/timer_wheel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace rocedp::rc {
namespace {

using Fired = std::vector<std::pair<uint32_t, uint64_t>>;

Fired expire(TimerWheel& w, uint64_t now) {
  Fired out;
  w.expire(now, [&](uint32_t slot, uint64_t deadline) { out.emplace_back(slot, deadline); });
  return out;
}

constexpr uint64_t kStart = 1'000'000'000'000;  // an engine's clock is never near 0

TEST(TimerWheel, FiresAtTheDeadlineNotBefore) {
  TimerWheel w(8);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(expire(w, kStart).empty());
  ASSERT_TRUE(w.add(kStart + 100, 1));   // the current tick
  ASSERT_TRUE(w.add(kStart + 5000, 2));  // two ticks on
  EXPECT_TRUE(expire(w, kStart + 99).empty());
  EXPECT_EQ(expire(w, kStart + 100), (Fired{{1, kStart + 100}}));
  EXPECT_TRUE(expire(w, kStart + 4999).empty());
  EXPECT_EQ(expire(w, kStart + 5000), (Fired{{2, kStart + 5000}}));
  EXPECT_EQ(w.size(), 0u);
  EXPECT_TRUE(expire(w, kStart + 10'000'000).empty());
}

TEST(TimerWheel, FarAndOverdueEntries) {
  TimerWheel w(8);
  expire(w, kStart);
  const uint64_t far = kStart + 500'000'000;  // half a second: several turns away
  ASSERT_TRUE(w.add(far, 3));
  ASSERT_TRUE(w.add(kStart - 7, 4));  // already due
  EXPECT_EQ(expire(w, kStart + 1), (Fired{{4, kStart - 7}}));
  for (uint64_t t = kStart; t < far; t += 3'000'000) EXPECT_TRUE(expire(w, t).empty()) << t;
  EXPECT_EQ(expire(w, far), (Fired{{3, far}}));
}

TEST(TimerWheel, APauseLongerThanATurnFiresEverythingDueOnce) {
  TimerWheel w(64);
  expire(w, kStart);
  for (uint32_t i = 0; i < 40; ++i) ASSERT_TRUE(w.add(kStart + uint64_t{i} * 7'000'000, i));
  const Fired f = expire(w, kStart + 200'000'000);  // 200 ms later, nothing polled meanwhile
  EXPECT_EQ(f.size(), 29u);                         // deadlines 0, 7, ..., 196 ms
  EXPECT_EQ(w.size(), 11u);
  EXPECT_EQ(expire(w, kStart + 300'000'000).size(), 11u);
}

TEST(TimerWheel, FullUntilDropIfFreesRoom) {
  TimerWheel w(3);
  expire(w, kStart);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(w.add(kStart + 1000 * (i + 1), i));
  EXPECT_FALSE(w.add(kStart + 9000, 9));
  w.drop_if([](uint32_t slot, uint64_t) { return slot == 1; });
  EXPECT_EQ(w.size(), 2u);
  ASSERT_TRUE(w.add(kStart + 9000, 9));
  Fired f = expire(w, kStart + 10'000);
  std::sort(f.begin(), f.end());
  EXPECT_EQ(f, (Fired{{0, kStart + 1000}, {2, kStart + 3000}, {9, kStart + 9000}}));
}

// Against a reference: random deadlines from overdue to seconds away, random steps of the
// clock from nothing to more than a turn; each entry fires exactly once, at the first expire at
// or after its deadline.
TEST(TimerWheel, MatchesAReferenceUnderRandomUse) {
  std::mt19937_64 rng(7);
  TimerWheel w(4096);
  std::multimap<uint64_t, uint32_t> pending;
  uint64_t now = kStart;
  expire(w, now);
  uint32_t next = 0;
  for (int step = 0; step < 20'000; ++step) {
    const int adds = static_cast<int>(rng() % 4);
    for (int k = 0; k < adds && w.size() < 4096; ++k) {
      const uint64_t r = rng() % 100;
      const uint64_t dl = r < 5    ? now - rng() % 10'000             // overdue
                          : r < 90 ? now + rng() % 2'000'000          // within a turn
                                   : now + rng() % 3'000'000'000ull;  // seconds away
      ASSERT_TRUE(w.add(dl, next));
      pending.emplace(dl, next++);
    }
    const uint64_t r = rng() % 1000;
    now += r < 2 ? 100'000'000 + rng() % 100'000'000 : rng() % 20'000;
    Fired got = expire(w, now);
    Fired want;
    for (auto it = pending.begin(); it != pending.end() && it->first <= now;) {
      want.emplace_back(it->second, it->first);
      it = pending.erase(it);
    }
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(got, want) << "step " << step;
  }
  EXPECT_EQ(w.size(), pending.size());
}

}  // namespace
}  // namespace rocedp::rc
