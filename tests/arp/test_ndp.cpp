// IPv6 neighbour discovery and ICMPv6 echo answered on the data path (dataplane/ndp): NS -> NA
// bytes, DAD probes, echo, what goes to control, every drop reason, the NS built for resolution.
// One EAL per process (--no-huge, unique file prefix); frames are written byte by byte here and
// the ICMPv6 checksums (pseudo-header included) verified by an independent implementation.

#include "dataplane/ndp.hpp"

#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "dataplane/arp_icmp.hpp"
#include "tests/arp/frame_util.hpp"
#include "tests/common/eal_session.hpp"

namespace rocedp::dataplane {
namespace {

using namespace test::frames;  // Bytes, put16/get16 ..., inet_checksum, Mbuf, pool()
using Addr = config::Ipv6Address;

constexpr unsigned kPoolSize = 255;
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new test::EalSession(
    {.tag = "ndp-test", .memory_mb = 64, .mbufs = kPoolSize, .log_level = pmd::LogLevel::kError}));

// ---- our address and a peer ----
const config::MacAddress kOurMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
const config::MacAddress kPeerMac{{0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0x02}};
const config::MacAddress kOtherMac{{0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0x09}};
const Addr kOurIp{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0x20}};
const Addr kPeerIp{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}};
const Addr kPeerLinkLocal{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xff, 0xfe, 0xcc, 0xdd, 2}};
const Addr kUnspecified{};
// Written out, not computed by the code under test.
const Addr kOurGroup{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xab, 0xcd, 0x20}};
const config::MacAddress kOurGroupMac{{0x33, 0x33, 0xff, 0xab, 0xcd, 0x20}};
const Addr kAllNodes{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
const config::MacAddress kAllNodesMac{{0x33, 0x33, 0, 0, 0, 1}};
const LocalAddress6 kLocal{kOurMac, kOurIp};

// RFC 1071 over the ICMPv6 pseudo-header (RFC 8200 8.1: source, destination, upper-layer length
// as 32 bits, three zero bytes, next header 58) and the message at `icmp`. 0 when the message with
// its checksum is valid.
uint16_t icmp6_checksum(const Bytes& f, size_t icmp, size_t len) {
  Bytes ph(f.begin() + 22, f.begin() + 54);  // IPv6 source and destination
  put32(ph, uint32_t(len));
  ph.insert(ph.end(), {0, 0, 0, 58});
  ph.insert(ph.end(), f.begin() + long(icmp), f.begin() + long(icmp + len));
  return inet_checksum(ph, 0, ph.size());
}

// ---- frames ----

struct Spec {
  config::MacAddress eth_dst = kOurGroupMac;
  config::MacAddress eth_src = kPeerMac;
  Addr src = kPeerIp;
  Addr dst = kOurGroup;
  uint8_t version = 6;
  uint8_t next_header = 58;
  uint8_t hop_limit = 255;
  uint8_t type = 135;
  uint8_t code = 0;
  Bytes body;  // after type, code, checksum
  bool break_checksum = false;
  int payload_len_delta = 0;  // added to the true payload length
  size_t pad_to = 0;          // Ethernet padding up to this frame length
};

Bytes frame(const Spec& s) {
  Bytes b;
  put_eth(b, s.eth_dst, s.eth_src, 0x86DD);
  b.push_back(uint8_t(s.version << 4));
  b.insert(b.end(), {0, 0, 0});
  const size_t plen = 4 + s.body.size();
  put16(b, uint16_t(int(plen) + s.payload_len_delta));
  b.push_back(s.next_header);
  b.push_back(s.hop_limit);
  put_ip6(b, s.src);
  put_ip6(b, s.dst);
  b.push_back(s.type);
  b.push_back(s.code);
  put16(b, 0);
  b.insert(b.end(), s.body.begin(), s.body.end());
  uint16_t ck = icmp6_checksum(b, 54, plen);
  if (s.break_checksum) ck ^= 0x0100;
  b[56] = uint8_t(ck >> 8);
  b[57] = uint8_t(ck);
  while (b.size() < s.pad_to) b.push_back(0);
  return b;
}

// `s` with one field set, or changed by a function: one case of a table in one expression.
template <class T, class V>
Spec with(Spec s, T Spec::*field, const V& value) {
  s.*field = T(value);
  return s;
}
template <class Change>
Spec with(Spec s, Change change) {
  change(s);
  return s;
}
// `s` sent to another Ethernet and IPv6 destination.
Spec addressed(Spec s, const config::MacAddress& eth_dst, const Addr& dst) {
  s.eth_dst = eth_dst;
  s.dst = dst;
  return s;
}

// NS/NA body: flags (first byte), three reserved bytes, target, options.
Bytes nd_body(uint8_t flags, const Addr& target, const Bytes& options = {}) {
  Bytes b{flags, 0, 0, 0};
  put_ip6(b, target);
  b.insert(b.end(), options.begin(), options.end());
  return b;
}
Bytes link_option(uint8_t type, const config::MacAddress& mac) {
  Bytes b{type, 1};
  put_mac(b, mac);
  return b;
}
// An NS from the peer to our solicited-node group, with its source link-layer address.
Spec ns(const Addr& target = kOurIp) {
  Spec s;
  s.body = nd_body(0, target, link_option(1, kPeerMac));
  return s;
}
// A DAD probe (RFC 4862 5.4.2): source ::, to our solicited-node group, no SLLA.
Spec dad_probe() {
  Spec s = with(ns(), &Spec::src, kUnspecified);
  s.body = nd_body(0, kOurIp);
  return s;
}
// An NA from the peer to our address.
Spec na(uint8_t flags, const Addr& target, const Bytes& options) {
  Spec s = addressed(with(Spec{}, &Spec::type, 136), kOurMac, kOurIp);
  s.body = nd_body(flags, target, options);
  return s;
}
Spec solicited_na() {
  return na(0x60, kPeerIp, link_option(2, kPeerMac));
}
// An echo request from the peer to our address.
Spec echo(size_t payload = 56) {
  Spec s = addressed(with(Spec{}, &Spec::type, 128), kOurMac, kOurIp);
  s.hop_limit = 64;
  s.body = {0xBE, 0xEF, 0, 7};  // identifier, sequence
  for (size_t i = 0; i < payload; ++i) s.body.push_back(uint8_t(i * 7 + 3));
  return s;
}

// What answering one frame did: the frame afterwards, the counters, the peer to learn.
struct Answer {
  Bytes reply;
  NdpCounters c;
  NdpPeer peer;
  uint64_t ol_flags = 0;
};
// Classifies `in` (which must be answered here) and answers it in place.
Answer answer(const Bytes& in) {
  Answer a;
  Mbuf f(in);
  EXPECT_EQ(classify_ndp(f.m, kLocal, &a.c), NdpClass::kAnswerLocally);
  EXPECT_TRUE(answer_ndp(f.m, kLocal, &a.c, &a.peer));
  a.reply = f.bytes();
  a.ol_flags = f.m->ol_flags;
  return a;
}

// The Ethernet and IPv6 headers of an ICMPv6 message we sent: from our MAC and address, traffic
// class and flow label 0, nothing after the message, and its type, code and checksum.
void expect_icmp6(const Bytes& r, const config::MacAddress& eth_dst, const Addr& ip_dst,
                  uint8_t hop_limit, uint8_t type, size_t plen) {
  ASSERT_EQ(r.size(), 54 + plen);
  EXPECT_EQ(get_mac(r, 0), eth_dst);
  EXPECT_EQ(get_mac(r, 6), kOurMac);
  EXPECT_EQ(get16(r, 12), 0x86DD);
  EXPECT_EQ(get32(r, 14), 0x60000000u) << "version 6, traffic class 0, flow label 0";
  EXPECT_EQ(get16(r, 18), plen) << "payload length";
  EXPECT_EQ(r[20], 58) << "next header ICMPv6";
  EXPECT_EQ(r[21], hop_limit);
  EXPECT_EQ(get_ip6(r, 22), kOurIp);
  EXPECT_EQ(get_ip6(r, 38), ip_dst);
  EXPECT_EQ(r[54], type);
  EXPECT_EQ(r[55], 0) << "code";
  EXPECT_EQ(icmp6_checksum(r, 54, plen), 0) << "ICMPv6 checksum over the pseudo-header";
}

// Every field of an NS (135) or NA (136) we sent, checked against RFC 4861 4.3, 4.4 and 7.2.4:
// hop limit 255 (7.1.2), 24 bytes and one link-layer address option (source for an NS, target
// for an NA) with our MAC.
void expect_nd(const Bytes& r, const config::MacAddress& eth_dst, const Addr& ip_dst, uint8_t type,
               uint8_t flags, const Addr& target) {
  ASSERT_NO_FATAL_FAILURE(expect_icmp6(r, eth_dst, ip_dst, 255, type, 32));
  EXPECT_EQ(r[58], flags) << "R, S, O flags";
  EXPECT_EQ(get32(r, 58) & 0xFFFFFF, 0u) << "reserved";
  EXPECT_EQ(get_ip6(r, 62), target);
  EXPECT_EQ(r[78], type == 135 ? 1 : 2) << "source/target link-layer address option";
  EXPECT_EQ(r[79], 1) << "its length in units of 8 bytes";
  EXPECT_EQ(get_mac(r, 80), kOurMac);
}
// An NA of ours: its target is our address.
void expect_na(const Bytes& r, const config::MacAddress& eth_dst, const Addr& ip_dst,
               uint8_t flags) {
  expect_nd(r, eth_dst, ip_dst, 136, flags, kOurIp);
}

// ---- Neighbor Solicitation ----

TEST(NdpTest, SolicitationToOurGroupBecomesSolicitedAdvertisementInPlace) {
  // Linux solicits from its link-local address as often as not.
  const Answer a = answer(frame(with(ns(), &Spec::src, kPeerLinkLocal)));
  expect_na(a.reply, kPeerMac, kPeerLinkLocal, 0x60);
  EXPECT_EQ(a.c.na_sent, 1u);
  EXPECT_EQ(a.c.total_drops(), 0u);
  EXPECT_EQ(a.peer.ip, kPeerLinkLocal) << "the solicitor is reported for learning (7.2.3)";
  EXPECT_EQ(a.peer.mac, kPeerMac);
  EXPECT_EQ(a.peer.port_id, kRxPort);
  EXPECT_EQ(a.ol_flags & ~(RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT), 0u);
}

TEST(NdpTest, UnicastSolicitationIsAnsweredToItsSourceLinkLayerAddress) {
  // A reachability probe (7.3.1): unicast to our MAC and address. The NA goes to the SLLA even
  // when the Ethernet source differs (a bridge that rewrites it, a proxy).
  Spec s = addressed(ns(), kOurMac, kOurIp);
  s.eth_src = kOtherMac;
  s.pad_to = 100;  // trailing bytes are cut
  const Answer a = answer(frame(s));
  expect_na(a.reply, kPeerMac, kPeerIp, 0x60);
  EXPECT_EQ(a.peer.ip, kPeerIp);
  EXPECT_EQ(a.peer.mac, kPeerMac);
}

TEST(NdpTest, SolicitationWithoutSourceLinkAddressIsAnsweredButNotLearned) {
  const Answer a =
      answer(frame(with(addressed(ns(), kOurMac, kOurIp), &Spec::body, nd_body(0, kOurIp))));
  expect_na(a.reply, kPeerMac, kPeerIp, 0x60);  // to the Ethernet source
  EXPECT_EQ(a.peer.ip, kUnspecified) << "no link-layer address, nothing to learn";
}

TEST(NdpTest, DadProbeIsAnsweredToAllNodesWithoutSolicited) {
  // RFC 4861 7.2.4: the answer to a DAD probe goes to all-nodes with Solicited clear (a duplicate
  // address, from the prober's view). The probe is 78 bytes: the NA needs 8 more, taken from the
  // mbuf's tailroom.
  const Answer a = answer(frame(dad_probe()));
  expect_na(a.reply, kAllNodesMac, kAllNodes, 0x20);
  EXPECT_EQ(a.peer.ip, kUnspecified);
  EXPECT_EQ(a.c.na_sent, 1u);
}

// ---- Echo ----

TEST(NdpTest, EchoRequestsOfManySizesAreAnswered) {
  for (size_t payload : {0, 1, 56, 1000, 1452}) {
    SCOPED_TRACE(payload);
    // Short ones carry Ethernet padding, which the reply drops.
    const Bytes in = frame(with(echo(payload), &Spec::pad_to, 64));
    const Answer a = answer(in);
    const size_t plen = 8 + payload;
    ASSERT_NO_FATAL_FAILURE(expect_icmp6(a.reply, kPeerMac, kPeerIp, 64, 129, plen))
        << "Echo Reply, hop limit 64";
    EXPECT_TRUE(std::equal(a.reply.begin() + 58, a.reply.end(), in.begin() + 58))
        << "identifier, sequence and data come back unchanged";
    EXPECT_EQ(a.c.echo_replies, 1u);
    EXPECT_EQ(a.peer.ip, kUnspecified);
  }
}

TEST(NdpTest, ChainedEchoWithOddSplitIsVerifiedAndAnswered) {
  const Bytes in = frame(echo(301));
  Mbuf f(in, 101);
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
  ASSERT_TRUE(answer_ndp(f.m, kLocal, &c, nullptr));
  const Bytes r = f.bytes();
  EXPECT_EQ(r[54], 129);
  EXPECT_EQ(icmp6_checksum(r, 54, 8 + 301), 0);

  Spec bad = echo(301);
  bad.break_checksum = true;
  Mbuf g(frame(bad), 101);
  EXPECT_EQ(classify_ndp(g.m, kLocal, &c), NdpClass::kDrop);
  EXPECT_EQ(c.drop(NdpDrop::kIcmp6BadChecksum), 1u);
}

// ---- to control ----

TEST(NdpTest, AdvertisementsGoToControlWithTheirTarget) {
  struct Case {
    const char* what;
    Spec s;
  };
  for (const Case& k :
       {Case{"solicited, to us", solicited_na()},
        Case{"unsolicited, to all-nodes",
             addressed(na(0x20, kPeerIp, link_option(2, kPeerMac)), kAllNodesMac, kAllNodes)},
        Case{"from a link-local source", with(solicited_na(), &Spec::src, kPeerLinkLocal)}}) {
    SCOPED_TRACE(k.what);
    Mbuf f(frame(k.s));
    NdpCounters c;
    ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kToControl);
    EXPECT_EQ(c.to_control, 1u);
    NdpPeer peer;
    ASSERT_TRUE(extract_ndp_peer(f.m, kLocal, &peer));
    EXPECT_EQ(peer.ip, kPeerIp) << "the target is what is learned, whatever the source";
    EXPECT_EQ(peer.mac, kPeerMac);
    EXPECT_EQ(peer.port_id, kRxPort);
    EXPECT_TRUE(peer.override_flag);
  }
  // Without the Override flag (an anycast or proxy answer): handed on, the flag with it.
  Mbuf f(frame(addressed(na(0x00, kPeerIp, link_option(2, kPeerMac)), kAllNodesMac, kAllNodes)));
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kToControl);
  NdpPeer peer;
  ASSERT_TRUE(extract_ndp_peer(f.m, kLocal, &peer));
  EXPECT_FALSE(peer.override_flag);
}

