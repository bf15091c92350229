// PacketPool: creation, data room, availability as mbufs come and go, and failures.

#include "pmd/packet_pool.hpp"

#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include "tests/pmd/eal_env.hpp"

namespace rocedp::pmd {
namespace {

TEST(PacketPool, AvailableFollowsAllocationAndFree) {
  std::string error;
  auto p = PacketPool::create("pp_avail", 1023, 0, PacketPool::data_room_for_mtu(1500),
                              SOCKET_ID_ANY, &error);
  ASSERT_TRUE(p) << error;
  EXPECT_EQ(p->size(), 1023u);
  EXPECT_EQ(p->available(), 1023u);
  EXPECT_EQ(p->name(), "pp_avail");
  rte_mbuf* m[10];
  ASSERT_EQ(rte_pktmbuf_alloc_bulk(p->get(), m, 10), 0);
  EXPECT_EQ(p->available(), 1013u);
  rte_pktmbuf_free_bulk(m, 10);
  EXPECT_EQ(p->available(), 1023u);
}

TEST(PacketPool, DataRoomHoldsAFullFrameOfTheMtu) {
  EXPECT_EQ(PacketPool::data_room_for_mtu(1500), RTE_MBUF_DEFAULT_BUF_SIZE);
  // The frame, a VLAN tag, the FCS, and 256 bytes for net_af_packet's socket-frame header.
  EXPECT_EQ(PacketPool::data_room_for_mtu(9000), RTE_PKTMBUF_HEADROOM + 9000 + 14 + 4 + 4 + 256);
  std::string error;
  auto p = PacketPool::create("pp_jumbo", 63, 0, PacketPool::data_room_for_mtu(9000), SOCKET_ID_ANY,
                              &error);
  ASSERT_TRUE(p) << error;
  EXPECT_EQ(p->data_room(), PacketPool::data_room_for_mtu(9000));
  rte_mbuf* m = rte_pktmbuf_alloc(p->get());
  ASSERT_NE(m, nullptr);
  EXPECT_NE(rte_pktmbuf_append(m, 9000 + 14 + 4), nullptr) << "a jumbo frame fits one mbuf";
  rte_pktmbuf_free(m);
}

TEST(PacketPool, ACacheLargerThanThePoolAllowsIsClamped) {
  std::string error;
  auto p = PacketPool::create("pp_cache", 63, 512, 2048, SOCKET_ID_ANY, &error);
  EXPECT_TRUE(p) << error;
}

TEST(PacketPool, ADuplicateNameFailsWithAReason) {
  std::string error;
  auto a = PacketPool::create("pp_dup", 63, 0, 2048, SOCKET_ID_ANY, &error);
  ASSERT_TRUE(a) << error;
  auto b = PacketPool::create("pp_dup", 63, 0, 2048, SOCKET_ID_ANY, &error);
  EXPECT_FALSE(b);
  EXPECT_NE(error.find("pp_dup"), std::string::npos) << error;
}

TEST(PacketPool, ANameCanBeReusedAfterThePoolIsFreed) {
  std::string error;
  auto a = PacketPool::create("pp_again", 63, 0, 2048, SOCKET_ID_ANY, &error);
  ASSERT_TRUE(a) << error;
  a.reset();
  EXPECT_TRUE(PacketPool::create("pp_again", 63, 0, 2048, SOCKET_ID_ANY, &error)) << error;
}

TEST(PacketPool, MoreThanTheMemoryHoldsFails) {
  std::string error;
  // 256 MB of EAL memory cannot hold 200,000 mbufs of 9 KB.
  auto p = PacketPool::create("pp_huge", 200000, 0, PacketPool::data_room_for_mtu(9000),
                              SOCKET_ID_ANY, &error);
  EXPECT_FALSE(p);
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace rocedp::pmd
