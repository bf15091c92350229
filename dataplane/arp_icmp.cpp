#include "dataplane/arp_icmp.hpp"

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/mbuf_sum.hpp"

namespace rocedp::dataplane {
namespace {

constexpr uint32_t kEthLen = sizeof(rte_ether_hdr);
constexpr uint32_t kArpLen = sizeof(rte_arp_hdr);
constexpr uint32_t kIpMinLen = sizeof(rte_ipv4_hdr);
constexpr uint32_t kIcmpLen = sizeof(rte_icmp_hdr);
static_assert(kEthLen == 14 && kArpLen == 28 && kIpMinLen == 20 && kIcmpLen == 8);
static_assert(kEthMinFrame >= kEthLen + kArpLen);

constexpr uint8_t kEchoReplyTtl = 64;    // Linux's default ip_default_ttl
constexpr uint8_t kIcmpEchoRequest = 8;  // RFC 792
constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIpProtoIcmp = 1;

inline void count(ArpIcmpCounters* c, ArpIcmpDrop r) {
  if (c != nullptr) ++c->drops[static_cast<size_t>(r)];
}

inline bool mac_equal(const rte_ether_addr& a, const config::MacAddress& b) {
  return std::memcmp(a.addr_bytes, b.bytes.data(), RTE_ETHER_ADDR_LEN) == 0;
}
inline void mac_set(rte_ether_addr* dst, const config::MacAddress& src) {
  std::memcpy(dst->addr_bytes, src.bytes.data(), RTE_ETHER_ADDR_LEN);
}
inline config::MacAddress mac_of(const rte_ether_addr& a) {
  config::MacAddress m;
  std::memcpy(m.bytes.data(), a.addr_bytes, RTE_ETHER_ADDR_LEN);
  return m;
}

// A unicast station address we may talk to: not in 0/8 ("this network") or 127/8 (loopback),
// which RFC 1122 §3.2.1.3 forbids as a source on the wire, not multicast/class E, not the
// limited or our subnet's directed broadcast.
inline bool valid_peer_ip(uint32_t ip, const LocalAddress& local) {
  const uint32_t first_octet = ip >> 24;
  return first_octet != 0 && first_octet != 127 && (ip >> 28) < 0xE &&
         !local.is_subnet_broadcast(ip);
}

// What classify learned about an ARP frame.
struct ArpVerdict {
  ArpIcmpClass cls;
  ArpIcmpDrop reason;
};

ArpVerdict check_arp(const rte_mbuf* m, const LocalAddress& local) {
  auto drop = [](ArpIcmpDrop r) { return ArpVerdict{ArpIcmpClass::kDrop, r}; };
  if (rte_pktmbuf_data_len(m) < kEthLen + kArpLen) return drop(ArpIcmpDrop::kShortFrame);
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  const auto* arp = rte_pktmbuf_mtod_offset(m, const rte_arp_hdr*, kEthLen);
  // RFC 826 / RFC 5227: only Ethernet + IPv4 ARP exists for us.
  if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
      arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
      arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != sizeof(uint32_t)) {
    return drop(ArpIcmpDrop::kArpBadFormat);
  }
  const uint16_t op = rte_be_to_cpu_16(arp->arp_opcode);
  if (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY) return drop(ArpIcmpDrop::kArpBadOpcode);
  const rte_ether_addr& sha = arp->arp_data.arp_sha;
  if (mac_equal(sha, local.mac) || mac_equal(eth->src_addr, local.mac)) {
    return drop(ArpIcmpDrop::kLoopedBack);
  }
  if (rte_is_multicast_ether_addr(&sha) || rte_is_zero_ether_addr(&sha)) {
    return drop(ArpIcmpDrop::kArpBadSender);
  }
  if (!rte_is_broadcast_ether_addr(&eth->dst_addr) && !mac_equal(eth->dst_addr, local.mac)) {
    return drop(ArpIcmpDrop::kArpNotForUs);
  }
  const uint32_t sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
  const uint32_t tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
  // sip 0 is an ARP Probe (RFC 5227 §2.1.1): allowed in a request, never learned.
  if (sip != 0 && !valid_peer_ip(sip, local)) return drop(ArpIcmpDrop::kArpBadSender);
  // Another station claims our address: counted, and the control thread defends it (RFC 5227
  // §2.4).
  if (sip == local.ip.value) return {ArpIcmpClass::kToControl, ArpIcmpDrop::kArpAddressConflict};
  if (op == RTE_ARP_OP_REQUEST) {
    if (tip == local.ip.value) return {ArpIcmpClass::kAnswerLocally, ArpIcmpDrop::kCount};
    // A gratuitous request (sender == target, RFC 5227 §2.3 announcement) updates neighbours.
    if (sip != 0 && sip == tip) return {ArpIcmpClass::kToControl, ArpIcmpDrop::kCount};
    return drop(ArpIcmpDrop::kArpNotForUs);
  }
  if (sip == 0) return drop(ArpIcmpDrop::kArpBadSender);
  return {ArpIcmpClass::kToControl, ArpIcmpDrop::kCount};
}

struct IcmpVerdict {
  ArpIcmpClass cls;
  ArpIcmpDrop reason;
  uint32_t ip_hlen;
  uint32_t ip_total;
};

IcmpVerdict check_icmp(const rte_mbuf* m, const LocalAddress& local) {
  auto drop = [](ArpIcmpDrop r) { return IcmpVerdict{ArpIcmpClass::kDrop, r, 0, 0}; };
  const uint32_t seg = rte_pktmbuf_data_len(m);
  // The protocol byte sits at offset 9 of the IP header; without it the frame is not ours to judge.
  if (seg < kEthLen + 10) return {ArpIcmpClass::kNotArpIcmp, ArpIcmpDrop::kCount, 0, 0};
  const auto* ip = rte_pktmbuf_mtod_offset(m, const rte_ipv4_hdr*, kEthLen);
  if (ip->next_proto_id != kIpProtoIcmp)
    return {ArpIcmpClass::kNotArpIcmp, ArpIcmpDrop::kCount, 0, 0};
  if (seg < kEthLen + kIpMinLen) return drop(ArpIcmpDrop::kShortFrame);
  if ((ip->version_ihl >> 4) != 4 || (ip->version_ihl & 0xF) < 5)
    return drop(ArpIcmpDrop::kIpBadHeader);
  const uint32_t hlen = (ip->version_ihl & 0xFu) * 4;
  if (seg < kEthLen + hlen + kIcmpLen) return drop(ArpIcmpDrop::kShortFrame);
  const uint32_t total = rte_be_to_cpu_16(ip->total_length);
  if (total < hlen + kIcmpLen || kEthLen + total > rte_pktmbuf_pkt_len(m)) {
    return drop(ArpIcmpDrop::kIpBadLength);
  }
  if (rte_raw_cksum(ip, hlen) != 0xFFFF) return drop(ArpIcmpDrop::kIpBadChecksum);
  if ((rte_be_to_cpu_16(ip->fragment_offset) & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) !=
      0) {
    return drop(ArpIcmpDrop::kIpFragment);
  }
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  if (mac_equal(eth->src_addr, local.mac)) return drop(ArpIcmpDrop::kLoopedBack);
  // Only unicast to our address: RFC 1122 3.2.2.6 lets a host ignore broadcast echo requests
  // (Linux does by default), which also keeps us out of smurf amplification.
  if (rte_be_to_cpu_32(ip->dst_addr) != local.ip.value || !mac_equal(eth->dst_addr, local.mac)) {
    return drop(ArpIcmpDrop::kIcmpNotForUs);
  }
  const uint32_t src = rte_be_to_cpu_32(ip->src_addr);
  if (!valid_peer_ip(src, local) || src == local.ip.value ||
      rte_is_multicast_ether_addr(&eth->src_addr)) {
    return drop(ArpIcmpDrop::kIpBadSource);
  }
  const auto* icmp = rte_pktmbuf_mtod_offset(m, const rte_icmp_hdr*, kEthLen + hlen);
  if (icmp->icmp_type != kIcmpEchoRequest || icmp->icmp_code != 0) {
    return drop(ArpIcmpDrop::kIcmpUnsupported);
  }
  uint16_t sum = 0;
  if (!mbuf_ones_sum(m, kEthLen + hlen, total - hlen, &sum)) return drop(ArpIcmpDrop::kIpBadLength);
  if (sum != 0xFFFF) return drop(ArpIcmpDrop::kIcmpBadChecksum);
  return {ArpIcmpClass::kAnswerLocally, ArpIcmpDrop::kCount, hlen, total};
}

inline uint16_t ether_type(const rte_mbuf* m) {
  return rte_be_to_cpu_16(rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type);
}

// Only fields the reply needs survive; RX offload flags must not leak into TX. Attachment flags
// stay, they tell rte_pktmbuf_free how to release the buffer.
inline void reset_offloads(rte_mbuf* m) {
  m->ol_flags &= (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT);
}

bool answer_arp(rte_mbuf* m, const LocalAddress& local, ArpIcmpCounters* c, ArpPeer* peer) {
  const ArpVerdict v = check_arp(m, local);
  if (v.cls != ArpIcmpClass::kAnswerLocally) {
    count(c, v.cls == ArpIcmpClass::kDrop ? v.reason : ArpIcmpDrop::kReplyFailed);
    return false;
  }
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  auto* arp = rte_pktmbuf_mtod_offset(m, rte_arp_hdr*, kEthLen);
  const rte_ether_addr requester = arp->arp_data.arp_sha;
  const uint32_t requester_ip = arp->arp_data.arp_sip;  // network order, copied back as is
  if (peer != nullptr) {
    const uint32_t sip = rte_be_to_cpu_32(requester_ip);
    peer->ip = config::Ipv4Address{sip};  // 0 for a probe: nothing to learn
    peer->mac = mac_of(requester);
    peer->targets_us = true;
  }
  // RFC 826 reply: swap sender and target, fill in our hardware address, unicast to the asker.
  eth->dst_addr = requester;
  mac_set(&eth->src_addr, local.mac);
  arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
  arp->arp_data.arp_tha = requester;
  arp->arp_data.arp_tip = requester_ip;
  mac_set(&arp->arp_data.arp_sha, local.mac);
  arp->arp_data.arp_sip = rte_cpu_to_be_32(local.ip.value);
  reset_offloads(m);
  if (c != nullptr) ++c->arp_replies;
  return true;
}

bool answer_icmp(rte_mbuf* m, const LocalAddress& local, ArpIcmpCounters* c) {
  const IcmpVerdict v = check_icmp(m, local);
  if (v.cls != ArpIcmpClass::kAnswerLocally) {
    count(c, v.cls == ArpIcmpClass::kDrop ? v.reason : ArpIcmpDrop::kReplyFailed);
    return false;
  }
  const uint32_t icmp_len = v.ip_total - v.ip_hlen;
  const uint32_t options = v.ip_hlen - kIpMinLen;
  // Drop Ethernet padding (and anything past the IP datagram) first: nothing is modified yet if
  // the chain does not allow it.
  const uint32_t wanted = kEthLen + v.ip_total;
  if (rte_pktmbuf_pkt_len(m) > wanted &&
      rte_pktmbuf_trim(m, rte_pktmbuf_pkt_len(m) - wanted) != 0) {
    count(c, ArpIcmpDrop::kReplyFailed);
    return false;
  }

  auto* base = rte_pktmbuf_mtod(m, uint8_t*);
  auto* icmp = reinterpret_cast<rte_icmp_hdr*>(base + kEthLen + v.ip_hlen);
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for the 16-bit word holding type and code. All words
  // are taken as stored, which keeps the sum independent of host byte order.
  uint16_t old_word = 0, hc = 0;
  std::memcpy(&old_word, icmp, sizeof(old_word));
  icmp->icmp_type = kIcmpEchoReply;
  uint16_t new_word = 0;
  std::memcpy(&new_word, icmp, sizeof(new_word));
  std::memcpy(&hc, &icmp->icmp_cksum, sizeof(hc));
  uint32_t sum = static_cast<uint16_t>(~hc) + static_cast<uint16_t>(~old_word) + uint32_t{new_word};
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  icmp->icmp_cksum = static_cast<uint16_t>(~sum);

  // New Ethernet + 20-byte IP header, written just in front of the ICMP message so that IP
  // options (if any) disappear; the front of the mbuf is then cut by their length.
  const auto* old_eth = reinterpret_cast<const rte_ether_hdr*>(base);
  const auto* old_ip = reinterpret_cast<const rte_ipv4_hdr*>(base + kEthLen);
  rte_ether_hdr eth{};
  eth.dst_addr = old_eth->src_addr;
  mac_set(&eth.src_addr, local.mac);
  eth.ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  rte_ipv4_hdr ip{};
  ip.version_ihl = RTE_IPV4_VHL_DEF;
  ip.type_of_service = old_ip->type_of_service;  // RFC 1122 3.2.2.6 lets the reply keep the TOS
  ip.total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpMinLen + icmp_len));
  ip.packet_id = old_ip->packet_id;
  ip.fragment_offset = 0;
  ip.time_to_live = kEchoReplyTtl;
  ip.next_proto_id = kIpProtoIcmp;
  ip.src_addr = rte_cpu_to_be_32(local.ip.value);
  ip.dst_addr = old_ip->src_addr;
  ip.hdr_checksum = 0;
  ip.hdr_checksum = rte_ipv4_cksum(&ip);
  std::memcpy(base + options, &eth, kEthLen);
  std::memcpy(base + options + kEthLen, &ip, kIpMinLen);
  if (options != 0)
    rte_pktmbuf_adj(m, static_cast<uint16_t>(options));  // cannot fail: checked above
  reset_offloads(m);
  m->l2_len = kEthLen;
  m->l3_len = kIpMinLen;
  if (c != nullptr) ++c->echo_replies;
  return true;
}

