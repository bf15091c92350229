// UDP source port derivation against values seen from Linux (rxe-rping.pcap) and computed by hand.
#include "dataplane/wire/udp_sport.hpp"

#include <gtest/gtest.h>

namespace rocedp::wire {
namespace {

TEST(UdpSport, MatchesTheRealCapture) {
  // rping: rdma_cm ports 46827 -> 7174 give flow label 0x6427B (carried in the
  // CM REQ), and every packet of the RC QP uses source port 49762.
  EXPECT_EQ(rdma_cm_flow_label(46827, 7174), 0x6427Bu);
  EXPECT_EQ(udp_sport(0x6427B, 17, 17), 49762);
  // QP1 packets use rxe's creation-time port.
  EXPECT_EQ(rxe_default_udp_sport(1), 55410);
}

TEST(UdpSport, FlowLabelFromQpnsIsSymmetricAndInRange) {
  // v = 17 * 17 = 289, no high bits: label 289, port 0xC000 | 289.
  EXPECT_EQ(calc_flow_label(17, 17), 289u);
  EXPECT_EQ(udp_sport(0, 17, 17), 0xC121);
  // Large QPNs: the product needs 64 bits and both folds.
  const std::uint64_t v0 = 0x123456ull * 0x654321ull;
  std::uint64_t v = v0 ^ (v0 >> 20);
  v ^= v >> 40;
  EXPECT_EQ(calc_flow_label(0x123456, 0x654321), static_cast<std::uint32_t>(v & 0xFFFFF));
  for (std::uint32_t a : {1u, 2u, 17u, 1000u, 0xFFFFFFu}) {
    for (std::uint32_t b : {1u, 3u, 17u, 77777u, 0xABCDEFu}) {
      EXPECT_EQ(calc_flow_label(a, b), calc_flow_label(b, a));
      const std::uint16_t p = udp_sport(0, a, b);
      EXPECT_GE(p, 0xC000);
    }
  }
  // Folding: high 6 bits of the label XOR into the low 14.
  EXPECT_EQ(flow_label_to_udp_sport(0xFC000), 0xC03F);
  EXPECT_EQ(flow_label_to_udp_sport(0x3FFF), 0xFFFF);
  // A non-zero flow label wins over the QPNs.
  EXPECT_EQ(udp_sport(0x1, 17, 17), 0xC001);
}

}  // namespace
}  // namespace rocedp::wire
