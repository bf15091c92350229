#pragma once
// ARP and ICMP echo on the data path (DESIGN.md §4).
//
// Split: an ARP request for our address and an ICMP echo request to our address are answered on
// the RX core that received them, in place in the received mbuf (no allocation, no lock, no
// syscall). ARP frames we can learn from (replies, gratuitous announcements) go to the control
// thread, which owns the neighbour table (control/neighbour_table.hpp) and pushes changes to the
// cores' NeighbourCache (dataplane/neighbour_cache.hpp).
//
// Typical use on an RX core:
//   switch (classify_arp_icmp(m, addr, &counters)) {
//     case ArpIcmpClass::kAnswerLocally: if (!answer_locally(m, addr, &counters, &peer)) free(m);
//                                        else tx(m); break;   // forward `peer` to control if valid
//     case ArpIcmpClass::kToControl:     hand m to the control path; break;
//     case ArpIcmpClass::kDrop:          rte_pktmbuf_free(m); break;   // already counted
//     case ArpIcmpClass::kNotArpIcmp:    RoCEv2 / other classifiers decide; break;
//   }
// Every function here may run on any thread but touches only its arguments; the counters are
// single-writer (one ArpIcmpCounters per core).

#include <array>
#include <cstdint>
#include <string_view>

#include "config/config.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace rocedp::dataplane {

// One address of ours: the port's MAC, IPv4 address and prefix, as the caller knows them
// (pmd::Port::mac()/address()/prefix_len()). IPv4 in host byte order like config::Ipv4Address.
struct LocalAddress {
  config::MacAddress mac;
  config::Ipv4Address ip;
  uint8_t prefix_len = 24;

  // True if `peer` is on our subnet (directly reachable by ARP).
  bool on_link(config::Ipv4Address peer) const {
    const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
    return (peer.value & mask) == (ip.value & mask);
  }
  // True if `addr` is our subnet's directed broadcast address (e.g. 198.18.0.255 for /24). A /31
  // has none (RFC 3021 §2.2: both addresses are hosts), nor has a /32.
  bool is_subnet_broadcast(uint32_t addr) const {
    if (prefix_len > 30) return false;
    const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
    return addr == ((ip.value & mask) | ~mask);
  }
};

// What the dispatcher should do with a received frame.
enum class ArpIcmpClass : uint8_t {
  kNotArpIcmp,     // neither ARP nor ICMP: other classifiers (RoCEv2, ...) decide
  kAnswerLocally,  // ARP request for our address, or valid ICMP echo request to us:
                   // answer_locally()
  kToControl,      // ARP reply / gratuitous ARP we may learn from, or one that claims our
                   // address (counted arp_address_conflict, defended): to the control thread
  kDrop,           // ARP or ICMP we will not answer (malformed or not for us): counted, free it
};

// Drop reasons, generated once (CONVENTIONS "errors as data").
#define ROCEDP_ARP_ICMP_DROPS(X)                                                                  \
  X(kShortFrame, "short_frame")      /* frame shorter than the headers it must hold */            \
  X(kArpBadFormat, "arp_bad_format") /* not Ethernet/IPv4 ARP (htype, ptype, hlen, plen) */       \
  X(kArpBadOpcode, "arp_bad_opcode") /* neither request nor reply */                              \
  X(kArpBadSender, "arp_bad_sender") /* sender MAC multicast/zero, sender IP invalid */           \
  X(kArpNotForUs, "arp_not_for_us")  /* request for another address, or another MAC */            \
  X(kArpAddressConflict,                                                                          \
    "arp_address_conflict") /* another station claims our IPv4 address (to control: defended) */  \
  X(kLoopedBack, "looped_back")    /* our own frame seen again on receive */                      \
  X(kIpBadHeader, "ip_bad_header") /* version != 4 or IHL < 5 */                                  \
  X(kIpBadLength, "ip_bad_length") /* total length vs IHL vs frame inconsistent */                \
  X(kIpBadChecksum, "ip_bad_checksum")                                                            \
  X(kIpFragment, "ip_fragment") /* we do not reassemble ICMP */                                   \
  X(kIpBadSource,                                                                                 \
    "ip_bad_source") /* source zero/multicast/broadcast/ours, or L2 source multicast */           \
  X(kIcmpNotForUs, "icmp_not_for_us") /* destination IP or MAC not ours (incl. broadcast ping) */ \
  X(kIcmpBadChecksum, "icmp_bad_checksum")                                                        \
  X(kIcmpUnsupported, "icmp_unsupported") /* any ICMP message other than echo request code 0 */   \
  X(kReplyFailed, "reply_failed")         /* mbuf layout did not allow the in-place rewrite */