rte_mbuf* build_arp(rte_mempool* pool, const LocalAddress& local, uint32_t target_ip) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kEthMinFrame));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memset(p, 0, kEthMinFrame);  // padding and the unknown target hardware address are zero
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  std::memset(eth->dst_addr.addr_bytes, 0xFF, RTE_ETHER_ADDR_LEN);
  mac_set(&eth->src_addr, local.mac);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
  auto* arp = reinterpret_cast<rte_arp_hdr*>(p + kEthLen);
  arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
  arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  arp->arp_hlen = RTE_ETHER_ADDR_LEN;
  arp->arp_plen = sizeof(uint32_t);
  arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
  mac_set(&arp->arp_data.arp_sha, local.mac);
  arp->arp_data.arp_sip = rte_cpu_to_be_32(local.ip.value);
  arp->arp_data.arp_tip = rte_cpu_to_be_32(target_ip);
  return m;
}

}  // namespace

std::string_view arp_icmp_drop_name(ArpIcmpDrop reason) {
  switch (reason) {
#define ROCEDP_X(name, str) \
  case ArpIcmpDrop::name:   \
    return str;
    ROCEDP_ARP_ICMP_DROPS(ROCEDP_X)
#undef ROCEDP_X
    case ArpIcmpDrop::kCount:
      break;
  }
  return "unknown";
}