// RFC 4862 5.4.4: an NA for our own address is a duplicate. Counted and handed to the control
// thread, which defends the address (nothing is learned), whether it comes from another address or
// from ours (a node that holds it too), with or without a target link-layer address (the claimant
// is then the frame's source MAC).
TEST(NdpTest, AnAdvertisementOfOurAddressIsCountedAndGoesToControlToBeDefended) {
  const config::MacAddress claimant{{0x02, 0x66, 0x66, 0x66, 0x66, 0x66}};
  const Spec to_all =
      addressed(na(0x20, kOurIp, link_option(2, claimant)), kAllNodesMac, kAllNodes);
  struct Case {
    const char* what;
    Spec s;
    config::MacAddress mac;
  };
  for (const Case& k :
       {Case{"from another address", to_all, claimant},
        Case{"from our address", with(to_all, &Spec::src, kOurIp), claimant},
        Case{"to our address", na(0x20, kOurIp, link_option(2, claimant)), claimant},
        Case{"without a TLLA", addressed(na(0x20, kOurIp, {}), kAllNodesMac, kAllNodes),
             kPeerMac}}) {
    SCOPED_TRACE(k.what);
    Mbuf f(frame(k.s));
    NdpCounters c;
    ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kToControl);
    EXPECT_EQ(c.drop(NdpDrop::kNdpAddressConflict), 1u);
    EXPECT_EQ(c.to_control, 1u);
    NdpPeer peer;
    ASSERT_TRUE(extract_ndp_peer(f.m, kLocal, &peer));
    EXPECT_TRUE(peer.conflict);
    EXPECT_EQ(peer.ip, kOurIp);
    EXPECT_EQ(peer.mac, k.mac);
    EXPECT_FALSE(answer_ndp(f.m, kLocal, &c, &peer));
  }
  Mbuf f(frame(solicited_na()));
  NdpPeer peer;
  ASSERT_TRUE(extract_ndp_peer(f.m, kLocal, &peer));
  EXPECT_FALSE(peer.conflict);
}

