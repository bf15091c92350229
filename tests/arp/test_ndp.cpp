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
#include "tests/common/eal_session.hpp"

namespace rocedp::dataplane {
namespace {

using Bytes = std::vector<uint8_t>;
using Addr = config::Ipv6Address;

constexpr unsigned kPoolSize = 255;
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new test::EalSession(
    {.tag = "ndp-test", .memory_mb = 64, .mbufs = kPoolSize, .log_level = pmd::LogLevel::kError}));
rte_mempool* pool() {
  return test::session_pool()->get();
}

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

// ---- byte helpers, deliberately independent of the code under test ----
void put16(Bytes& b, uint16_t v) {
  b.push_back(uint8_t(v >> 8));
  b.push_back(uint8_t(v));
}
void put_mac(Bytes& b, const config::MacAddress& m) {
  b.insert(b.end(), m.bytes.begin(), m.bytes.end());
}
void put_ip(Bytes& b, const Addr& a) {
  b.insert(b.end(), a.bytes.begin(), a.bytes.end());
}
uint16_t get16(const Bytes& b, size_t off) {
  return uint16_t(b[off] << 8 | b[off + 1]);
}
uint32_t get32(const Bytes& b, size_t off) {
  return uint32_t(get16(b, off)) << 16 | get16(b, off + 2);
}
config::MacAddress get_mac(const Bytes& b, size_t off) {
  config::MacAddress m;
  std::memcpy(m.bytes.data(), &b[off], 6);
  return m;
}
Addr get_ip(const Bytes& b, size_t off) {
  Addr a;
  std::memcpy(a.bytes.data(), &b[off], 16);
  return a;
}

// RFC 1071 over big-endian words of the ICMPv6 pseudo-header (RFC 8200 8.1: source, destination,
// upper-layer length as 32 bits, three zero bytes, next header 58) and the message at `icmp`.
// 0 when the message with its checksum is valid.
uint16_t icmp6_checksum(const Bytes& f, size_t icmp, size_t len) {
  Bytes ph(f.begin() + 22, f.begin() + 54);  // IPv6 source and destination
  ph.push_back(uint8_t(len >> 24));
  ph.push_back(uint8_t(len >> 16));
  ph.push_back(uint8_t(len >> 8));
  ph.push_back(uint8_t(len));
  ph.insert(ph.end(), {0, 0, 0, 58});
  ph.insert(ph.end(), f.begin() + long(icmp), f.begin() + long(icmp + len));
  uint32_t sum = 0;
  for (size_t i = 0; i < ph.size(); i += 2) {
    sum += uint32_t(ph[i]) << 8;
    if (i + 1 < ph.size()) sum += ph[i + 1];
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}

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
  put_mac(b, s.eth_dst);
  put_mac(b, s.eth_src);
  put16(b, 0x86DD);
  b.push_back(uint8_t(s.version << 4));
  b.insert(b.end(), {0, 0, 0});
  const size_t plen = 4 + s.body.size();
  put16(b, uint16_t(int(plen) + s.payload_len_delta));
  b.push_back(s.next_header);
  b.push_back(s.hop_limit);
  put_ip(b, s.src);
  put_ip(b, s.dst);
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

// NS/NA body: flags (first byte), three reserved bytes, target, options.
Bytes nd_body(uint8_t flags, const Addr& target, const Bytes& options = {}) {
  Bytes b{flags, 0, 0, 0};
  put_ip(b, target);
  b.insert(b.end(), options.begin(), options.end());
  return b;
}
Bytes link_option(uint8_t type, const config::MacAddress& mac) {
  Bytes b{type, 1};
  put_mac(b, mac);
  return b;
}
Spec ns(const Addr& target = kOurIp) {
  Spec s;
  s.body = nd_body(0, target, link_option(1, kPeerMac));
  return s;
}
Spec na(uint8_t flags, const Addr& target, const Bytes& options) {
  Spec s;
  s.type = 136;
  s.eth_dst = kOurMac;
  s.dst = kOurIp;
  s.body = nd_body(flags, target, options);
  return s;
}
Spec echo(size_t payload = 56) {
  Spec s;
  s.type = 128;
  s.eth_dst = kOurMac;
  s.dst = kOurIp;
  s.hop_limit = 64;
  s.body = {0xBE, 0xEF, 0, 7};  // identifier, sequence
  for (size_t i = 0; i < payload; ++i) s.body.push_back(uint8_t(i * 7 + 3));
  return s;
}

// An mbuf owning a copy of `b`, optionally split into two segments after `split` bytes.
struct Mbuf {
  rte_mbuf* m = nullptr;
  explicit Mbuf(const Bytes& b, size_t split = 0) {
    m = rte_pktmbuf_alloc(pool());
    const size_t first = split == 0 ? b.size() : split;
    std::memcpy(rte_pktmbuf_append(m, uint16_t(first)), b.data(), first);
    if (split != 0) {
      rte_mbuf* tail = rte_pktmbuf_alloc(pool());
      std::memcpy(rte_pktmbuf_append(tail, uint16_t(b.size() - split)), b.data() + split,
                  b.size() - split);
      EXPECT_EQ(rte_pktmbuf_chain(m, tail), 0);
    }
    m->port = 3;
  }
  explicit Mbuf(rte_mbuf* built) : m(built) {}
  ~Mbuf() { rte_pktmbuf_free(m); }
  Mbuf(const Mbuf&) = delete;
  Mbuf& operator=(const Mbuf&) = delete;
  Bytes bytes() const {
    Bytes b(rte_pktmbuf_pkt_len(m));
    const void* p = rte_pktmbuf_read(m, 0, uint32_t(b.size()), b.data());
    if (p != b.data()) std::memcpy(b.data(), p, b.size());
    return b;
  }
};

// Every field of an NA we sent, checked against RFC 4861 4.4 and 7.2.4.
void expect_na(const Bytes& r, const config::MacAddress& eth_dst, const Addr& ip_dst,
               uint8_t flags) {
  ASSERT_EQ(r.size(), 86u);
  EXPECT_EQ(get_mac(r, 0), eth_dst);
  EXPECT_EQ(get_mac(r, 6), kOurMac);
  EXPECT_EQ(get16(r, 12), 0x86DD);
  EXPECT_EQ(get32(r, 14), 0x60000000u) << "version 6, traffic class 0, flow label 0";
  EXPECT_EQ(get16(r, 18), 32) << "payload length: NA 24 + option 8";
  EXPECT_EQ(r[20], 58) << "next header ICMPv6";
  EXPECT_EQ(r[21], 255) << "hop limit 255 (RFC 4861 7.1.2)";
  EXPECT_EQ(get_ip(r, 22), kOurIp);
  EXPECT_EQ(get_ip(r, 38), ip_dst);
  EXPECT_EQ(r[54], 136) << "type Neighbor Advertisement";
  EXPECT_EQ(r[55], 0) << "code";
  EXPECT_EQ(icmp6_checksum(r, 54, 32), 0) << "ICMPv6 checksum over the pseudo-header";
  EXPECT_EQ(r[58], flags) << "R, S, O flags";
  EXPECT_EQ(r[59], 0);
  EXPECT_EQ(r[60], 0);
  EXPECT_EQ(r[61], 0);
  EXPECT_EQ(get_ip(r, 62), kOurIp) << "target: our address";
  EXPECT_EQ(r[78], 2) << "target link-layer address option";
  EXPECT_EQ(r[79], 1) << "its length in units of 8 bytes";
  EXPECT_EQ(get_mac(r, 80), kOurMac);
}

// ---- Neighbor Solicitation ----

TEST(NdpTest, SolicitationToOurGroupBecomesSolicitedAdvertisementInPlace) {
  Spec s = ns();
  s.src = kPeerLinkLocal;  // Linux solicits from its link-local address as often as not
  Mbuf f(frame(s));
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
  NdpPeer peer;
  ASSERT_TRUE(answer_ndp(f.m, kLocal, &c, &peer));
  expect_na(f.bytes(), kPeerMac, kPeerLinkLocal, 0x60);
  EXPECT_EQ(c.na_sent, 1u);
  EXPECT_EQ(c.total_drops(), 0u);
  EXPECT_EQ(peer.ip, kPeerLinkLocal) << "the solicitor is reported for learning (7.2.3)";
  EXPECT_EQ(peer.mac, kPeerMac);
  EXPECT_EQ(peer.port_id, 3);
  EXPECT_EQ(f.m->ol_flags & ~(RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT), 0u);
}

TEST(NdpTest, UnicastSolicitationIsAnsweredToItsSourceLinkLayerAddress) {
  // A reachability probe (7.3.1): unicast to our MAC and address. The NA goes to the SLLA even
  // when the Ethernet source differs (a bridge that rewrites it, a proxy).
  Spec s = ns();
  s.eth_dst = kOurMac;
  s.dst = kOurIp;
  s.eth_src = kOtherMac;
  s.pad_to = 100;  // trailing bytes are cut
  Mbuf f(frame(s));
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
  NdpPeer peer;
  ASSERT_TRUE(answer_ndp(f.m, kLocal, &c, &peer));
  expect_na(f.bytes(), kPeerMac, kPeerIp, 0x60);
  EXPECT_EQ(peer.ip, kPeerIp);
  EXPECT_EQ(peer.mac, kPeerMac);
}

TEST(NdpTest, SolicitationWithoutSourceLinkAddressIsAnsweredButNotLearned) {
  Spec s = ns();
  s.eth_dst = kOurMac;
  s.dst = kOurIp;
  s.body = nd_body(0, kOurIp);
  Mbuf f(frame(s));
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
  NdpPeer peer;
  ASSERT_TRUE(answer_ndp(f.m, kLocal, &c, &peer));
  expect_na(f.bytes(), kPeerMac, kPeerIp, 0x60);  // to the Ethernet source
  EXPECT_EQ(peer.ip, kUnspecified) << "no link-layer address, nothing to learn";
}

TEST(NdpTest, DadProbeIsAnsweredToAllNodesWithoutSolicited) {
  // RFC 4862 5.4.2 probe: source ::, to the solicited-node group, no SLLA. RFC 4861 7.2.4: the
  // answer goes to all-nodes with Solicited clear (a duplicate address, from the prober's view).
  Spec s = ns();
  s.src = kUnspecified;
  s.body = nd_body(0, kOurIp);
  Mbuf f(frame(s));  // 78 bytes: the NA needs 8 more, taken from the mbuf's tailroom
  NdpCounters c;
  ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
  NdpPeer peer;
  ASSERT_TRUE(answer_ndp(f.m, kLocal, &c, &peer));
  expect_na(f.bytes(), kAllNodesMac, kAllNodes, 0x20);
  EXPECT_EQ(peer.ip, kUnspecified);
  EXPECT_EQ(c.na_sent, 1u);
}

// ---- Echo ----

TEST(NdpTest, EchoRequestsOfManySizesAreAnswered) {
  for (size_t payload : {0, 1, 56, 1000, 1452}) {
    SCOPED_TRACE(payload);
    Spec s = echo(payload);
    s.pad_to = 64;  // short ones carry Ethernet padding, which the reply drops
    const Bytes in = frame(s);
    Mbuf f(in);
    NdpCounters c;
    ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kAnswerLocally);
    NdpPeer peer;
    ASSERT_TRUE(answer_ndp(f.m, kLocal, &c, &peer));
    const Bytes r = f.bytes();
    const size_t plen = 8 + payload;
    ASSERT_EQ(r.size(), 54 + plen);
    EXPECT_EQ(get_mac(r, 0), kPeerMac);
    EXPECT_EQ(get_mac(r, 6), kOurMac);
    EXPECT_EQ(get16(r, 12), 0x86DD);
    EXPECT_EQ(get32(r, 14), 0x60000000u);
    EXPECT_EQ(get16(r, 18), plen);
    EXPECT_EQ(r[20], 58);
    EXPECT_EQ(r[21], 64) << "hop limit of the reply";
    EXPECT_EQ(get_ip(r, 22), kOurIp);
    EXPECT_EQ(get_ip(r, 38), kPeerIp);
    EXPECT_EQ(r[54], 129) << "Echo Reply";
    EXPECT_EQ(r[55], 0);
    EXPECT_EQ(icmp6_checksum(r, 54, plen), 0);
    EXPECT_TRUE(std::equal(r.begin() + 58, r.end(), in.begin() + 58))
        << "identifier, sequence and data come back unchanged";
    EXPECT_EQ(c.echo_replies, 1u);
    EXPECT_EQ(peer.ip, kUnspecified);
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
  Spec unsolicited = na(0x20, kPeerIp, link_option(2, kPeerMac));
  unsolicited.eth_dst = kAllNodesMac;
  unsolicited.dst = kAllNodes;
  Spec from_link_local = na(0x60, kPeerIp, link_option(2, kPeerMac));
  from_link_local.src = kPeerLinkLocal;
  for (const Case& k : {Case{"solicited, to us", na(0x60, kPeerIp, link_option(2, kPeerMac))},
                        Case{"unsolicited, to all-nodes", unsolicited},
                        Case{"from a link-local source", from_link_local}}) {
    SCOPED_TRACE(k.what);
    Mbuf f(frame(k.s));
    NdpCounters c;
    ASSERT_EQ(classify_ndp(f.m, kLocal, &c), NdpClass::kToControl);
    EXPECT_EQ(c.to_control, 1u);
    NdpPeer peer;
    ASSERT_TRUE(extract_ndp_peer(f.m, kLocal, &peer));
    EXPECT_EQ(peer.ip, kPeerIp) << "the target is what is learned, whatever the source";
    EXPECT_EQ(peer.mac, kPeerMac);
    EXPECT_EQ(peer.port_id, 3);
  }
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
  std::vector<Case> cases;
  auto add = [&](const char* what, Spec s, NdpDrop r, size_t truncate = 0) {
    cases.push_back({what, std::move(s), r, truncate});
  };
  Spec s;
  add("IPv6 header cut", ns(), NdpDrop::kShortFrame, 56);
  s = ns();
  s.version = 4;
  add("version 4 in an IPv6 frame", s, NdpDrop::kIp6BadHeader);
  s = ns();
  s.payload_len_delta = 8;
  add("payload length past the frame", s, NdpDrop::kIp6BadLength);
  s = ns();
  s.payload_len_delta = -33;
  add("payload length below the ICMPv6 header", s, NdpDrop::kIp6BadLength);
  s = ns();
  s.eth_src = kOurMac;
  add("our own frame", s, NdpDrop::kLoopedBack);
  s = ns();
  s.src = kAllNodes;
  add("multicast source", s, NdpDrop::kIp6BadSource);
  s = ns();
  s.src = kOurIp;
  add("our address as source", s, NdpDrop::kIp6BadSource);
  s = ns();
  s.src = Addr{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  add("loopback source", s, NdpDrop::kIp6BadSource);
  s = ns();
  s.eth_src = kAllNodesMac;
  add("multicast Ethernet source", s, NdpDrop::kIp6BadSource);
  s = echo();
  s.src = kUnspecified;
  add("echo from ::", s, NdpDrop::kIp6BadSource);
  s = na(0x60, kPeerIp, link_option(2, kPeerMac));
  s.src = kUnspecified;
  add("NA from ::", s, NdpDrop::kIp6BadSource);
  s = ns();
  s.dst = Addr{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0x99}};
  s.eth_dst = config::MacAddress{{0x33, 0x33, 0xff, 0, 0, 0x99}};
  add("another solicited-node group", s, NdpDrop::kIcmp6NotForUs);
  s = ns();
  s.eth_dst = kAllNodesMac;
  add("our group at the wrong MAC", s, NdpDrop::kIcmp6NotForUs);
  s = echo();
  s.eth_dst = kOtherMac;
  add("our address at another MAC", s, NdpDrop::kIcmp6NotForUs);
  s = echo();
  s.dst = kPeerIp;
  add("another address", s, NdpDrop::kIcmp6NotForUs);
  s = ns();
  s.eth_dst = kAllNodesMac;
  s.dst = kAllNodes;
  add("NS to all-nodes", s, NdpDrop::kIcmp6NotForUs);
  s = na(0x20, kPeerIp, link_option(2, kPeerMac));
  s.eth_dst = kOurGroupMac;
  s.dst = kOurGroup;
  add("NA to our solicited-node group", s, NdpDrop::kIcmp6NotForUs);
  s = echo();
  s.break_checksum = true;
  add("echo checksum", s, NdpDrop::kIcmp6BadChecksum);
  s = ns();
  s.break_checksum = true;
  add("NS checksum", s, NdpDrop::kIcmp6BadChecksum);
  s = ns();
  s.eth_dst = kOurMac;
  s.dst = kOurIp;  // checksummed for our address, then sent to our group
  add("NS checksum over another pseudo-header", s, NdpDrop::kIcmp6BadChecksum);
  cases.back().retarget = true;
  s = echo();
  s.type = 129;
  add("echo reply", s, NdpDrop::kIcmp6Unsupported);
  s = echo();
  s.type = 133;
  add("router solicitation", s, NdpDrop::kIcmp6Unsupported);
  s = echo();
  s.type = 134;
  s.eth_dst = kAllNodesMac;
  s.dst = kAllNodes;
  add("router advertisement", s, NdpDrop::kIcmp6Unsupported);
  s = echo();
  s.code = 1;
  add("echo request code 1", s, NdpDrop::kIcmp6Unsupported);
  s = echo();
  s.eth_dst = kAllNodesMac;
  s.dst = kAllNodes;
  add("echo to all-nodes", s, NdpDrop::kIcmp6Unsupported);
  s = ns();
  s.hop_limit = 254;
  add("NS hop limit 254 (routed)", s, NdpDrop::kNdpBadHopLimit);
  s = na(0x60, kPeerIp, link_option(2, kPeerMac));
  s.hop_limit = 64;
  add("NA hop limit 64", s, NdpDrop::kNdpBadHopLimit);
  s = ns();
  s.code = 1;
  add("NS code 1", s, NdpDrop::kNdpBadFormat);
  s = ns();
  s.body.resize(12);
  add("NS shorter than 24 bytes", s, NdpDrop::kNdpBadFormat);
  s = ns(kAllNodes);
  add("NS for a multicast target", s, NdpDrop::kNdpBadFormat);
  s = ns();
  s.body[21] = 0;  // option length 0
  add("option of length 0", s, NdpDrop::kNdpBadFormat);
  s = ns();
  s.body[21] = 2;  // SLLA claims 16 bytes, 8 are there
  add("option past the message", s, NdpDrop::kNdpBadFormat);
  s = ns();
  s.src = kUnspecified;
  add("DAD probe with an SLLA", s, NdpDrop::kNdpBadFormat);
  s = ns();
  s.src = kUnspecified;
  s.body = nd_body(0, kOurIp);
  s.eth_dst = kOurMac;
  s.dst = kOurIp;
  add("DAD probe to our unicast address", s, NdpDrop::kNdpBadFormat);
  s = na(0x60, kPeerIp, link_option(2, kPeerMac));
  s.eth_dst = kAllNodesMac;
  s.dst = kAllNodes;
  add("solicited NA to all-nodes", s, NdpDrop::kNdpBadFormat);
  s = ns();
  s.body = nd_body(0, kOurIp, link_option(1, kAllNodesMac));
  add("SLLA multicast", s, NdpDrop::kNdpBadLinkAddress);
  s = na(0x60, kPeerIp, link_option(2, config::MacAddress{}));
  add("TLLA zero", s, NdpDrop::kNdpBadLinkAddress);
  s = ns(kPeerIp);
  add("NS for another target", s, NdpDrop::kNdpNotForUs);
  s = na(0x20, kOurIp, link_option(2, kPeerMac));
  add("NA claiming our address", s, NdpDrop::kNdpAddressConflict);
  s = na(0x60, kPeerIp, {});
  add("NA without TLLA", s, NdpDrop::kNdpNoLinkAddress);
  s = ns();
  add("NS cut inside the message", s, NdpDrop::kIp6BadLength, 70);

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
  Spec s = ns();
  s.src = kUnspecified;
  s.body = nd_body(0, kOurIp);
  const Bytes probe = frame(s);
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
    Spec s = echo();
    s.next_header = next;
    Mbuf f(frame(s));
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
  const Bytes r = f.bytes();
  ASSERT_EQ(r.size(), 86u);
  const config::MacAddress group_mac{{0x33, 0x33, 0xff, 0, 0, 0x10}};
  const Addr group{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0x10}};
  EXPECT_EQ(get_mac(r, 0), group_mac);
  EXPECT_EQ(get_mac(r, 6), kOurMac);
  EXPECT_EQ(get16(r, 12), 0x86DD);
  EXPECT_EQ(get32(r, 14), 0x60000000u);
  EXPECT_EQ(get16(r, 18), 32);
  EXPECT_EQ(r[20], 58);
  EXPECT_EQ(r[21], 255);
  EXPECT_EQ(get_ip(r, 22), kOurIp);
  EXPECT_EQ(get_ip(r, 38), group);
  EXPECT_EQ(r[54], 135);
  EXPECT_EQ(r[55], 0);
  EXPECT_EQ(icmp6_checksum(r, 54, 32), 0);
  EXPECT_EQ(get32(r, 58), 0u) << "reserved";
  EXPECT_EQ(get_ip(r, 62), kPeerIp);
  EXPECT_EQ(r[78], 1) << "source link-layer address option";
  EXPECT_EQ(r[79], 1);
  EXPECT_EQ(get_mac(r, 80), kOurMac);
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

TEST(NdpTest, TruncatedFramesNeverAnswer) {
  for (const Bytes& full :
       {frame(ns()), frame(echo(40)), frame(na(0x60, kPeerIp, link_option(2, kPeerMac)))}) {
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
