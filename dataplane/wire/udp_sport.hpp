#pragma once
// UDP source port per QP, as Linux derives it, so ECMP hashes our flows like a
// Linux peer's (include/rdma/ib_verbs.h rdma_calc_flow_label /
// rdma_flow_label_to_udp_sport; cma.c cma_get_roce_udp_flow_label).
//
// Verified against ../shared/captures/rxe-rping.pcap: the CM REQ carries
// primary flow label 0x6427B = rdma_cm ports (46827 * 31 + 7174) & 0xFFFFF, and
// the RC QP's packets use UDP source port 0xC262 = flow_label_to_udp_sport(0x6427B).
// QP1 (GSI) packets use rxe's QP-creation port 0xC000 + hash_32(1, 14) = 55410,
// because a GSI QP never gets an address vector through modify_qp.

#include <cstdint>

namespace rocedp::wire {

inline constexpr std::uint32_t kFlowLabelMask = 0xFFFFF;
inline constexpr std::uint16_t kRoceUdpSportMin = 0xC000;

// rdma_calc_flow_label(lqpn, rqpn): symmetric in the two QPNs, so both ends agree.
constexpr std::uint32_t calc_flow_label(std::uint32_t lqpn, std::uint32_t rqpn) {
  std::uint64_t v = static_cast<std::uint64_t>(lqpn) * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<std::uint32_t>(v & kFlowLabelMask);
}

// rdma_flow_label_to_udp_sport: fold the 20-bit label into 14 bits, in 0xC000-0xFFFF.
constexpr std::uint16_t flow_label_to_udp_sport(std::uint32_t fl) {
  std::uint32_t lo = fl & 0x03FFF;
  const std::uint32_t hi = fl & 0xFC000;
  lo ^= hi >> 14;
  return static_cast<std::uint16_t>(lo | kRoceUdpSportMin);
}

// rdma_get_udp_sport: the flow label if set, else derived from both QPNs.
constexpr std::uint16_t udp_sport(std::uint32_t flow_label, std::uint32_t lqpn,
                                  std::uint32_t rqpn) {
  if (flow_label == 0) flow_label = calc_flow_label(lqpn, rqpn);
  return flow_label_to_udp_sport(flow_label);
}

// cma_get_roce_udp_flow_label for IPv4 (or IPv6 without a flow label):
// rdma_cm's source and destination ports hashed into a flow label.
constexpr std::uint32_t rdma_cm_flow_label(std::uint16_t src_port, std::uint16_t dst_port) {
  return (static_cast<std::uint32_t>(src_port) * 31 + dst_port) & kFlowLabelMask;
}

// rxe's port at QP creation (rxe_qp.c): 0xC000 + hash_32(qpn, 14).
constexpr std::uint16_t rxe_default_udp_sport(std::uint32_t qpn) {
  constexpr std::uint32_t kGoldenRatio32 = 0x61C88647;  // include/linux/hash.h
  const std::uint32_t h = (qpn * kGoldenRatio32) >> (32 - 14);
  return static_cast<std::uint16_t>(kRoceUdpSportMin + (h & 0x3FFF));
}

static_assert(rdma_cm_flow_label(46827, 7174) == 0x6427B);
static_assert(flow_label_to_udp_sport(0x6427B) == 49762);
static_assert(rxe_default_udp_sport(1) == 55410);

}  // namespace rocedp::wire
