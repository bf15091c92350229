// The per-core neighbour cache: insert, update, lookup, erase, fixed capacity.

#include "dataplane/neighbour_cache.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace rocedp::dataplane {
namespace {

using config::Ipv4Address;
using config::MacAddress;

MacAddress mac_for(uint32_t n) {
  return MacAddress{{0x02, 0x00, uint8_t(n >> 24), uint8_t(n >> 16), uint8_t(n >> 8), uint8_t(n)}};
}

TEST(NeighbourCacheTest, InsertUpdateLookupErase) {
  NeighbourCache c(4);
  MacAddress out;
  EXPECT_FALSE(c.lookup_st(Ipv4Address{0xC6120002}, &out));
  EXPECT_TRUE(c.upsert_st(Ipv4Address{0xC6120002}, mac_for(1)));
  ASSERT_TRUE(c.lookup_st(Ipv4Address{0xC6120002}, &out));
  EXPECT_EQ(out, mac_for(1));
  EXPECT_EQ(c.size(), 1u);

  EXPECT_TRUE(c.apply_st(NeighbourUpdate{Ipv4Address{0xC6120002}, mac_for(2), false}));
  ASSERT_TRUE(c.lookup_st(Ipv4Address{0xC6120002}, &out));
  EXPECT_EQ(out, mac_for(2));
  EXPECT_EQ(c.size(), 1u) << "an update is not a second entry";

  EXPECT_TRUE(c.apply_st(NeighbourUpdate{Ipv4Address{0xC6120002}, {}, true}));
  EXPECT_FALSE(c.lookup_st(Ipv4Address{0xC6120002}, &out));
  EXPECT_EQ(c.size(), 0u);
  EXPECT_FALSE(c.erase_st(Ipv4Address{0xC6120002}));
}

TEST(NeighbourCacheTest, ZeroAddressIsNeverStored) {
  NeighbourCache c(4);
  MacAddress out;
  EXPECT_FALSE(c.upsert_st(Ipv4Address{0}, mac_for(1)));
  EXPECT_FALSE(c.lookup_st(Ipv4Address{0}, &out));
  EXPECT_EQ(c.size(), 0u);
}

TEST(NeighbourCacheTest, CapacityIsFixedAndUpdatesStillWorkWhenFull) {
  NeighbourCache c(3);
  EXPECT_EQ(c.max_entries(), 3u);
  for (uint32_t i = 1; i <= 3; ++i)
    EXPECT_TRUE(c.upsert_st(Ipv4Address{0x0A000000 + i}, mac_for(i)));
  EXPECT_FALSE(c.upsert_st(Ipv4Address{0x0A000004}, mac_for(4)));
  EXPECT_EQ(c.full_rejects(), 1u);
  EXPECT_EQ(c.size(), 3u);
  EXPECT_TRUE(c.upsert_st(Ipv4Address{0x0A000002}, mac_for(22))) << "replacing needs no room";
  MacAddress out;
  ASSERT_TRUE(c.lookup_st(Ipv4Address{0x0A000002}, &out));
  EXPECT_EQ(out, mac_for(22));
  EXPECT_FALSE(c.lookup_st(Ipv4Address{0x0A000004}, &out));
  EXPECT_TRUE(c.erase_st(Ipv4Address{0x0A000001}));
  EXPECT_TRUE(c.upsert_st(Ipv4Address{0x0A000004}, mac_for(4)));
  c.clear_st();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_FALSE(c.lookup_st(Ipv4Address{0x0A000004}, &out));
}

// Random inserts and erases against std::map: backward-shift deletion must never lose an entry
// that sits later in a probe run.
TEST(NeighbourCacheTest, MatchesAReferenceMapUnderChurn) {
  NeighbourCache c(64);
  std::map<uint32_t, MacAddress> ref;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const uint32_t ip = 0xC6120000 + (rng() % 100) + 1;  // dense: long probe runs
    if (rng() % 3 == 0) {
      EXPECT_EQ(c.erase_st(Ipv4Address{ip}), ref.erase(ip) == 1);
    } else {
      const MacAddress m = mac_for(step);
      const bool fits = ref.count(ip) == 1 || ref.size() < 64;
      EXPECT_EQ(c.upsert_st(Ipv4Address{ip}, m), fits);
      if (fits) ref[ip] = m;
    }
    ASSERT_EQ(c.size(), ref.size());
  }
  for (uint32_t ip = 0xC6120000; ip < 0xC6120000 + 102; ++ip) {
    MacAddress out;
    const auto it = ref.find(ip);
    ASSERT_EQ(c.lookup_st(Ipv4Address{ip}, &out), it != ref.end()) << ip;
    if (it != ref.end()) {
      EXPECT_EQ(out, it->second);
    }
  }
}

}  // namespace
}  // namespace rocedp::dataplane
