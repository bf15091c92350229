// The decision half of fault injection, without DPDK: replayable from the seed, rates close to
// the configured percentages, corruption inside the frame and past the Ethernet header, and
// permutations that really permute.

#include "pmd/fault_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace rocedp::pmd {
namespace {

config::FaultConfig chaos(uint64_t seed) {
  config::FaultConfig c;
  c.drop_pct = 5;
  c.duplicate_pct = 1;
  c.corrupt_pct = 1;
  c.reorder_window = 8;
  c.seed = seed;
  return c;
}

bool same(const FaultDecision& a, const FaultDecision& b) {
  return a.drop == b.drop && a.duplicate == b.duplicate && a.corrupt == b.corrupt &&
         a.corrupt_offset == b.corrupt_offset && a.corrupt_mask == b.corrupt_mask;
}

TEST(FaultPlan, SameSeedAndStreamGiveTheSameDecisions) {
  FaultPlan a(chaos(42), 3), b(chaos(42), 3);
  for (int i = 0; i < 100000; ++i) {
    ASSERT_TRUE(same(a.decide(100 + i % 1400), b.decide(100 + i % 1400))) << "frame " << i;
  }
  std::vector<uint32_t> pa(16), pb(16);
  a.permute(pa);
  b.permute(pb);
  EXPECT_EQ(pa, pb);
}

TEST(FaultPlan, OtherSeedOrStreamGivesOtherDecisions) {
  auto drops = [](FaultPlan p) {
    std::vector<bool> v;
    v.reserve(2000);
    for (int i = 0; i < 2000; ++i) v.push_back(p.decide(100).drop);
    return v;
  };
  EXPECT_NE(drops(FaultPlan(chaos(1), 0)), drops(FaultPlan(chaos(2), 0)));
  EXPECT_NE(drops(FaultPlan(chaos(1), 0)), drops(FaultPlan(chaos(1), 1)));
}

TEST(FaultPlan, RatesMatchTheConfiguredPercentages) {
  // 100,000 frames, as the RC chaos tests use. 5 standard deviations of slack: a correct
  // implementation essentially never fails, one that is off by a point always does.
  constexpr int kFrames = 100000;
  FaultPlan p(chaos(7), 0);
  int drop = 0, dup = 0, corrupt = 0;
  for (int i = 0; i < kFrames; ++i) {
    FaultDecision d = p.decide(256);
    drop += d.drop;
    dup += d.duplicate;
    corrupt += d.corrupt;
    if (d.drop) {
      EXPECT_FALSE(d.duplicate || d.corrupt)
          << "a dropped frame is neither duplicated nor corrupted";
    }
  }
  EXPECT_NEAR(drop, 5000, 5 * 69);  // sd = sqrt(n p (1-p)) = 69
  EXPECT_NEAR(dup, 950, 5 * 31);    // 1% of the 95% that survive
  EXPECT_NEAR(corrupt, 950, 5 * 31);
}

TEST(FaultPlan, ZeroAndHundredPercentAreExact) {
  config::FaultConfig c;
  c.drop_pct = 100;
  FaultPlan all(c, 0);
  c.drop_pct = 0;
  c.duplicate_pct = 100;
  FaultPlan none(c, 0);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_TRUE(all.decide(64).drop);
    FaultDecision d = none.decide(64);
    EXPECT_FALSE(d.drop);
    EXPECT_TRUE(d.duplicate);
    EXPECT_FALSE(d.corrupt);
  }
}

TEST(FaultPlan, CorruptionStaysInsideTheFrameAndPastTheEthernetHeader) {
  config::FaultConfig c;
  c.corrupt_pct = 100;
  FaultPlan p(c, 0);
  std::set<uint32_t> offsets;
  for (int i = 0; i < 20000; ++i) {
    FaultDecision d = p.decide(64);
    ASSERT_TRUE(d.corrupt);
    EXPECT_GE(d.corrupt_offset, FaultPlan::kEthernetHeaderLen);
    EXPECT_LT(d.corrupt_offset, 64u);
    EXPECT_NE(d.corrupt_mask, 0) << "the byte must change";
    offsets.insert(d.corrupt_offset);
  }
  EXPECT_EQ(offsets.size(), 64u - 14) << "every byte past the header can be hit";
  // A frame with nothing past the Ethernet header is left alone.
  EXPECT_FALSE(p.decide(14).corrupt);
  EXPECT_FALSE(p.decide(0).corrupt);
}

TEST(FaultPlan, PermuteReturnsAPermutationAndCountsMovedPositions) {
  FaultPlan p(chaos(9), 0);
  std::vector<uint32_t> order(8);
  int identity = 0;
  std::vector<int> first_position_hits(8, 0);
  for (int round = 0; round < 8000; ++round) {
    uint32_t moved = p.permute(order);
    std::vector<uint32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint32_t> iota(8);
    std::iota(iota.begin(), iota.end(), 0u);
    ASSERT_EQ(sorted, iota) << "not a permutation";
    uint32_t count = 0;
    for (uint32_t i = 0; i < 8; ++i) count += order[i] != i;
    EXPECT_EQ(moved, count);
    identity += moved == 0;
    ++first_position_hits[order[0]];
  }
  EXPECT_LT(identity, 20) << "the identity should be rare (1 in 8! = 40320)";
  for (int hits : first_position_hits) EXPECT_NEAR(hits, 1000, 200) << "not uniform";
  std::vector<uint32_t> one(1);
  EXPECT_EQ(p.permute(one), 0u);
  EXPECT_EQ(one[0], 0u);
}

TEST(SplitMix64, BelowStaysInRange) {
  SplitMix64 r(0);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_LT(r.below(3), 3u);
    EXPECT_EQ(r.below(1), 0u);
  }
}

}  // namespace
}  // namespace rocedp::pmd
