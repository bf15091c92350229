// 802.1Q on a port (pmd/vlan.hpp): a port with a VLAN sends every frame tagged with its VLAN ID
// and priority, exactly once; it receives only frames of its VLAN, untagged, and frees and counts
// every other frame. Over ring pairs, one end with a VLAN and one without, so the untagged end
// sees the tags on the wire; every mbuf returns to the pool.

#include "pmd/vlan.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <rte_mbuf.h>

#include "pmd/port.hpp"
#include "pmd/ring_pair.hpp"
#include "tests/pmd/eal_env.hpp"

namespace rocedp::pmd {
namespace {

using test::make_frame;
using test::pool;
using test::to_bytes;
using test::to_mbuf;

const std::string kTag = std::to_string(getpid() % 100000);

config::PortConfig port_cfg(const std::string& name, uint16_t vlan, uint8_t priority = 0) {
  config::PortConfig c;
  c.name = name;
  c.address.value = 0x0a000001u;
  c.vlan = vlan;
  c.vlan_priority = priority;
  return c;
}

struct PoolLeakCheck {
  uint32_t start = pool().available();
  ~PoolLeakCheck() { EXPECT_EQ(pool().available(), start) << "mbufs leaked"; }
};

// `f` with an 802.1Q tag of `tci` after its MACs.
std::vector<uint8_t> tagged(std::vector<uint8_t> f, uint16_t tci) {
  const uint8_t tag[4] = {0x81, 0x00, static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)};
  f.insert(f.begin() + 12, tag, tag + 4);
  return f;
}

// A started ring pair LINK between ports `a` and `b`.
void open_started(const std::string& link, const config::PortConfig& a, const config::PortConfig& b,
                  RingPair* pair) {
  std::string error;
  ASSERT_TRUE(open_ring_pair(link + kTag, a, b, 1, pool(), test::test_dataplane(), pair, &error))
      << error;
  ASSERT_TRUE(pair->a->start(&error) && pair->b->start(&error)) << error;
}

void send(Port& p, const std::vector<std::vector<uint8_t>>& frames) {
  for (const auto& f : frames) {
    rte_mbuf* m = to_mbuf(f);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(p.tx_burst(0, &m, 1), 1);
  }
}

// Every frame the port delivers within a short idle wait, with its mbuf's VLAN fields.
struct Received {
  std::vector<uint8_t> bytes;
  uint16_t vlan_tci;
  bool stripped;
};
std::vector<Received> receive_all(Port& p) {
  std::vector<Received> got;
  rte_mbuf* pkts[32];
  for (int idle = 0; idle < 20;) {
    const uint16_t n = p.rx_burst(0, pkts, 32);
    if (n == 0) ++idle;
    for (uint16_t i = 0; i < n; ++i) {
      got.push_back({to_bytes(pkts[i]), pkts[i]->vlan_tci,
                     (pkts[i]->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0});
      rte_pktmbuf_free(pkts[i]);
    }
  }
  return got;
}

TEST(Vlan, TciHoldsThePriorityAndTheVlanId) {
  EXPECT_EQ(vlan_tci(7, 5), 0xA007);
  EXPECT_EQ(vlan_tci(4094, 7), 0xEFFE);
  EXPECT_EQ(vlan_tci(1, 0), 0x0001);
}

TEST(Vlan, APortWithAVlanTagsEveryFrameItSendsOnce) {
  PoolLeakCheck leaks;
  RingPair pair;
  ASSERT_NO_FATAL_FAILURE(open_started("vtx", port_cfg("a", 7, 5), port_cfg("b", 0), &pair));
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i < 10; ++i) frames.push_back(make_frame(i, 60 + 10 * i));
  send(*pair.a, frames);
  const auto got = receive_all(*pair.b);
  ASSERT_EQ(got.size(), frames.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].bytes, tagged(frames[i], 0xA007)) << i;  // the untagged end sees the tag
    EXPECT_FALSE(got[i].stripped);
  }
  EXPECT_EQ(pair.a->stats().tx_packets, frames.size());
  EXPECT_EQ(pair.a->stats().tx_vlan_dropped, 0u);
}