ArpIcmpClass classify_arp_icmp(const rte_mbuf* m, const LocalAddress& local, ArpIcmpCounters* c) {
  if (rte_pktmbuf_data_len(m) < kEthLen) return ArpIcmpClass::kNotArpIcmp;
  const uint16_t type = ether_type(m);
  ArpIcmpClass cls = ArpIcmpClass::kNotArpIcmp;
  ArpIcmpDrop reason = ArpIcmpDrop::kCount;
  if (type == RTE_ETHER_TYPE_ARP) {
    const ArpVerdict v = check_arp(m, local);
    cls = v.cls;
    reason = v.reason;
  } else if (type == RTE_ETHER_TYPE_IPV4) {
    const IcmpVerdict v = check_icmp(m, local);
    cls = v.cls;
    reason = v.reason;
  }
  if (reason != ArpIcmpDrop::kCount) count(c, reason);  // a drop, or a conflict to defend
  if (cls == ArpIcmpClass::kToControl && c != nullptr) ++c->to_control;
  return cls;
}

bool answer_locally(rte_mbuf* m, const LocalAddress& local, ArpIcmpCounters* c, ArpPeer* peer) {
  if (peer != nullptr) *peer = ArpPeer{};
  if (rte_pktmbuf_data_len(m) >= kEthLen) {
    const uint16_t type = ether_type(m);
    if (type == RTE_ETHER_TYPE_ARP) return answer_arp(m, local, c, peer);
    if (type == RTE_ETHER_TYPE_IPV4) return answer_icmp(m, local, c);
  }
  count(c, ArpIcmpDrop::kReplyFailed);
  return false;
}