enum class ArpIcmpDrop : uint8_t {
#define ROCEDP_X(name, str) name,
  ROCEDP_ARP_ICMP_DROPS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};
inline constexpr size_t kArpIcmpDropCount = static_cast<size_t>(ArpIcmpDrop::kCount);

// Stable lower_snake_case name of a reason, for telemetry (/rocedp/drops) and logs.
std::string_view arp_icmp_drop_name(ArpIcmpDrop reason);

// Per-core counters; written only by the core that owns them.
struct ArpIcmpCounters {
  uint64_t arp_replies = 0;   // ARP requests for us answered
  uint64_t echo_replies = 0;  // ICMP echo requests answered
  uint64_t to_control = 0;    // ARP frames classified kToControl
  std::array<uint64_t, kArpIcmpDropCount> drops{};

  uint64_t drop(ArpIcmpDrop r) const { return drops[static_cast<size_t>(r)]; }
  uint64_t total_drops() const {
    uint64_t t = 0;
    for (uint64_t d : drops) t += d;
    return t;
  }
};

// A peer seen in an ARP frame: what the control thread may learn (RFC 826 "merge"/"add").
struct ArpPeer {
  config::Ipv4Address ip;  // 0 = nothing to learn (e.g. an ARP probe, RFC 5227)
  config::MacAddress mac;
  bool targets_us = false;  // the frame's target protocol address is ours: RFC 826 may add it
  bool conflict = false;    // the sender claims our address (ip is ours): defend it, learn nothing
};

// Classifies a received frame arriving on the port whose address is `local`. Validates fully
// (lengths, IP and ICMP checksums) so that kAnswerLocally means "answerable". Reads only bytes
// inside the frame. Increments counters->drops for kDrop and counters->to_control for kToControl
// (counters may be null). Frames with a VLAN tag are kNotArpIcmp.
ArpIcmpClass classify_arp_icmp(const rte_mbuf* m, const LocalAddress& local,
                               ArpIcmpCounters* counters);

// Turns a frame classified kAnswerLocally into its reply, in place, ready for tx_burst:
//  - ARP request -> ARP reply (RFC 826): our MAC as sender, requester as target, unicast to it.
//  - ICMP echo request -> echo reply (RFC 792): MACs and IPs swapped, type 0, TTL 64, IP options
//    dropped (RFC 1122 3.2.2.6 makes reflecting them a SHOULD), Ethernet padding trimmed, IP
//    checksum recomputed, ICMP checksum updated incrementally (RFC 1624 eqn. 3).
// Re-checks the layout it relies on, so a misrouted frame is never read past its end. Returns
// false (and counts kReplyFailed or the reason) if the frame cannot be answered: the caller frees
// it. If `peer` is not null it receives the requester of an ARP request (ip 0 otherwise), which the
// control thread may learn with targets_us semantics (RFC 826: the target adds the sender).
bool answer_locally(rte_mbuf* m, const LocalAddress& local, ArpIcmpCounters* counters,
                    ArpPeer* peer);

// For frames classified kToControl (on the control thread): the sender to learn from. Returns
// false if the frame is not a learnable ARP frame for this port (the caller just frees it).
bool extract_arp_peer(const rte_mbuf* m, const LocalAddress& local, ArpPeer* peer);

// Minimum Ethernet frame without FCS; frames we build are padded with zeros to it.
inline constexpr uint16_t kEthMinFrame = 60;

// Builds a broadcast ARP request "who has `target`? tell `local.ip`" into a fresh mbuf from
// `pool`. Returns null if the pool is empty. Control path (allocates).
rte_mbuf* build_arp_request(rte_mempool* pool, const LocalAddress& local,
                            config::Ipv4Address target);

// Builds a gratuitous ARP (ARP Announcement, RFC 5227 §2.3): a broadcast request whose sender
// and target protocol addresses are both ours and whose target hardware address is zero.
rte_mbuf* build_gratuitous_arp(rte_mempool* pool, const LocalAddress& local);

}  // namespace rocedp::dataplane