TEST(NdpTest, ExtractRefusesWhatIsNotALearnableAdvertisement) {
  NdpPeer peer;
  Mbuf f(frame(ns()));
  EXPECT_FALSE(extract_ndp_peer(f.m, kLocal, &peer)) << "an NS is answered, not extracted";
  Mbuf g(frame(na(0x60, kPeerIp, {})));
  EXPECT_FALSE(extract_ndp_peer(g.m, kLocal, &peer)) << "no target link-layer address";
}

// ---- drops ----

TEST(NdpTest, FramesWeMustNotAnswerAreDroppedByReason) {
  struct Case {
    const char* what;
    Spec s;
    NdpDrop reason;
    size_t truncate = 0;    // keep only this many bytes (0: all)
    bool retarget = false;  // after the checksum: destination becomes our group
  };
  const Addr loopback{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  const Addr other_group{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0x99}};
  const config::MacAddress other_group_mac{{0x33, 0x33, 0xff, 0, 0, 0x99}};
  using D = NdpDrop;
  const std::vector<Case> cases = {
      {"IPv6 header cut", ns(), D::kShortFrame, 56},
      {"version 4 in an IPv6 frame", with(ns(), &Spec::version, 4), D::kIp6BadHeader},
      {"payload length past the frame", with(ns(), &Spec::payload_len_delta, 8), D::kIp6BadLength},
      {"payload length below the ICMPv6 header", with(ns(), &Spec::payload_len_delta, -33),
       D::kIp6BadLength},
      {"our own frame", with(ns(), &Spec::eth_src, kOurMac), D::kLoopedBack},
      {"multicast source", with(ns(), &Spec::src, kAllNodes), D::kIp6BadSource},
      {"our address as source", with(ns(), &Spec::src, kOurIp), D::kIp6BadSource},
      {"loopback source", with(ns(), &Spec::src, loopback), D::kIp6BadSource},
      {"multicast Ethernet source", with(ns(), &Spec::eth_src, kAllNodesMac), D::kIp6BadSource},
      {"echo from ::", with(echo(), &Spec::src, kUnspecified), D::kIp6BadSource},
      {"NA from ::", with(solicited_na(), &Spec::src, kUnspecified), D::kIp6BadSource},
      {"another solicited-node group", addressed(ns(), other_group_mac, other_group),
       D::kIcmp6NotForUs},
      {"our group at the wrong MAC", with(ns(), &Spec::eth_dst, kAllNodesMac), D::kIcmp6NotForUs},
      {"our address at another MAC", with(echo(), &Spec::eth_dst, kOtherMac), D::kIcmp6NotForUs},
      {"another address", with(echo(), &Spec::dst, kPeerIp), D::kIcmp6NotForUs},
      {"NS to all-nodes", addressed(ns(), kAllNodesMac, kAllNodes), D::kIcmp6NotForUs},
      {"NA to our solicited-node group",
       addressed(na(0x20, kPeerIp, link_option(2, kPeerMac)), kOurGroupMac, kOurGroup),
       D::kIcmp6NotForUs},
      {"echo checksum", with(echo(), &Spec::break_checksum, true), D::kIcmp6BadChecksum},
      {"NS checksum", with(ns(), &Spec::break_checksum, true), D::kIcmp6BadChecksum},
      // Checksummed for our address, then sent to our group.
      {"NS checksum over another pseudo-header", addressed(ns(), kOurMac, kOurIp),
       D::kIcmp6BadChecksum, 0, true},
      {"echo reply", with(echo(), &Spec::type, 129), D::kIcmp6Unsupported},
      {"router solicitation", with(echo(), &Spec::type, 133), D::kIcmp6Unsupported},
      {"router advertisement", with(addressed(echo(), kAllNodesMac, kAllNodes), &Spec::type, 134),
       D::kIcmp6Unsupported},
      {"echo request code 1", with(echo(), &Spec::code, 1), D::kIcmp6Unsupported},
      {"echo to all-nodes", addressed(echo(), kAllNodesMac, kAllNodes), D::kIcmp6Unsupported},
      {"NS hop limit 254 (routed)", with(ns(), &Spec::hop_limit, 254), D::kNdpBadHopLimit},
      {"NA hop limit 64", with(solicited_na(), &Spec::hop_limit, 64), D::kNdpBadHopLimit},
      {"NS code 1", with(ns(), &Spec::code, 1), D::kNdpBadFormat},
      {"NS shorter than 24 bytes", with(ns(), [](Spec& s) { s.body.resize(12); }),
       D::kNdpBadFormat},
      {"NS for a multicast target", ns(kAllNodes), D::kNdpBadFormat},
      {"option of length 0", with(ns(), [](Spec& s) { s.body[21] = 0; }), D::kNdpBadFormat},
      // The SLLA claims 16 bytes, 8 are there.
      {"option past the message", with(ns(), [](Spec& s) { s.body[21] = 2; }), D::kNdpBadFormat},
      {"DAD probe with an SLLA", with(ns(), &Spec::src, kUnspecified), D::kNdpBadFormat},
      {"DAD probe to our unicast address", addressed(dad_probe(), kOurMac, kOurIp),
       D::kNdpBadFormat},
      {"solicited NA to all-nodes", addressed(solicited_na(), kAllNodesMac, kAllNodes),
       D::kNdpBadFormat},
      {"SLLA multicast", with(ns(), &Spec::body, nd_body(0, kOurIp, link_option(1, kAllNodesMac))),
       D::kNdpBadLinkAddress},
      {"TLLA zero", na(0x60, kPeerIp, link_option(2, config::MacAddress{})), D::kNdpBadLinkAddress},
      {"NS for another target", ns(kPeerIp), D::kNdpNotForUs},
      {"solicited NA from our address", with(solicited_na(), &Spec::src, kOurIp), D::kIp6BadSource},
      {"NA without TLLA", na(0x60, kPeerIp, {}), D::kNdpNoLinkAddress},
      {"NS cut inside the message", ns(), D::kIp6BadLength, 70},
  };

  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Bytes b = frame(k.s);
    if (k.retarget) {
      std::memcpy(&b[0], kOurGroupMac.bytes.data(), 6);
      std::memcpy(&b[38], kOurGroup.bytes.data(), 16);
    }
    if (k.truncate != 0) b.resize(k.truncate);
    Mbuf f(b);
    NdpCounters c;
    EXPECT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kDrop);
    EXPECT_EQ(c.drop(k.reason), 1u) << ndp_drop_name(k.reason);
    EXPECT_EQ(c.total_drops(), 1u);
    // answer_ndp re-checks and refuses, counting the same reason, never a reply.
    NdpPeer peer;
    EXPECT_FALSE(answer_ndp(f.m, kLocal, &c, &peer));
    EXPECT_EQ(c.drop(k.reason), 2u);
    EXPECT_EQ(c.na_sent + c.echo_replies, 0u);
  }
}

