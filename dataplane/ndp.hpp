#pragma once
// IPv6 neighbour discovery (RFC 4861) and ICMPv6 echo (RFC 4443) on the data path: the IPv6
// counterpart of dataplane/arp_icmp.
//
// Split, as for ARP: a Neighbor Solicitation for our address and an Echo Request to our address
// are answered on the RX core that received them, in place in the received mbuf (no allocation,
// no lock, no syscall). The solicitor of an answered NS (its source address and source
// link-layer address) rides to the control thread on the next stats snapshot, like an ARP
// requester. Neighbor Advertisements go to the control thread, which owns the neighbour table
// (control/neighbour_table.hpp, its IPv6 part) and learns them there. Every other ICMPv6 frame is
// dropped and counted by reason; an IPv6 frame that is not ICMPv6 (UDP, RoCEv2 over IPv6, ...)
// is kNotNdp and left to the other classifiers.
//
// Typical use on an RX core (only for a port with an IPv6 address):
//   switch (classify_ndp(m, local6, &counters)) {
//     case NdpClass::kAnswerLocally: if (answer_ndp(m, local6, &counters, &peer)) tx(m);
//                                    else free(m); break;  // learn `peer` if its ip is set
//     case NdpClass::kToControl:     hand m to the control path; break;
//     case NdpClass::kDrop:          rte_pktmbuf_free(m); break;   // already counted
//     case NdpClass::kNotNdp:        other classifiers decide; break;
//   }
// Every function here may run on any thread but touches only its arguments; the counters are
// single-writer (one NdpCounters per core).

#include <array>
#include <cstdint>
#include <string_view>

#include "config/config.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace rocedp::dataplane {

// Our IPv6 identity on a port: its MAC and its one IPv6 address (config ports[].ipv6).
struct LocalAddress6 {
  config::MacAddress mac;
  config::Ipv6Address ip;
};

// What the dispatcher should do with a received IPv6 frame.
enum class NdpClass : uint8_t {
  kNotNdp,         // not ICMPv6 (or not IPv6): other classifiers (RoCEv2, ...) decide
  kAnswerLocally,  // NS for our address, or Echo Request to it: answer_ndp()
  kToControl,      // Neighbor Advertisement with a target link-layer address: control learns it;
                   // or one for our address (counted ndp_address_conflict): control defends it
  kDrop,           // ICMPv6 we do not take (malformed, not for us, unsupported): counted, free it
};

// Drop reasons, generated once (CONVENTIONS "errors as data"). The names are distinct from the
// ARP/ICMP ones: /rocedp/drops adds counters of the same name together.
#define ROCEDP_NDP_DROPS(X)                                                                       \
  X(kShortFrame, "ip6_short_frame")     /* headers (or an NS/NA) not inside the first segment */  \
  X(kIp6BadHeader, "ip6_bad_header")    /* IP version is not 6 */                                 \
  X(kIp6BadLength, "ip6_bad_length")    /* payload length vs frame inconsistent, or too short */  \
  X(kIp6BadSource, "ip6_bad_source")    /* source multicast/loopback/ours/unspecified where       \
                                           not allowed, or L2 source multicast */                 \
  X(kLoopedBack, "ip6_looped_back")     /* our own frame seen again on receive */                 \
  X(kIcmp6NotForUs, "icmp6_not_for_us") /* destination not our address, solicited-node group      \
                                           or all-nodes (with the matching MAC) */                \
  X(kIcmp6BadChecksum, "icmp6_bad_checksum")                                                      \
  X(kIcmp6Unsupported, "icmp6_unsupported")      /* RS, RA, redirects, errors, replies, echo code \
                                                    != 0, echo to a group */                      \
  X(kNdpBadHopLimit, "ndp_bad_hop_limit")        /* NS/NA with hop limit != 255 (RFC 4861 7.1) */ \
  X(kNdpBadFormat, "ndp_bad_format")             /* code, length, target, options, or a DAD NS    \
                                                    (RFC 4861 7.1.1/7.1.2) invalid */             \
  X(kNdpBadLinkAddress, "ndp_bad_link_address")  /* link-layer option: group or zero MAC */       \
  X(kNdpNotForUs, "ndp_not_for_us")              /* NS for another target */                      \
  X(kNdpAddressConflict, "ndp_address_conflict") /* an NA claims our address (defended) */        \
  X(kNdpNoLinkAddress, "ndp_no_link_address")    /* NA without target link-layer address */       \
  X(kReplyFailed, "ndp_reply_failed")            /* mbuf layout did not allow the in-place reply */

enum class NdpDrop : uint8_t {
#define ROCEDP_X(name, str) name,
  ROCEDP_NDP_DROPS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};
inline constexpr size_t kNdpDropCount = static_cast<size_t>(NdpDrop::kCount);

