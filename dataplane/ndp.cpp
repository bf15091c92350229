#include "dataplane/ndp.hpp"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/mbuf_sum.hpp"

namespace rocedp::dataplane {
namespace {

constexpr uint32_t kEthLen = sizeof(rte_ether_hdr);
constexpr uint32_t kIp6Len = sizeof(rte_ipv6_hdr);
constexpr uint32_t kIcmpAt = kEthLen + kIp6Len;  // ICMPv6 header: type, code, checksum
constexpr uint32_t kIcmpHdrLen = 4;
constexpr uint32_t kNdMsgLen = 24;   // NS/NA: header, 4 bytes reserved/flags, 16 target (4.3/4.4)
constexpr uint32_t kLinkOptLen = 8;  // source/target link-layer address option, Ethernet (4.6.1)
constexpr uint32_t kNaLen = kNdMsgLen + kLinkOptLen;
constexpr uint32_t kNaFrameLen = kIcmpAt + kNaLen;
static_assert(kEthLen == 14 && kIp6Len == 40 && kNaFrameLen == 86);

constexpr uint8_t kProtoIcmp6 = 58;
constexpr uint8_t kEchoRequest = 128;  // RFC 4443 4.1
constexpr uint8_t kEchoReply = 129;
constexpr uint8_t kNeighborSolicitation = 135;  // RFC 4861 4.3
constexpr uint8_t kNeighborAdvertisement = 136;
constexpr uint8_t kOptSourceLinkAddress = 1;  // RFC 4861 4.6.1
constexpr uint8_t kOptTargetLinkAddress = 2;
constexpr uint8_t kNaSolicited = 0x40;  // RFC 4861 4.4: R 0x80, S 0x40, O 0x20 of the flags byte
constexpr uint8_t kNaOverride = 0x20;
constexpr uint8_t kNdHopLimit = 255;   // RFC 4861 7.1: proves the sender is on the link
constexpr uint8_t kEchoHopLimit = 64;  // Linux's default hop_limit
constexpr uint32_t kIp6VersionFlow = 6u << 28;

using Addr = std::array<uint8_t, 16>;

constexpr Addr kAllNodes{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

inline void count(NdpCounters* c, NdpDrop r) {
  if (c != nullptr) ++c->drops[static_cast<size_t>(r)];
}

inline bool mac_equal(const uint8_t* a, const config::MacAddress& b) {
  return std::memcmp(a, b.bytes.data(), RTE_ETHER_ADDR_LEN) == 0;
}
inline bool addr_equal(const uint8_t* a, const Addr& b) {
  return std::memcmp(a, b.data(), b.size()) == 0;
}
inline bool addr_unspecified(const uint8_t* a) {
  return addr_equal(a, Addr{});
}
inline bool addr_loopback(const uint8_t* a) {
  return addr_equal(a, Addr{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
}
inline bool group_mac(const uint8_t* mac) {
  return (mac[0] & 1) != 0;
}
inline bool zero_mac(const uint8_t* mac) {
  static constexpr uint8_t kZero[RTE_ETHER_ADDR_LEN] = {};
  return std::memcmp(mac, kZero, RTE_ETHER_ADDR_LEN) == 0;
}
// The Ethernet destination an IPv6 multicast destination maps to (RFC 2464 7).
inline bool mac_is_group_of(const uint8_t* mac, const uint8_t* group) {
  return mac[0] == 0x33 && mac[1] == 0x33 && std::memcmp(mac + 2, group + 12, 4) == 0;
}

// Ones'-complement sum (rte_raw_cksum representation) of the ICMPv6 pseudo-header (RFC 8200 8.1).
uint16_t pseudo_header_sum(const uint8_t* src, const uint8_t* dst, uint32_t upper_len) {
  uint8_t ph[40] = {};
  std::memcpy(ph, src, 16);
  std::memcpy(ph + 16, dst, 16);
  const uint32_t len_be = rte_cpu_to_be_32(upper_len);
  std::memcpy(ph + 32, &len_be, 4);
  ph[39] = kProtoIcmp6;
  return rte_raw_cksum(ph, sizeof ph);
}
inline uint16_t add_sums(uint16_t a, uint16_t b) {
  uint32_t s = uint32_t{a} + b;
  return static_cast<uint16_t>((s & 0xFFFF) + (s >> 16));
}

// The options of an NS/NA: each at least 8 bytes and inside the message (RFC 4861 4.6). Finds
// the first link-layer address option of type `want` (null if none). False when malformed or
// when that option is not an Ethernet address (length 1).
bool scan_options(const uint8_t* opt, uint32_t len, uint8_t want, const uint8_t** mac) {
  *mac = nullptr;
  while (len > 0) {
    if (len < 2 || opt[1] == 0 || uint32_t{opt[1]} * 8 > len) return false;
    const uint32_t n = uint32_t{opt[1]} * 8;
    if (opt[0] == want && *mac == nullptr) {
      if (n != kLinkOptLen) return false;
      *mac = opt + 2;
    }
    opt += n;
    len -= n;
  }
  return true;
}

struct Verdict {
  NdpClass cls;
  NdpDrop reason;
  uint8_t type = 0;
  uint32_t icmp_len = 0;          // ICMPv6 message length (the IPv6 payload length)
  const uint8_t* link = nullptr;  // NS: source link-layer address; NA: target link-layer address
};

Verdict check(const rte_mbuf* m, const LocalAddress6& local) {
  auto drop = [](NdpDrop r) { return Verdict{NdpClass::kDrop, r}; };
  const uint32_t seg = rte_pktmbuf_data_len(m);
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  // The next header byte sits at offset 6 of the IPv6 header: without it, not ours to judge.
  if (seg < kEthLen + 7 || p[kEthLen + 6] != kProtoIcmp6)
    return {NdpClass::kNotNdp, NdpDrop::kCount};
  if (seg < kIcmpAt + kIcmpHdrLen) return drop(NdpDrop::kShortFrame);
  const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(p + kEthLen);
  if ((p[kEthLen] >> 4) != 6) return drop(NdpDrop::kIp6BadHeader);
  const uint32_t plen = rte_be_to_cpu_16(ip->payload_len);
  if (plen < kIcmpHdrLen || kIcmpAt + plen > rte_pktmbuf_pkt_len(m))
    return drop(NdpDrop::kIp6BadLength);
  const uint8_t* dst_mac = p;
  const uint8_t* src_mac = p + RTE_ETHER_ADDR_LEN;
  if (mac_equal(src_mac, local.mac)) return drop(NdpDrop::kLoopedBack);
  const uint8_t* src = ip->src_addr;
  const uint8_t* dst = ip->dst_addr;
  if (src[0] == 0xff || addr_loopback(src) || group_mac(src_mac))
    return drop(NdpDrop::kIp6BadSource);
  // From our address: only an NA claiming it (a host that holds it too) is looked at further.
  const bool src_ours = addr_equal(src, local.ip.bytes);

  // Our destinations: our address at our MAC, our solicited-node group and all-nodes at theirs.
  const config::Ipv6Address sn = solicited_node_group(local.ip);
  const bool to_us = addr_equal(dst, local.ip.bytes) && mac_equal(dst_mac, local.mac);
  const bool to_sn = addr_equal(dst, sn.bytes) && mac_is_group_of(dst_mac, dst);
  const bool to_all = addr_equal(dst, kAllNodes) && mac_is_group_of(dst_mac, dst);
  if (!to_us && !to_sn && !to_all) return drop(NdpDrop::kIcmp6NotForUs);

  const uint8_t type = p[kIcmpAt];
  const uint8_t code = p[kIcmpAt + 1];
  if (type != kEchoRequest && type != kNeighborSolicitation && type != kNeighborAdvertisement)
    return drop(NdpDrop::kIcmp6Unsupported);
  if (src_ours && type != kNeighborAdvertisement) return drop(NdpDrop::kIp6BadSource);
  uint16_t body = 0;
  if (!mbuf_ones_sum(m, kIcmpAt, plen, &body)) return drop(NdpDrop::kIp6BadLength);
  if (add_sums(pseudo_header_sum(src, dst, plen), body) != 0xFFFF)
    return drop(NdpDrop::kIcmp6BadChecksum);

  if (type == kEchoRequest) {
    // Unicast only, as for IPv4 (RFC 4443 4.2 lets a node answer a group; we do not amplify).
    if (code != 0 || !to_us) return drop(NdpDrop::kIcmp6Unsupported);
    if (addr_unspecified(src)) return drop(NdpDrop::kIp6BadSource);
    if (seg < kIcmpAt + 8) return drop(NdpDrop::kShortFrame);
    return {NdpClass::kAnswerLocally, NdpDrop::kCount, type, plen};
  }

  // NS and NA: RFC 4861 7.1.1 / 7.1.2.
  if (ip->hop_limits != kNdHopLimit) return drop(NdpDrop::kNdpBadHopLimit);
  if (code != 0 || plen < kNdMsgLen) return drop(NdpDrop::kNdpBadFormat);
  if (seg < kIcmpAt + plen) return drop(NdpDrop::kShortFrame);
  const uint8_t* msg = p + kIcmpAt;
  const uint8_t* target = msg + 8;
  if (target[0] == 0xff) return drop(NdpDrop::kNdpBadFormat);
  const uint8_t* link = nullptr;
  if (!scan_options(msg + kNdMsgLen, plen - kNdMsgLen,
                    type == kNeighborSolicitation ? kOptSourceLinkAddress : kOptTargetLinkAddress,
                    &link))
    return drop(NdpDrop::kNdpBadFormat);
  if (link != nullptr && (group_mac(link) || zero_mac(link)))
    return drop(NdpDrop::kNdpBadLinkAddress);

  if (type == kNeighborSolicitation) {
    if (to_all) return drop(NdpDrop::kIcmp6NotForUs);
    // A DAD probe comes from :: to a solicited-node group and carries no SLLA (7.1.1).
    if (addr_unspecified(src) && (!to_sn || link != nullptr)) return drop(NdpDrop::kNdpBadFormat);
    if (!addr_equal(target, local.ip.bytes)) return drop(NdpDrop::kNdpNotForUs);
    return {NdpClass::kAnswerLocally, NdpDrop::kCount, type, plen, link};
  }
  // NA.
  if (addr_unspecified(src)) return drop(NdpDrop::kIp6BadSource);
  if (to_sn) return drop(NdpDrop::kIcmp6NotForUs);
  if (to_all && (msg[4] & kNaSolicited) != 0) return drop(NdpDrop::kNdpBadFormat);
  // Another node advertises our address (RFC 4862 5.4.4: a duplicate): counted, and the control
  // thread defends it.
  if (addr_equal(target, local.ip.bytes))
    return {NdpClass::kToControl, NdpDrop::kNdpAddressConflict, type, plen, link};
  if (src_ours) return drop(NdpDrop::kIp6BadSource);
  if (link == nullptr) return drop(NdpDrop::kNdpNoLinkAddress);
  return {NdpClass::kToControl, NdpDrop::kCount, type, plen, link};
}

// Only fields the reply needs survive; RX offload flags must not leak into TX. Attachment flags
// stay, they tell rte_pktmbuf_free how to release the buffer.
inline void reset_offloads(rte_mbuf* m) {
  m->ol_flags &= (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT);
}

bool answer_echo(rte_mbuf* m, const Verdict& v, const LocalAddress6& local, NdpCounters* c) {
  // Drop Ethernet padding (and anything past the datagram) first: nothing is modified yet if the
  // chain does not allow it.
  const uint32_t wanted = kIcmpAt + v.icmp_len;
  if (rte_pktmbuf_pkt_len(m) > wanted &&
      rte_pktmbuf_trim(m, rte_pktmbuf_pkt_len(m) - wanted) != 0) {
    count(c, NdpDrop::kReplyFailed);
    return false;
  }
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(p + kEthLen);
  eth->dst_addr = eth->src_addr;
  std::memcpy(eth->src_addr.addr_bytes, local.mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  // Swapping the addresses leaves the pseudo-header's sum as it was.
  std::memcpy(ip->dst_addr, ip->src_addr, 16);
  std::memcpy(ip->src_addr, local.ip.bytes.data(), 16);
  ip->hop_limits = kEchoHopLimit;
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for the 16-bit word holding type and code, every word
  // taken as stored, which keeps the sum independent of host byte order.
  uint8_t* icmp = p + kIcmpAt;
  uint16_t old_word = 0, new_word = 0, hc = 0;
  std::memcpy(&old_word, icmp, 2);
  icmp[0] = kEchoReply;
  std::memcpy(&new_word, icmp, 2);
  std::memcpy(&hc, icmp + 2, 2);
  uint32_t sum = static_cast<uint16_t>(~hc) + static_cast<uint16_t>(~old_word) + uint32_t{new_word};
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  const uint16_t cksum = static_cast<uint16_t>(~sum);
  std::memcpy(icmp + 2, &cksum, 2);
  reset_offloads(m);
  m->l2_len = kEthLen;
  m->l3_len = kIp6Len;
  if (c != nullptr) ++c->echo_replies;
  return true;
}

bool answer_ns(rte_mbuf* m, const Verdict& v, const LocalAddress6& local, NdpCounters* c,
               NdpPeer* peer) {
  // The NA is written over the NS from the first byte: one segment, room for 86 bytes.
  if (m->nb_segs != 1 ||
      (rte_pktmbuf_data_len(m) < kNaFrameLen &&
       rte_pktmbuf_append(m, static_cast<uint16_t>(kNaFrameLen - rte_pktmbuf_data_len(m))) ==
           nullptr)) {
    count(c, NdpDrop::kReplyFailed);
    return false;
  }
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(p + kEthLen);
  const bool dad = addr_unspecified(ip->src_addr);
  // Everything the NA needs from the NS, copied before it is overwritten.
  uint8_t to_mac[RTE_ETHER_ADDR_LEN];
  Addr to_ip;
  if (dad) {
    // RFC 4861 7.2.4: a solicitation from :: is answered to all-nodes, Solicited clear.
    to_ip = kAllNodes;
    const config::MacAddress all = ipv6_multicast_mac(config::Ipv6Address{kAllNodes});
    std::memcpy(to_mac, all.bytes.data(), RTE_ETHER_ADDR_LEN);
  } else {
    std::memcpy(to_ip.data(), ip->src_addr, 16);
    std::memcpy(to_mac, v.link != nullptr ? v.link : p + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
  }
  if (peer != nullptr && !dad && v.link != nullptr) {
    std::memcpy(peer->ip.bytes.data(), to_ip.data(), 16);
    std::memcpy(peer->mac.bytes.data(), v.link, RTE_ETHER_ADDR_LEN);
    peer->port_id = m->port;
  }
  if (rte_pktmbuf_data_len(m) > kNaFrameLen)
    rte_pktmbuf_trim(m, rte_pktmbuf_data_len(m) - kNaFrameLen);

  std::memcpy(p, to_mac, RTE_ETHER_ADDR_LEN);
  std::memcpy(p + RTE_ETHER_ADDR_LEN, local.mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  const uint16_t ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
  std::memcpy(p + 12, &ether_type, 2);
  ip->vtc_flow = rte_cpu_to_be_32(kIp6VersionFlow);
  ip->payload_len = rte_cpu_to_be_16(kNaLen);
  ip->proto = kProtoIcmp6;
  ip->hop_limits = kNdHopLimit;
  std::memcpy(ip->src_addr, local.ip.bytes.data(), 16);
  std::memcpy(ip->dst_addr, to_ip.data(), 16);
  uint8_t* na = p + kIcmpAt;
  std::memset(na, 0, kNaLen);
  na[0] = kNeighborAdvertisement;
  na[4] = dad ? kNaOverride : static_cast<uint8_t>(kNaSolicited | kNaOverride);
  std::memcpy(na + 8, local.ip.bytes.data(), 16);
  na[kNdMsgLen] = kOptTargetLinkAddress;
  na[kNdMsgLen + 1] = 1;  // in units of 8 bytes
  std::memcpy(na + kNdMsgLen + 2, local.mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  const uint16_t sum =
      add_sums(pseudo_header_sum(ip->src_addr, ip->dst_addr, kNaLen), rte_raw_cksum(na, kNaLen));
  const uint16_t cksum = static_cast<uint16_t>(~sum);
  std::memcpy(na + 2, &cksum, 2);
  reset_offloads(m);
  m->l2_len = kEthLen;
  m->l3_len = kIp6Len;
  if (c != nullptr) ++c->na_sent;
  return true;
}

}  // namespace

std::string_view ndp_drop_name(NdpDrop reason) {
  switch (reason) {
#define ROCEDP_X(name, str) \
  case NdpDrop::name:       \
    return str;
    ROCEDP_NDP_DROPS(ROCEDP_X)
#undef ROCEDP_X
    case NdpDrop::kCount:
      break;
  }
  return "unknown";
}

config::Ipv6Address solicited_node_group(const config::Ipv6Address& ip) {
  config::Ipv6Address g{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0}};
  std::memcpy(g.bytes.data() + 13, ip.bytes.data() + 13, 3);
  return g;
}

config::MacAddress ipv6_multicast_mac(const config::Ipv6Address& group) {
  config::MacAddress mac{{0x33, 0x33, 0, 0, 0, 0}};
  std::memcpy(mac.bytes.data() + 2, group.bytes.data() + 12, 4);
  return mac;
}

NdpClass classify_ndp(const rte_mbuf* m, const LocalAddress6& local, NdpCounters* c) {
  if (rte_pktmbuf_data_len(m) < kEthLen || rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type !=
                                               rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6))
    return NdpClass::kNotNdp;
  const Verdict v = check(m, local);
  if (v.reason != NdpDrop::kCount) count(c, v.reason);  // a drop, or a conflict to defend
  if (v.cls == NdpClass::kToControl && c != nullptr) ++c->to_control;
  return v.cls;
}

bool answer_ndp(rte_mbuf* m, const LocalAddress6& local, NdpCounters* c, NdpPeer* peer) {
  if (peer != nullptr) *peer = NdpPeer{};
  if (rte_pktmbuf_data_len(m) < kEthLen || rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type !=
                                               rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6)) {
    count(c, NdpDrop::kReplyFailed);
    return false;
  }
  const Verdict v = check(m, local);
  if (v.cls != NdpClass::kAnswerLocally) {
    count(c, v.cls == NdpClass::kDrop ? v.reason : NdpDrop::kReplyFailed);
    return false;
  }
  if (v.type == kEchoRequest) return answer_echo(m, v, local, c);
  return answer_ns(m, v, local, c, peer);
}

bool extract_ndp_peer(const rte_mbuf* m, const LocalAddress6& local, NdpPeer* peer) {
  if (rte_pktmbuf_data_len(m) < kEthLen || rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type !=
                                               rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6))
    return false;
  const Verdict v = check(m, local);
  if (v.cls != NdpClass::kToControl) return false;
  // A conflict's claimant is its target link-layer address, or else the frame's source MAC.
  peer->conflict = v.reason == NdpDrop::kNdpAddressConflict;
  const uint8_t* mac =
      v.link != nullptr ? v.link : rte_pktmbuf_mtod_offset(m, const uint8_t*, RTE_ETHER_ADDR_LEN);
  std::memcpy(peer->ip.bytes.data(), rte_pktmbuf_mtod_offset(m, const uint8_t*, kIcmpAt + 8), 16);
  std::memcpy(peer->mac.bytes.data(), mac, RTE_ETHER_ADDR_LEN);
  peer->port_id = m->port;
  peer->override_flag =
      (*rte_pktmbuf_mtod_offset(m, const uint8_t*, kIcmpAt + 4) & kNaOverride) != 0;
  return true;
}

namespace {
// An NS or NA of ours with one link-layer option carrying our MAC (RFC 4861 4.3, 4.4, 4.6.1),
// hop limit 255, checksum computed; null if the pool is empty.
rte_mbuf* build_nd(rte_mempool* pool, const LocalAddress6& local, const config::Ipv6Address& dst,
                   const config::MacAddress& dst_mac, uint8_t type, uint8_t flags,
                   const config::Ipv6Address& target, uint8_t option) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  constexpr uint32_t kLen = kNdMsgLen + kLinkOptLen;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kIcmpAt + kLen));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memset(p, 0, kIcmpAt + kLen);
  std::memcpy(p, dst_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  std::memcpy(p + RTE_ETHER_ADDR_LEN, local.mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  const uint16_t ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
  std::memcpy(p + 12, &ether_type, 2);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(p + kEthLen);
  ip->vtc_flow = rte_cpu_to_be_32(kIp6VersionFlow);
  ip->payload_len = rte_cpu_to_be_16(kLen);
  ip->proto = kProtoIcmp6;
  ip->hop_limits = kNdHopLimit;
  std::memcpy(ip->src_addr, local.ip.bytes.data(), 16);
  std::memcpy(ip->dst_addr, dst.bytes.data(), 16);
  uint8_t* nd = p + kIcmpAt;
  nd[0] = type;
  nd[4] = flags;
  std::memcpy(nd + 8, target.bytes.data(), 16);
  nd[kNdMsgLen] = option;
  nd[kNdMsgLen + 1] = 1;  // in units of 8 bytes
  std::memcpy(nd + kNdMsgLen + 2, local.mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  const uint16_t sum =
      add_sums(pseudo_header_sum(ip->src_addr, ip->dst_addr, kLen), rte_raw_cksum(nd, kLen));
  const uint16_t cksum = static_cast<uint16_t>(~sum);
  std::memcpy(nd + 2, &cksum, 2);
  return m;
}
}  // namespace

rte_mbuf* build_neighbor_solicitation(rte_mempool* pool, const LocalAddress6& local,
                                      const config::Ipv6Address& target) {
  const config::Ipv6Address group = solicited_node_group(target);
  return build_nd(pool, local, group, ipv6_multicast_mac(group), kNeighborSolicitation, 0, target,
                  kOptSourceLinkAddress);
}

rte_mbuf* build_unsolicited_advertisement(rte_mempool* pool, const LocalAddress6& local) {
  const config::Ipv6Address all_nodes{kAllNodes};
  return build_nd(pool, local, all_nodes, ipv6_multicast_mac(all_nodes), kNeighborAdvertisement,
                  kNaOverride, local.ip, kOptTargetLinkAddress);
}

}  // namespace rocedp::dataplane
