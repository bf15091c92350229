// The engine's round trip estimates by peer: one slot per peer IP, the same slot every time it is
// looked up, 255 peers of their own and every later one in the shared slot 0; find() never adds.
#include "dataplane/rc/path_table.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>

namespace rocedp::rc {
namespace {

TEST(PathTable, APeerKeepsItsSlot) {
  auto t = std::make_unique<PathTable>();
  EXPECT_EQ(t->find(0xC6120002), 0u) << "not added yet";
  const uint16_t b = t->slot_for(0xC6120002);
  const uint16_t c = t->slot_for(0xC6120003);
  EXPECT_NE(b, 0u);
  EXPECT_NE(c, 0u);
  EXPECT_NE(b, c);
  EXPECT_EQ(t->slot_for(0xC6120002), b);
  EXPECT_EQ(t->find(0xC6120003), c);
  EXPECT_EQ(t->peers(), 2u);
  t->at(b).rto_ns = 5'000'000;
  EXPECT_EQ(t->at(c).rto_ns, 0u) << "estimates are per peer";
}

TEST(PathTable, PeersBeyondTheTableShareSlotZero) {
  auto t = std::make_unique<PathTable>();
  std::set<uint16_t> slots;
  // Addresses that differ only in the low bits and only in the high bits: both spread.
  for (uint32_t i = 0; i < PathTable::kMaxPeers; ++i) {
    const uint32_t ip = (i & 1) ? 0x0A000000u + i : (i << 24) | 0x00000101u;
    const uint16_t s = t->slot_for(ip);
    EXPECT_NE(s, 0u) << i;
    slots.insert(s);
  }
  EXPECT_EQ(slots.size(), PathTable::kMaxPeers) << "a slot each";
  EXPECT_EQ(t->peers(), PathTable::kMaxPeers);
  EXPECT_EQ(t->slot_for(0xC0A80001), 0u) << "full: the shared slot";
  EXPECT_EQ(t->slot_for(0xC0A80002), 0u);
  EXPECT_EQ(t->find(0xC0A80001), 0u);
  EXPECT_EQ(t->peers(), PathTable::kMaxPeers);
  EXPECT_NE(t->slot_for(0x0A000001), 0u) << "a known peer still finds its own";
}

}  // namespace
}  // namespace rocedp::rc