// The tally of a tagging port counts the frames the device took, with their tag: not a frame it
// freed (it could not take the tag), not one the full ring left with the caller; a frame left and
// offered again counts its one tag once, when it goes.
TEST(Vlan, TheTallyCountsWhatTheDeviceTookWithItsTag) {
  PoolLeakCheck leaks;
  RingPair pair;
  ASSERT_NO_FATAL_FAILURE(open_started("vtally", port_cfg("a", 7), port_cfg("b", 0), &pair));
  constexpr uint32_t kLen = 100;
  constexpr uint16_t kBurst = 32;
  rte_mbuf* pkts[kBurst];
  for (auto*& m : pkts) ASSERT_NE(m = to_mbuf(make_frame(0, kLen)), nullptr);
  rte_mbuf_refcnt_update(pkts[3], 1);  // held elsewhere: freed, not tagged
  rte_mbuf* shared = pkts[3];
  Port::TxTally tally;
  ASSERT_EQ(pair.a->tx_burst(0, pkts, kBurst, &tally), kBurst);
  EXPECT_EQ(tally.sent, kBurst - 1);
  EXPECT_EQ(tally.bytes, (kBurst - 1) * uint64_t{kLen + 4});
  rte_pktmbuf_free(shared);
  // Fill the ring until it leaves frames with the caller.
  uint64_t sent = tally.sent;
  uint16_t left = 0;
  while (left == 0) {
    for (auto*& m : pkts) ASSERT_NE(m = to_mbuf(make_frame(1, kLen)), nullptr);
    const uint16_t taken = pair.a->tx_burst(0, pkts, kBurst, &tally);
    EXPECT_EQ(tally.sent, taken);
    EXPECT_EQ(tally.bytes, taken * uint64_t{kLen + 4});
    sent += taken;
    left = static_cast<uint16_t>(kBurst - taken);
    ASSERT_LT(sent, 4096u) << "the ring never filled";
  }
  EXPECT_EQ(receive_all(*pair.b).size(), sent);
  // The frames left were tagged; offered again they go with that one tag.
  const uint16_t offset = static_cast<uint16_t>(kBurst - left);
  ASSERT_EQ(pair.a->tx_burst(0, pkts + offset, left, &tally), left);
  EXPECT_EQ(tally.sent, left);
  EXPECT_EQ(tally.bytes, left * uint64_t{kLen + 4});
  const auto again = receive_all(*pair.b);
  ASSERT_EQ(again.size(), left);
  EXPECT_EQ(again[0].bytes, tagged(make_frame(1, kLen), vlan_tci(7, 0)));
}

TEST(Vlan, APortWithAVlanReceivesItsVlanUntaggedAndDropsEveryOtherFrame) {
  PoolLeakCheck leaks;
  RingPair pair;
  ASSERT_NO_FATAL_FAILURE(open_started("vrx", port_cfg("a", 0), port_cfg("b", 7), &pair));
  // Ours (any priority), untagged, another VLAN, ours again, a tag cut short, VLAN 0xF07 (the
  // whole 12-bit ID compares).
  const std::vector<uint8_t> t4 = tagged(make_frame(4), 7);
  const std::vector<std::vector<uint8_t>> frames = {
      tagged(make_frame(0), 0x6007),
      make_frame(1),
      tagged(make_frame(2), 0x0008),
      tagged(make_frame(3), 0x0007),
      std::vector<uint8_t>(t4.begin(), t4.begin() + 16),
      tagged(make_frame(5), 0x0F07)};
  send(*pair.a, frames);
  const auto got = receive_all(*pair.b);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, make_frame(0));
  EXPECT_EQ(got[0].vlan_tci, 0x6007);
  EXPECT_TRUE(got[0].stripped);
  EXPECT_EQ(got[1].bytes, make_frame(3));
  EXPECT_EQ(got[1].vlan_tci, 0x0007);
  const PortStats s = pair.b->stats();
  EXPECT_EQ(s.rx_packets, frames.size());  // the device received them all
  EXPECT_EQ(s.rx_vlan_dropped, 4u);
}

// A priority without a VLAN (as RoCE NICs mark PFC classes without VLANs): frames leave
// priority-tagged (VLAN ID 0); untagged and priority-tagged frames arrive, untagged; any VLAN is
// dropped.
TEST(Vlan, APortWithAPriorityAndNoVlanSendsPriorityTagsAndTakesUntaggedFrames) {
  PoolLeakCheck leaks;
  RingPair pair;
  ASSERT_NO_FATAL_FAILURE(open_started("vprio", port_cfg("a", 0), port_cfg("b", 0, 3), &pair));
  send(*pair.b, {make_frame(0)});
  auto out = receive_all(*pair.a);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].bytes, tagged(make_frame(0), 0x6000));
  send(*pair.a, {make_frame(1), tagged(make_frame(2), 0xA000), tagged(make_frame(3), 0x0007)});
  const auto got = receive_all(*pair.b);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, make_frame(1));
  EXPECT_FALSE(got[0].stripped);
  EXPECT_EQ(got[1].bytes, make_frame(2));
  EXPECT_EQ(got[1].vlan_tci, 0xA000);
  EXPECT_EQ(pair.b->stats().rx_vlan_dropped, 1u);
}