TEST(NdpTest, ReplyFailedWhenTheMbufCannotHoldTheAdvertisement) {
  // A DAD probe (78 bytes) at the very end of its buffer: the 86-byte NA does not fit, and the
  // frame is left as it was.
  const Bytes probe = frame(dad_probe());
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  ASSERT_NE(m, nullptr);
  m->data_off = uint16_t(m->buf_len - probe.size());
  std::memcpy(rte_pktmbuf_append(m, uint16_t(probe.size())), probe.data(), probe.size());
  Mbuf f(m);
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
  EXPECT_FALSE(answer_ndp(f.m, kLocal, &c, nullptr));
  EXPECT_EQ(c.drop(NdpDrop::kReplyFailed), 1u);
  EXPECT_EQ(f.bytes(), probe);

  // A DAD probe split over two segments is not an answerable NS in the first place.
  Mbuf g(probe, 70);
  EXPECT_EQ(classify_ndp(g.m, kLocal, &c), NdpClass::kDrop);
  EXPECT_EQ(c.drop(NdpDrop::kShortFrame), 1u);
  // Neither is a frame that is not IPv6 at all.
  Bytes arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  Mbuf h(arp);
  EXPECT_FALSE(answer_ndp(h.m, kLocal, &c, nullptr));
  EXPECT_EQ(c.drop(NdpDrop::kReplyFailed), 2u);
}