bool extract_arp_peer(const rte_mbuf* m, const LocalAddress& local, ArpPeer* peer) {
  if (rte_pktmbuf_data_len(m) < kEthLen || ether_type(m) != RTE_ETHER_TYPE_ARP) return false;
  const ArpVerdict v = check_arp(m, local);
  if (v.cls == ArpIcmpClass::kDrop) return false;
  const auto* arp = rte_pktmbuf_mtod_offset(m, const rte_arp_hdr*, kEthLen);
  const uint32_t sip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
  if (sip == 0) return false;  // a probe announces nothing (RFC 5227 §2.1.1)
  peer->ip = config::Ipv4Address{sip};
  peer->mac = mac_of(arp->arp_data.arp_sha);
  peer->targets_us = rte_be_to_cpu_32(arp->arp_data.arp_tip) == local.ip.value;
  peer->conflict = v.reason == ArpIcmpDrop::kArpAddressConflict;
  return true;
}

rte_mbuf* build_arp_request(rte_mempool* pool, const LocalAddress& local,
                            config::Ipv4Address target) {
  return build_arp(pool, local, target.value);
}

rte_mbuf* build_gratuitous_arp(rte_mempool* pool, const LocalAddress& local) {
  return build_arp(pool, local, local.ip.value);
}

}  // namespace rocedp::dataplane
