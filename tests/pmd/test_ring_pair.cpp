// Two in-process ports wired back to back: frames cross byte-exact in both directions, every
// queue is its own lane, the YAML devargs form parses, and closing both sides frees every frame.

#include "pmd/ring_pair.hpp"

#include <gtest/gtest.h>

#include "pmd/port.hpp"
#include "tests/pmd/eal_env.hpp"

namespace rocedp::pmd {
namespace {

using test::make_frame;
using test::pool;
using test::to_bytes;
using test::to_mbuf;

config::PortConfig port_cfg(const std::string& name, uint8_t ip_last) {
  config::PortConfig c;
  c.name = name;
  c.address.value = 0x0a000000u | ip_last;
  return c;
}

// Sends frames seq0..seq0+count-1 on (from, queue) and collects what arrives on (to, queue).
std::vector<std::vector<uint8_t>> send_and_receive(Port& from, Port& to, uint16_t queue,
                                                   uint32_t seq0, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    rte_mbuf* m = to_mbuf(make_frame(seq0 + i, 60 + i % 1400));
    EXPECT_NE(m, nullptr);
    if (from.tx_burst(queue, &m, 1) != 1) {
      rte_pktmbuf_free(m);
      ADD_FAILURE() << "tx_burst refused frame " << i;
    }
  }
  std::vector<std::vector<uint8_t>> got;
  rte_mbuf* pkts[32];
  for (int idle = 0; idle < 100 && got.size() < count;) {
    uint16_t n = to.rx_burst(queue, pkts, 32);
    if (n == 0) ++idle;
    for (uint16_t i = 0; i < n; ++i) {
      got.push_back(to_bytes(pkts[i]));
      rte_pktmbuf_free(pkts[i]);
    }
  }
  return got;
}

TEST(RingPairDevargs, ParsesBothSidesAndRejectsMalformed) {
  RingPairDevargs d;
  std::string error;
  ASSERT_TRUE(parse_ring_pair_devargs("ring_pair:link0:a", &d, &error)) << error;
  EXPECT_EQ(d.link, "link0");
  EXPECT_EQ(d.side, 'a');
  ASSERT_TRUE(parse_ring_pair_devargs(ring_pair_devargs("x-1_y", 'b'), &d, &error)) << error;
  EXPECT_EQ(d.link, "x-1_y");
  EXPECT_EQ(d.side, 'b');
  for (const char* bad : {"ring_pair:link0", "ring_pair::a", "ring_pair:l:c", "ring_pair:a b:a",
                          "net_ring0", "ring_pair:l:a,x=1"}) {
    error.clear();
    EXPECT_FALSE(parse_ring_pair_devargs(bad, &d, &error)) << bad;
    EXPECT_NE(error.find("ring_pair:LINK:a"), std::string::npos) << error;
  }
  EXPECT_TRUE(is_ring_pair_devargs("ring_pair:l:a"));
  EXPECT_FALSE(is_ring_pair_devargs("net_ring0"));
}

TEST(RingPair, FramesCrossByteExactBothWaysOnEveryQueue) {
  const uint32_t free_before = pool().available();
  {
    RingPair pair;
    std::string error;
    ASSERT_TRUE(open_ring_pair("both_ways", port_cfg("a", 1), port_cfg("b", 2), 4, pool(),
                               test::test_dataplane(), &pair, &error))
        << error;
    ASSERT_EQ(pair.a->queue_count(), 4);
    ASSERT_EQ(pair.b->queue_count(), 4);
    ASSERT_TRUE(pair.a->start(&error)) << error;
    ASSERT_TRUE(pair.b->start(&error)) << error;
    for (uint16_t q = 0; q < 4; ++q) {
      auto ab = send_and_receive(*pair.a, *pair.b, q, 1000 * q, 50);
      ASSERT_EQ(ab.size(), 50u) << "queue " << q;
      for (uint32_t i = 0; i < 50; ++i) EXPECT_EQ(ab[i], make_frame(1000 * q + i, 60 + i));
      auto ba = send_and_receive(*pair.b, *pair.a, q, 5000 + q, 10);
      ASSERT_EQ(ba.size(), 10u);
      for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(ba[i], make_frame(5000 + q + i, 60 + i));
    }
    // Queues are separate lanes: nothing sent on queue 0 shows up on queue 1.
    rte_mbuf* m = to_mbuf(make_frame(7));
    ASSERT_EQ(pair.a->tx_burst(0, &m, 1), 1);
    rte_mbuf* pkts[4];
    EXPECT_EQ(pair.b->rx_burst(1, pkts, 4), 0);
    ASSERT_EQ(pair.b->rx_burst(0, pkts, 4), 1);
    rte_pktmbuf_free(pkts[0]);

    PortStats sa = pair.a->stats(), sb = pair.b->stats();
    EXPECT_EQ(sa.tx_packets, 4u * 50 + 1);
    EXPECT_EQ(sb.rx_packets, 4u * 50 + 1);
    EXPECT_EQ(sb.tx_packets, 4u * 10);
    EXPECT_EQ(sa.rx_packets, 4u * 10);
  }
  EXPECT_EQ(pool().available(), free_before);
}

TEST(RingPair, FramesLeftInTheRingsAreFreedWhenBothSidesClose) {
  const uint32_t free_before = pool().available();
  {
    RingPair pair;
    std::string error;
    ASSERT_TRUE(open_ring_pair("leftovers", port_cfg("a", 1), port_cfg("b", 2), 1, pool(),
                               test::test_dataplane(), &pair, &error))
        << error;
    ASSERT_TRUE(pair.a->start(&error)) << error;
    for (uint32_t i = 0; i < 100; ++i) {
      rte_mbuf* m = to_mbuf(make_frame(i));
      ASSERT_EQ(pair.a->tx_burst(0, &m, 1), 1);
    }
    EXPECT_EQ(pool().available(), free_before - 100);
  }
  EXPECT_EQ(pool().available(), free_before);
}

TEST(RingPair, SameSideTwiceIsRefusedAndALinkCanBeReopened) {
  std::string error;
  config::PortConfig a = port_cfg("a", 1);
  a.devargs = "ring_pair:again:a";
  auto first = Port::open(a, 1, pool(), test::test_dataplane(), &error);
  ASSERT_TRUE(first) << error;
  config::PortConfig a2 = port_cfg("a2", 3);
  a2.devargs = "ring_pair:again:a";
  EXPECT_FALSE(Port::open(a2, 1, pool(), test::test_dataplane(), &error));
  EXPECT_NE(error.find("already open"), std::string::npos) << error;
  first.reset();
  auto reopened = Port::open(a, 1, pool(), test::test_dataplane(), &error);
  EXPECT_TRUE(reopened) << error;
}

TEST(RingPair, TheYamlFormPassesConfigValidationAndOpensBothSides) {
  // config/ rejects two ports on one device (the text before the first comma): the two sides
  // of one link must be distinct devices, which the ring_pair:LINK:SIDE form guarantees.
  const std::string yaml = R"(
eal: { lcores: [0, 1], main_lcore: 0 }
dataplane: { lcores: [1] }
ports:
  - { name: left, devargs: "ring_pair:yaml_link:a", address: 10.9.0.1/24, mac: "02:00:00:00:09:01" }
  - { name: right, devargs: "ring_pair:yaml_link:b", address: 10.9.0.2/24, mac: "02:00:00:00:09:02" }
)";
  config::Config cfg = config::parse(yaml, "ring_pair.yaml");
  ASSERT_EQ(cfg.ports.size(), 2u);
  std::string error;
  auto left = Port::open(cfg.ports[0], 1, pool(), cfg.dataplane, &error);
  ASSERT_TRUE(left) << error;
  auto right = Port::open(cfg.ports[1], 1, pool(), cfg.dataplane, &error);
  ASSERT_TRUE(right) << error;
  EXPECT_EQ(left->mac(), *cfg.ports[0].mac);
  EXPECT_EQ(right->mac(), *cfg.ports[1].mac);
  ASSERT_TRUE(left->start(&error) && right->start(&error)) << error;
  auto got = send_and_receive(*right, *left, 0, 77, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], make_frame(79, 62));
}

TEST(RingPair, SidesWithoutAConfiguredMacGetDistinctLocallyAdministeredOnes) {
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("macs", port_cfg("left", 1), port_cfg("right", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  config::MacAddress a = pair.a->mac(), b = pair.b->mac();
  EXPECT_NE(a, b);
  EXPECT_NE(a, config::MacAddress{});
  EXPECT_EQ(a.bytes[0], 0x02) << "locally administered, unicast";
  EXPECT_EQ(b.bytes[0], 0x02);
  // Stable: the same name gives the same MAC on the next run.
  pair = RingPair{};
  ASSERT_TRUE(open_ring_pair("macs", port_cfg("left", 1), port_cfg("right", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  EXPECT_EQ(pair.a->mac(), a);
}

TEST(RingPair, MoreQueuesThanTheLinkHasAreCapped) {
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("capped", port_cfg("a", 1), port_cfg("b", 2), 64, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  EXPECT_EQ(pair.a->queue_count(), kRingPairMaxQueues);
}

}  // namespace
}  // namespace rocedp::pmd