// vlan_untag: a tagged frame loses its tag (TCI kept in the mbuf); an untagged one is unchanged.
TEST(Vlan, UntagRemovesAnInBandTagOnly) {
  PoolLeakCheck leaks;
  rte_mbuf* t = to_mbuf(tagged(make_frame(0), 0x2000));
  rte_mbuf* u = to_mbuf(make_frame(1));
  ASSERT_TRUE(t && u);
  EXPECT_TRUE(vlan_untag(t, 0));
  EXPECT_EQ(to_bytes(t), make_frame(0));
  EXPECT_EQ(t->vlan_tci, 0x2000);
  EXPECT_FALSE(vlan_untag(t, 0));  // once
  EXPECT_FALSE(vlan_untag(u, 0));
  EXPECT_EQ(to_bytes(u), make_frame(1));
  rte_pktmbuf_free(t);
  rte_pktmbuf_free(u);
}

TEST(Vlan, TwoEndsOnOneVlanExchangeFramesByteExact) {
  PoolLeakCheck leaks;
  RingPair pair;
  ASSERT_NO_FATAL_FAILURE(open_started("vboth", port_cfg("a", 100, 3), port_cfg("b", 100), &pair));
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i < 40; ++i) frames.push_back(make_frame(i, 64 + i));
  send(*pair.a, frames);
  auto got = receive_all(*pair.b);
  ASSERT_EQ(got.size(), frames.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].bytes, frames[i]) << i;
    EXPECT_EQ(got[i].vlan_tci, 0x6064) << i;
  }
  EXPECT_EQ(pair.b->stats().rx_vlan_dropped, 0u);
}

TEST(Vlan, SendTagsAFrameOfferedAgainOnceAndFreesAFrameItCannotTag) {
  PoolLeakCheck leaks;
  VlanCounters counters;
  rte_mbuf* pkts[3] = {to_mbuf(make_frame(0)), to_mbuf(make_frame(1)), to_mbuf(make_frame(2))};
  ASSERT_TRUE(pkts[0] && pkts[1] && pkts[2]);
  rte_mbuf_refcnt_update(pkts[1], 1);  // held elsewhere too: its bytes may not change
  rte_mbuf* shared = pkts[1];
  EXPECT_EQ(vlan_send(pkts, 3, 0x2005, counters), 1);  // one freed: send pkts[1..3)
  EXPECT_EQ(counters.tx_dropped.load(), 1u);
  EXPECT_EQ(rte_mbuf_refcnt_read(shared), 1);  // our reference went
  EXPECT_EQ(to_bytes(pkts[1]), tagged(make_frame(0), 0x2005));
  EXPECT_EQ(to_bytes(pkts[2]), tagged(make_frame(2), 0x2005));
  // The queue took none: offered again, they keep their one tag.
  EXPECT_EQ(vlan_send(pkts + 1, 2, 0x2005, counters), 0);
  EXPECT_EQ(to_bytes(pkts[1]), tagged(make_frame(0), 0x2005));
  EXPECT_EQ(to_bytes(pkts[2]), tagged(make_frame(2), 0x2005));
  rte_pktmbuf_free(pkts[1]);
  rte_pktmbuf_free(pkts[2]);
  rte_pktmbuf_free(shared);
}

TEST(Vlan, ReceiveTakesAFrameADriverUntaggedByItsTci) {
  PoolLeakCheck leaks;
  VlanCounters counters;
  rte_mbuf* pkts[2] = {to_mbuf(make_frame(0)), to_mbuf(make_frame(1))};
  ASSERT_TRUE(pkts[0] && pkts[1]);
  pkts[0]->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  pkts[0]->vlan_tci = 0x4009;
  pkts[1]->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  pkts[1]->vlan_tci = 0x000A;
  ASSERT_EQ(vlan_receive(pkts, 2, 9, counters), 1);
  EXPECT_EQ(to_bytes(pkts[0]), make_frame(0));  // already untagged: unchanged
  EXPECT_EQ(pkts[0]->vlan_tci, 0x4009);
  EXPECT_EQ(counters.rx_dropped.load(), 1u);
  rte_pktmbuf_free(pkts[0]);
}

}  // namespace
}  // namespace rocedp::pmd