TEST(NdpTest, OtherTrafficIsLeftToOtherClassifiers) {
  NdpCounters c;
  // RoCEv2 over IPv6 (UDP 4791) and any other next header: not ours to judge, not counted.
  for (uint8_t next : {17, 6, 0, 43}) {
    Mbuf f(frame(with(echo(), &Spec::next_header, next)));
    EXPECT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kNotNdp) << int(next);
  }
  Bytes ipv4(60, 0);
  ipv4[12] = 0x08;
  ipv4[14] = 0x45;
  ipv4[23] = 58;
  Mbuf f(ipv4);
  EXPECT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kNotNdp);
  Bytes tiny(16, 0);
  tiny[12] = 0x86;
  tiny[13] = 0xDD;
  Mbuf g(tiny);
  EXPECT_EQ(classify_ndp(g.m, kLocal, &c), NdpClass::kNotNdp);
  EXPECT_EQ(c.total_drops() + c.to_control, 0u);
}

TEST(NdpTest, DropReasonNamesAreStableAndDistinctFromArpIcmp) {
  EXPECT_EQ(ndp_drop_name(NdpDrop::kIcmp6BadChecksum), "icmp6_bad_checksum");
  EXPECT_EQ(ndp_drop_name(NdpDrop::kNdpBadHopLimit), "ndp_bad_hop_limit");
  EXPECT_EQ(ndp_drop_name(NdpDrop::kReplyFailed), "ndp_reply_failed");
  EXPECT_EQ(ndp_drop_name(NdpDrop::kCount), "unknown");
  std::set<std::string> names;
  for (size_t i = 0; i < kArpIcmpDropCount; ++i)
    names.insert(std::string(arp_icmp_drop_name(static_cast<ArpIcmpDrop>(i))));
  for (size_t i = 0; i < kNdpDropCount; ++i) {
    const std::string n(ndp_drop_name(static_cast<NdpDrop>(i)));
    EXPECT_NE(n, "unknown");
    for (char ch : n)
      EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
    EXPECT_TRUE(names.insert(n).second) << n << " is used twice (/rocedp/drops would add them)";
  }
}