// Stable lower_snake_case name of a reason, for telemetry (/rocedp/drops) and logs.
std::string_view ndp_drop_name(NdpDrop reason);

// Per-core counters; written only by the core that owns them.
struct NdpCounters {
  uint64_t na_sent = 0;       // Neighbor Solicitations for us answered
  uint64_t echo_replies = 0;  // ICMPv6 echo requests answered
  uint64_t to_control = 0;    // Neighbor Advertisements classified kToControl
  std::array<uint64_t, kNdpDropCount> drops{};

  uint64_t drop(NdpDrop r) const { return drops[static_cast<size_t>(r)]; }
  uint64_t total_drops() const {
    uint64_t t = 0;
    for (uint64_t d : drops) t += d;
    return t;
  }
};

// A neighbour seen in an NS (its source and source link-layer address) or an NA (its target and
// target link-layer address): what the control thread may learn.
struct NdpPeer {
  config::Ipv6Address ip;  // all zeros: nothing to learn (a DAD probe, an NS without SLLA)
  config::MacAddress mac;
  uint16_t port_id = 0;  // the port it arrived on
  // An NA's Override flag (RFC 4861 4.4): clear, it may complete a resolution but must not
  // replace the address of an entry we have (7.2.5: anycast and proxy answers set it clear).
  bool override_flag = true;
  bool conflict = false;  // an NA for our own address (ip is ours): defend it, learn nothing
};

// Classifies a received frame arriving on the port whose IPv6 identity is `local`. Validates fully
// (lengths, ICMPv6 checksum over the pseudo-header, RFC 4861 7.1 rules) so that kAnswerLocally
// means "answerable". Reads only bytes inside the frame. Increments counters->drops for kDrop and
// counters->to_control for kToControl (counters may be null). IPv6 frames whose next header is
// not ICMPv6 (58) are kNotNdp and not counted; so are frames that are not IPv6.
NdpClass classify_ndp(const rte_mbuf* m, const LocalAddress6& local, NdpCounters* counters);

// Turns a frame classified kAnswerLocally into its reply, in place, ready for tx_burst:
//  - NS -> NA (RFC 4861 7.2.4): target our address, flags Solicited and Override, a target
//    link-layer address option with our MAC, to the solicitor's address and MAC (its source
//    link-layer option if present, else its Ethernet source); for a DAD probe (source ::) Override
//    only, to ff02::1 and 33:33:00:00:00:01. Hop limit 255, checksum computed afresh.
//  - Echo Request -> Echo Reply (RFC 4443 4.2): MACs and addresses swapped, type 129, hop limit
//    64, Ethernet padding trimmed, checksum updated incrementally (RFC 1624 eqn. 3).
// Re-checks the layout it relies on. Returns false (and counts kReplyFailed or the reason) if the
// frame cannot be answered: the caller frees it. If `peer` is not null it receives the solicitor
// of an NS when the NS carried a source link-layer address (RFC 4861 7.2.3: the target creates or
// updates its entry), otherwise an all-zero ip.
bool answer_ndp(rte_mbuf* m, const LocalAddress6& local, NdpCounters* counters, NdpPeer* peer);

// For frames classified kToControl (on the control thread): the advertised target and its MAC.
// False if the frame is not a learnable NA for this port (the caller just frees it).
bool extract_ndp_peer(const rte_mbuf* m, const LocalAddress6& local, NdpPeer* peer);

// Builds a Neighbor Solicitation for `target` (RFC 4861 4.3, 7.2.2): from our address with our
// source link-layer address option, to target's solicited-node group ff02::1:ffXX:XXXX and MAC
// 33:33:ff:XX:XX:XX, hop limit 255. Returns null if the pool is empty. Control path (allocates).
rte_mbuf* build_neighbor_solicitation(rte_mempool* pool, const LocalAddress6& local,
                                      const config::Ipv6Address& target);

// Builds an unsolicited Neighbor Advertisement of our address (RFC 4861 7.2.6, the counterpart
// of a gratuitous ARP): to all nodes (ff02::1, 33:33:00:00:00:01), flags Override alone (not
// Solicited, not Router), target our address with a target link-layer address option carrying our
// MAC, hop limit 255, so neighbours that cached another MAC for it take ours at once. Returns null
// if the pool is empty. Control path (allocates).
rte_mbuf* build_unsolicited_advertisement(rte_mempool* pool, const LocalAddress6& local);

// ff02::1:ffXX:XXXX, the solicited-node group of `ip` (RFC 4291 2.7.1).
config::Ipv6Address solicited_node_group(const config::Ipv6Address& ip);
// 33:33 and the last four bytes of the IPv6 multicast address `group` (RFC 2464 7).
config::MacAddress ipv6_multicast_mac(const config::Ipv6Address& group);

}  // namespace rocedp::dataplane
