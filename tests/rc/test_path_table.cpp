// The engine's round trip estimates by peer: one slot per peer IP, the same slot for every QP to
// that peer, 255 peers of their own at once and every later one in the shared slot 0; a slot is
// free again once the last QP gives it back, and the table's lookups stay right through any
// order of takes and releases (checked against a plain map).
#include "dataplane/rc/path_table.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

namespace rocedp::rc {
namespace {

TEST(PathTable, APeerKeepsItsSlot) {
  auto t = std::make_unique<PathTable>();
  EXPECT_EQ(t->find(0xC6120002), 0u) << "not added yet";
  const uint16_t b = t->acquire(0xC6120002);
  const uint16_t c = t->acquire(0xC6120003);
  EXPECT_NE(b, 0u);
  EXPECT_NE(c, 0u);
  EXPECT_NE(b, c);
  EXPECT_EQ(t->acquire(0xC6120002), b) << "a second QP to b";
  EXPECT_EQ(t->find(0xC6120003), c);
  EXPECT_EQ(t->peers(), 2u);
  t->at(b).rto_ns = 5'000'000;
  EXPECT_EQ(t->at(c).rto_ns, 0u) << "estimates are per peer";
}

TEST(PathTable, TheLastQpToAPeerFreesItsSlot) {
  auto t = std::make_unique<PathTable>();
  const uint16_t b = t->acquire(0xC6120002);
  ASSERT_EQ(t->acquire(0xC6120002), b);
  t->at(b).srtt_ns = 5'000'000;
  t->release(b);
  EXPECT_EQ(t->find(0xC6120002), b) << "one QP still holds it";
  EXPECT_EQ(t->at(b).srtt_ns, 5'000'000u);
  t->release(b);
  EXPECT_EQ(t->find(0xC6120002), 0u) << "free";
  EXPECT_EQ(t->peers(), 0u);
  const uint16_t d = t->acquire(0xC6120004);
  EXPECT_EQ(d, b) << "the freed slot again";
  EXPECT_EQ(t->at(d).srtt_ns, 0u) << "with a fresh estimate";
  t->release(0);                       // the shared slot is not counted
  t->release(PathTable::kUnassigned);  // a QP that never took one
  EXPECT_EQ(t->peers(), 1u);
}

TEST(PathTable, PeersBeyondTheTableShareSlotZeroUntilOneLeaves) {
  auto t = std::make_unique<PathTable>();
  std::set<uint16_t> slots;
  // Addresses that differ only in the low bits and only in the high bits: both spread.
  for (uint32_t i = 0; i < PathTable::kMaxPeers; ++i) {
    const uint32_t ip = (i & 1) ? 0x0A000000u + i : (i << 24) | 0x00000101u;
    const uint16_t s = t->acquire(ip);
    EXPECT_NE(s, 0u) << i;
    slots.insert(s);
  }
  EXPECT_EQ(slots.size(), PathTable::kMaxPeers) << "a slot each";
  EXPECT_EQ(t->peers(), PathTable::kMaxPeers);
  EXPECT_EQ(t->acquire(0xC0A80001), 0u) << "full: the shared slot";
  EXPECT_EQ(t->acquire(0xC0A80002), 0u);
  EXPECT_EQ(t->find(0xC0A80001), 0u);
  EXPECT_EQ(t->peers(), PathTable::kMaxPeers);
  const uint16_t known = t->acquire(0x0A000001);
  EXPECT_NE(known, 0u) << "a known peer still finds its own";
  t->release(known);
  t->release(known);  // both QPs to 10.0.0.1 are gone
  EXPECT_NE(t->acquire(0xC0A80003), 0u) << "room again";
}

// Random takes and releases over 300 addresses (more than the table holds) against a map: every
// lookup finds exactly the peers that hold a slot of their own, however deletions reshuffled the
// buckets.
TEST(PathTable, LookupsStayRightThroughTakesAndReleases) {
  auto t = std::make_unique<PathTable>();
  std::mt19937 rng(7);
  std::vector<uint32_t> ips;
  for (uint32_t i = 0; i < 300; ++i) ips.push_back(rng());
  std::map<uint32_t, std::vector<uint16_t>> held;  // ip -> slots its QPs hold
  for (int step = 0; step < 200'000; ++step) {
    const uint32_t ip = ips[rng() % ips.size()];
    auto& h = held[ip];
    if (rng() % 2 == 0 || h.empty()) {
      h.push_back(t->acquire(ip));
    } else {
      t->release(h.back());
      h.pop_back();
    }
    if (step % 997 != 0) continue;
    uint32_t own = 0;
    for (const auto& [addr, slots] : held) {
      // A QP that came while the table was full holds slot 0; every other QP to the same peer
      // holds the peer's one slot.
      uint16_t slot = 0;
      for (uint16_t s : slots) {
        if (s == 0) continue;
        ASSERT_TRUE(slot == 0 || s == slot) << "one slot per peer";
        slot = s;
      }
      own += slot != 0;
      ASSERT_EQ(t->find(addr), slot) << step;
    }
    ASSERT_EQ(t->peers(), own) << step;
  }
}

}  // namespace
}  // namespace rocedp::rc