// ---- the solicitation control sends ----

TEST(NdpTest, SolicitationBytesAndThePeerAnswersIt) {
  Mbuf f(build_neighbor_solicitation(pool(), kLocal, kPeerIp));
  ASSERT_NE(f.m, nullptr);
  const config::MacAddress group_mac{{0x33, 0x33, 0xff, 0, 0, 0x10}};
  const Addr group{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0x10}};
  expect_nd(f.bytes(), group_mac, group, 135, 0, kPeerIp);
  EXPECT_EQ(solicited_node_group(kPeerIp), group);
  EXPECT_EQ(ipv6_multicast_mac(group), group_mac);

  // The peer's side of this module answers it, and ours takes the answer to control.
  const LocalAddress6 peer{kPeerMac, kPeerIp};
  NdpCounters pc;
  ASSERT_EQ(classify_ndp(f.m, peer, &pc), NdpClass::kAnswerLocally);
  NdpPeer solicitor;
  ASSERT_TRUE(answer_ndp(f.m, peer, &pc, &solicitor));
  EXPECT_EQ(solicitor.ip, kOurIp);
  EXPECT_EQ(solicitor.mac, kOurMac);
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kToControl);
  NdpPeer learned;
  ASSERT_TRUE(extract_ndp_peer(f.m, kLocal, &learned));
  EXPECT_EQ(learned.ip, kPeerIp);
  EXPECT_EQ(learned.mac, kPeerMac);
}

// The announcement a port sends when it starts (RFC 4861 7.2.6): to all nodes, Override alone,
// our address and MAC; a peer's side of this module takes it to control and learns us from it.
TEST(NdpTest, UnsolicitedAdvertisementBytesAndThePeerLearnsUs) {
  Mbuf f(build_unsolicited_advertisement(pool(), kLocal));
  ASSERT_NE(f.m, nullptr);
  expect_na(f.bytes(), kAllNodesMac, kAllNodes, 0x20);
  const LocalAddress6 peer{kPeerMac, kPeerIp};
  NdpCounters pc;
  ASSERT_EQ(classify_ndp(f.m, peer, &pc), NdpClass::kToControl);
  EXPECT_EQ(pc.total_drops(), 0u);
  NdpPeer learned;
  ASSERT_TRUE(extract_ndp_peer(f.m, peer, &learned));
  EXPECT_EQ(learned.ip, kOurIp);
  EXPECT_EQ(learned.mac, kOurMac);
}

TEST(NdpTest, TruncatedFramesNeverAnswer) {
  for (const Bytes& full : {frame(ns()), frame(echo(40)), frame(solicited_na())}) {
    for (size_t len = 14; len < full.size(); ++len) {
      Bytes b(full.begin(), full.begin() + long(len));
      Mbuf f(b);
      NdpCounters c;
      const NdpClass cls = classify_ndp(f.m, kLocal, &c);
      EXPECT_TRUE(cls == NdpClass::kDrop || cls == NdpClass::kNotNdp) << len;
    }
  }
}

}  // namespace
}  // namespace rocedp::dataplane
