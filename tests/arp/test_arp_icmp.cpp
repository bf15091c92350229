// ARP and ICMP echo answered on the data path: classification, in-place replies, malformed
// input, frames built for resolution and announcement. One EAL per process (--no-huge, unique
// file prefix); frames are written byte by byte here and checksums verified by an independent
// implementation, not DPDK's.

#include "dataplane/arp_icmp.hpp"

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/arp/frame_util.hpp"
#include "tests/common/eal_session.hpp"

namespace rocedp::dataplane {
namespace {

using namespace test::frames;  // Bytes, put16/get16 ..., inet_checksum, Mbuf, pool()

constexpr unsigned kPoolSize = 255;
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new test::EalSession(
    {.tag = "arp-test", .memory_mb = 64, .mbufs = kPoolSize, .log_level = pmd::LogLevel::kError}));

// ---- our address and a peer ----
const config::MacAddress kOurMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
const config::MacAddress kPeerMac{{0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0x02}};
constexpr uint32_t kOurIp = 0xC6120001;   // 198.18.0.1
constexpr uint32_t kPeerIp = 0xC6120002;  // 198.18.0.2
const LocalAddress kLocal{kOurMac, config::Ipv4Address{kOurIp}, 24};

const config::MacAddress kBroadcast{{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}};

Bytes arp_frame(uint16_t op, const config::MacAddress& eth_dst, const config::MacAddress& sha,
                uint32_t sip, const config::MacAddress& tha, uint32_t tip) {
  Bytes b;
  put_eth(b, eth_dst, sha, 0x0806);
  put16(b, 1);
  put16(b, 0x0800);
  b.push_back(6);
  b.push_back(4);
  put16(b, op);
  put_mac(b, sha);
  put32(b, sip);
  put_mac(b, tha);
  put32(b, tip);
  return b;
}

struct EchoSpec {
  uint32_t src = kPeerIp;
  uint32_t dst = kOurIp;
  config::MacAddress eth_dst = kOurMac;
  config::MacAddress eth_src = kPeerMac;
  Bytes options;  // IP options, a multiple of 4 bytes
  size_t payload = 56;
  uint8_t type = 8;
  uint16_t frag = 0x4000;  // DF
  size_t pad_to = 0;       // Ethernet padding up to this frame length
};

Bytes echo_frame(const EchoSpec& s) {
  Bytes b;
  put_eth(b, s.eth_dst, s.eth_src, 0x0800);
  const size_t ihl = 20 + s.options.size();
  const size_t total = ihl + 8 + s.payload;
  b.push_back(uint8_t(0x40 | (ihl / 4)));
  b.push_back(0x10);  // TOS, kept in the reply
  put16(b, uint16_t(total));
  put16(b, 0x1234);
  put16(b, s.frag);
  b.push_back(63);
  b.push_back(1);
  put16(b, 0);
  put32(b, s.src);
  put32(b, s.dst);
  b.insert(b.end(), s.options.begin(), s.options.end());
  const uint16_t ip_ck = inet_checksum(b, 14, ihl);
  b[24] = uint8_t(ip_ck >> 8);
  b[25] = uint8_t(ip_ck);
  const size_t icmp = b.size();
  b.push_back(s.type);
  b.push_back(0);
  put16(b, 0);
  put16(b, 0xBEEF);  // identifier
  put16(b, 7);       // sequence
  for (size_t i = 0; i < s.payload; ++i) b.push_back(uint8_t(i * 7 + 3));
  const uint16_t ck = inet_checksum(b, icmp, 8 + s.payload);
  b[icmp + 2] = uint8_t(ck >> 8);
  b[icmp + 3] = uint8_t(ck);
  while (b.size() < s.pad_to) b.push_back(0);
  return b;
}

// ---- ARP ----

TEST(ArpTest, RequestForUsBecomesReplyInPlace) {
  Mbuf f(arp_frame(1, kBroadcast, kPeerMac, kPeerIp, config::MacAddress{}, kOurIp));
  ArpIcmpCounters c;
  ASSERT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kAnswerLocally);
  ArpPeer peer;
  ASSERT_TRUE(answer_locally(f.m, kLocal, &c, &peer));
  const Bytes r = f.bytes();
  ASSERT_EQ(r.size(), 42u);
  EXPECT_EQ(get_mac(r, 0), kPeerMac) << "unicast back to the asker";
  EXPECT_EQ(get_mac(r, 6), kOurMac);
  EXPECT_EQ(get16(r, 12), 0x0806);
  EXPECT_EQ(get16(r, 14), 1);
  EXPECT_EQ(get16(r, 16), 0x0800);
  EXPECT_EQ(r[18], 6);
  EXPECT_EQ(r[19], 4);
  EXPECT_EQ(get16(r, 20), 2) << "opcode reply";
  EXPECT_EQ(get_mac(r, 22), kOurMac);
  EXPECT_EQ(get32(r, 28), kOurIp);
  EXPECT_EQ(get_mac(r, 32), kPeerMac);
  EXPECT_EQ(get32(r, 38), kPeerIp);
  EXPECT_EQ(c.arp_replies, 1u);
  EXPECT_EQ(c.total_drops(), 0u);
  EXPECT_EQ(peer.ip.value, kPeerIp) << "the asker is reported for learning";
  EXPECT_EQ(peer.mac, kPeerMac);
  EXPECT_TRUE(peer.targets_us);
}

TEST(ArpTest, ProbeIsAnsweredButNotLearned) {
  // RFC 5227 probe: sender IP 0; the reply goes to the prober with target IP 0.
  Mbuf f(arp_frame(1, kBroadcast, kPeerMac, 0, config::MacAddress{}, kOurIp));
  ArpIcmpCounters c;
  ASSERT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kAnswerLocally);
  ArpPeer peer;
  ASSERT_TRUE(answer_locally(f.m, kLocal, &c, &peer));
  const Bytes r = f.bytes();
  EXPECT_EQ(get32(r, 38), 0u);
  EXPECT_EQ(get_mac(r, 0), kPeerMac);
  EXPECT_EQ(peer.ip.value, 0u);
}

TEST(ArpTest, RepliesAndAnnouncementsGoToControl) {
  ArpIcmpCounters c;
  {
    Mbuf f(arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp));
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kToControl);
    ArpPeer p;
    ASSERT_TRUE(extract_arp_peer(f.m, kLocal, &p));
    EXPECT_EQ(p.ip.value, kPeerIp);
    EXPECT_EQ(p.mac, kPeerMac);
    EXPECT_TRUE(p.targets_us);
  }
  {
    Mbuf f(
        arp_frame(1, kBroadcast, kPeerMac, kPeerIp, config::MacAddress{}, kPeerIp));  // gratuitous
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kToControl);
    ArpPeer p;
    ASSERT_TRUE(extract_arp_peer(f.m, kLocal, &p));
    EXPECT_EQ(p.ip.value, kPeerIp);
    EXPECT_FALSE(p.targets_us);
  }
  EXPECT_EQ(c.to_control, 2u);
  EXPECT_EQ(c.total_drops(), 0u);
}

// RFC 5227 §2.4: a station that claims our address (its request, announcement or reply) is
// counted as a conflict and goes to the control thread, which defends the address; nothing of it
// is learned, and it is never answered.
TEST(ArpTest, AStationClaimingOurAddressIsCountedAndGoesToControlToBeDefended) {
  const std::pair<const char*, Bytes> frames[] = {
      {"announcement", arp_frame(1, kBroadcast, kPeerMac, kOurIp, {}, kOurIp)},
      {"request", arp_frame(1, kBroadcast, kPeerMac, kOurIp, {}, kPeerIp)},
      {"reply", arp_frame(2, kOurMac, kPeerMac, kOurIp, kOurMac, kPeerIp)},
  };
  for (const auto& [name, frame] : frames) {
    SCOPED_TRACE(name);
    Mbuf f(frame);
    ArpIcmpCounters c;
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kToControl);
    EXPECT_EQ(c.drop(ArpIcmpDrop::kArpAddressConflict), 1u);
    EXPECT_EQ(c.to_control, 1u);
    ArpPeer p;
    ASSERT_TRUE(extract_arp_peer(f.m, kLocal, &p));
    EXPECT_TRUE(p.conflict);
    EXPECT_EQ(p.ip.value, kOurIp);
    EXPECT_EQ(p.mac, kPeerMac);
    EXPECT_FALSE(answer_locally(f.m, kLocal, &c, nullptr));
    EXPECT_EQ(f.bytes(), frame);
  }
  // An ordinary sender is no conflict.
  Mbuf f(arp_frame(1, kBroadcast, kPeerMac, kPeerIp, {}, kOurIp));
  ArpPeer p;
  ASSERT_TRUE(extract_arp_peer(f.m, kLocal, &p));
  EXPECT_FALSE(p.conflict);
}

struct ArpDropCase {
  const char* name;
  Bytes frame;
  ArpIcmpDrop reason;
};

TEST(ArpTest, FramesWeMustNotAnswerAreDroppedByReason) {
  const config::MacAddress other{{0x02, 0x11, 0x11, 0x11, 0x11, 0x11}};
  std::vector<ArpDropCase> cases;
  Bytes req = arp_frame(1, kBroadcast, kPeerMac, kPeerIp, {}, kOurIp);
  cases.push_back({"short", Bytes(req.begin(), req.begin() + 41), ArpIcmpDrop::kShortFrame});
  Bytes bad_hlen = req;
  bad_hlen[18] = 8;
  cases.push_back({"hlen", bad_hlen, ArpIcmpDrop::kArpBadFormat});
  Bytes bad_ptype = req;
  bad_ptype[16] = 0x86;
  bad_ptype[17] = 0xDD;
  cases.push_back({"ptype", bad_ptype, ArpIcmpDrop::kArpBadFormat});
  Bytes rarp = req;
  rarp[21] = 3;
  cases.push_back({"opcode", rarp, ArpIcmpDrop::kArpBadOpcode});
  cases.push_back({"other target", arp_frame(1, kBroadcast, kPeerMac, kPeerIp, {}, 0xC6120009),
                   ArpIcmpDrop::kArpNotForUs});
  cases.push_back(
      {"other mac", arp_frame(1, other, kPeerMac, kPeerIp, {}, kOurIp), ArpIcmpDrop::kArpNotForUs});
  cases.push_back(
      {"own", arp_frame(1, kBroadcast, kOurMac, kOurIp, {}, kOurIp), ArpIcmpDrop::kLoopedBack});
  cases.push_back({"multicast sender", arp_frame(1, kBroadcast, kBroadcast, kPeerIp, {}, kOurIp),
                   ArpIcmpDrop::kArpBadSender});
  cases.push_back({"broadcast sender ip",
                   arp_frame(1, kBroadcast, kPeerMac, 0xC61200FF, {}, kOurIp),
                   ArpIcmpDrop::kArpBadSender});
  cases.push_back({"reply from 0", arp_frame(2, kOurMac, kPeerMac, 0, kOurMac, kOurIp),
                   ArpIcmpDrop::kArpBadSender});
  cases.push_back({"loopback sender ip", arp_frame(1, kBroadcast, kPeerMac, 0x7F000001, {}, kOurIp),
                   ArpIcmpDrop::kArpBadSender});
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    Mbuf f(tc.frame);
    ArpIcmpCounters c;
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kDrop);
    EXPECT_EQ(c.drop(tc.reason), 1u) << arp_icmp_drop_name(tc.reason);
    EXPECT_EQ(c.total_drops(), 1u);
    // Even if handed to answer_locally by mistake, it is not answered and not modified.
    EXPECT_FALSE(answer_locally(f.m, kLocal, &c, nullptr));
    EXPECT_EQ(f.bytes(), tc.frame);
    EXPECT_EQ(c.arp_replies, 0u);
    ArpPeer p;
    EXPECT_FALSE(extract_arp_peer(f.m, kLocal, &p));
  }
}

// RFC 3021: a /31 has no broadcast address; its other address is the peer, whichever is even.
TEST(ArpTest, OnAThirtyOneBitSubnetTheOtherAddressIsAPeer) {
  for (const bool we_are_even : {true, false}) {
    SCOPED_TRACE(we_are_even ? "we are 10.0.0.0/31" : "we are 10.0.0.1/31");
    const uint32_t ours = we_are_even ? 0x0A000000 : 0x0A000001;
    const uint32_t peer = ours ^ 1;
    const LocalAddress local{kOurMac, config::Ipv4Address{ours}, 31};
    Mbuf req(arp_frame(1, kBroadcast, kPeerMac, peer, config::MacAddress{}, ours));
    ArpIcmpCounters c;
    ASSERT_EQ(classify_arp_icmp(req.m, local, &c), ArpIcmpClass::kAnswerLocally);
    ArpPeer p;
    ASSERT_TRUE(answer_locally(req.m, local, &c, &p));
    EXPECT_EQ(c.arp_replies, 1u);
    EXPECT_EQ(p.ip.value, peer);
    EchoSpec s;
    s.src = peer;
    s.dst = ours;
    Mbuf ping(echo_frame(s));
    ASSERT_EQ(classify_arp_icmp(ping.m, local, &c), ArpIcmpClass::kAnswerLocally);
    EXPECT_TRUE(answer_locally(ping.m, local, &c, nullptr));
    EXPECT_EQ(c.echo_replies, 1u);
    EXPECT_EQ(c.total_drops(), 0u);
  }
  // A /30 keeps its broadcast address.
  const LocalAddress thirty{kOurMac, config::Ipv4Address{0x0A000001}, 30};
  Mbuf from_broadcast(arp_frame(1, kBroadcast, kPeerMac, 0x0A000003, {}, 0x0A000001));
  ArpIcmpCounters c;
  EXPECT_EQ(classify_arp_icmp(from_broadcast.m, thirty, &c), ArpIcmpClass::kDrop);
  EXPECT_EQ(c.drop(ArpIcmpDrop::kArpBadSender), 1u);
}

TEST(ArpTest, GratuitousArpBytes) {
  Mbuf f(build_gratuitous_arp(pool(), kLocal));
  ASSERT_NE(f.m, nullptr);
  Bytes expected = arp_frame(1, kBroadcast, kOurMac, kOurIp, config::MacAddress{}, kOurIp);
  expected.resize(60, 0);  // zero padding to the Ethernet minimum
  EXPECT_EQ(f.bytes(), expected);
  // Another station would classify it as an announcement, not a conflict for itself.
  const LocalAddress peer{kPeerMac, config::Ipv4Address{kPeerIp}, 24};
  EXPECT_EQ(classify_arp_icmp(f.m, peer, nullptr), ArpIcmpClass::kToControl);
  // And we recognise our own frame if it comes back.
  ArpIcmpCounters c;
  EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kDrop);
  EXPECT_EQ(c.drop(ArpIcmpDrop::kLoopedBack), 1u);
}

TEST(ArpTest, RequestBytesAndPeerAnswersIt) {
  Mbuf f(build_arp_request(pool(), kLocal, config::Ipv4Address{kPeerIp}));
  ASSERT_NE(f.m, nullptr);
  Bytes expected = arp_frame(1, kBroadcast, kOurMac, kOurIp, config::MacAddress{}, kPeerIp);
  expected.resize(60, 0);
  EXPECT_EQ(f.bytes(), expected);
  // The peer, running the same code, answers it with its own MAC.
  const LocalAddress peer{kPeerMac, config::Ipv4Address{kPeerIp}, 24};
  ASSERT_EQ(classify_arp_icmp(f.m, peer, nullptr), ArpIcmpClass::kAnswerLocally);
  ASSERT_TRUE(answer_locally(f.m, peer, nullptr, nullptr));
  // ... and we learn from the reply.
  ArpIcmpCounters c;
  EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kToControl);
  ArpPeer p;
  ASSERT_TRUE(extract_arp_peer(f.m, kLocal, &p));
  EXPECT_EQ(p.ip.value, kPeerIp);
  EXPECT_EQ(p.mac, kPeerMac);
  EXPECT_TRUE(p.targets_us);
}

TEST(ArpTest, EmptyPoolYieldsNull) {
  rte_mempool* tiny =
      rte_pktmbuf_pool_create("arp_tiny", 1, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(tiny, nullptr);
  rte_mbuf* hold = rte_pktmbuf_alloc(tiny);
  ASSERT_NE(hold, nullptr);
  EXPECT_EQ(build_gratuitous_arp(tiny, kLocal), nullptr);
  EXPECT_EQ(build_arp_request(tiny, kLocal, config::Ipv4Address{kPeerIp}), nullptr);
  rte_pktmbuf_free(hold);
  rte_mempool_free(tiny);
}

// ---- ICMP ----

// Checks a reply against the request it answers, independently of the code under test.
void expect_echo_reply(const Bytes& req, const Bytes& r, size_t payload) {
  const size_t req_ihl = (req[14] & 0xF) * 4;
  ASSERT_EQ(r.size(), 14u + 20 + 8 + payload) << "no options, no padding";
  EXPECT_EQ(get_mac(r, 0), get_mac(req, 6));
  EXPECT_EQ(get_mac(r, 6), kOurMac);
  EXPECT_EQ(get16(r, 12), 0x0800);
  EXPECT_EQ(r[14], 0x45);
  EXPECT_EQ(r[15], req[15]) << "TOS kept";
  EXPECT_EQ(get16(r, 16), 20 + 8 + payload);
  EXPECT_EQ(get16(r, 20), 0) << "not a fragment";
  EXPECT_EQ(r[22], 64) << "TTL reset";
  EXPECT_EQ(r[23], 1);
  EXPECT_EQ(get32(r, 26), kOurIp);
  EXPECT_EQ(get32(r, 30), get32(req, 26));
  EXPECT_EQ(inet_checksum(r, 14, 20), 0) << "IP header checksum";
  EXPECT_EQ(r[34], 0) << "echo reply";
  EXPECT_EQ(r[35], 0);
  EXPECT_EQ(inet_checksum(r, 34, 8 + payload), 0) << "ICMP checksum";
  EXPECT_EQ(get16(r, 38), 0xBEEF);
  EXPECT_EQ(get16(r, 40), 7);
  EXPECT_TRUE(std::equal(r.begin() + 42, r.end(), req.begin() + 14 + req_ihl + 8))
      << "payload echoed";
}

TEST(IcmpTest, EchoRequestsOfManySizesAreAnswered) {
  for (size_t payload : {0u, 1u, 17u, 18u, 56u, 1472u}) {
    SCOPED_TRACE(payload);
    EchoSpec s;
    s.payload = payload;
    s.pad_to = 60;  // short requests arrive padded
    const Bytes req = echo_frame(s);
    Mbuf f(req);
    ArpIcmpCounters c;
    ASSERT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kAnswerLocally);
    ArpPeer peer;
    ASSERT_TRUE(answer_locally(f.m, kLocal, &c, &peer));
    expect_echo_reply(req, f.bytes(), payload);
    EXPECT_EQ(c.echo_replies, 1u);
    EXPECT_EQ(c.total_drops(), 0u);
    EXPECT_EQ(peer.ip.value, 0u) << "ICMP teaches no neighbour";
    EXPECT_EQ(f.m->ol_flags & ~(RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT), 0u);
  }
}

TEST(IcmpTest, IpOptionsAreDroppedFromTheReply) {
  for (const Bytes& options :
       {Bytes{1, 1, 1, 0},                              // NOPs + end of list
        Bytes{7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0}}) {  // record route, odd data
    SCOPED_TRACE(options.size());
    EchoSpec s;
    s.options = options;
    s.payload = 33;
    const Bytes req = echo_frame(s);
    Mbuf f(req);
    ASSERT_EQ(classify_arp_icmp(f.m, kLocal, nullptr), ArpIcmpClass::kAnswerLocally);
    ASSERT_TRUE(answer_locally(f.m, kLocal, nullptr, nullptr));
    expect_echo_reply(req, f.bytes(), 33);
  }
}

TEST(IcmpTest, ChainedMbufWithOddSplitIsVerifiedAndAnswered) {
  EchoSpec s;
  s.payload = 301;
  const Bytes req = echo_frame(s);
  Mbuf f(req, 14 + 20 + 8 + 101);  // payload split at an odd offset into a second segment
  ASSERT_EQ(f.m->nb_segs, 2);
  ASSERT_EQ(classify_arp_icmp(f.m, kLocal, nullptr), ArpIcmpClass::kAnswerLocally);
  ASSERT_TRUE(answer_locally(f.m, kLocal, nullptr, nullptr));
  expect_echo_reply(req, f.bytes(), 301);

  // A corrupted byte in the second segment is caught.
  Bytes bad = req;
  bad[bad.size() - 2] ^= 0x40;
  Mbuf g(bad, 14 + 20 + 8 + 101);
  ArpIcmpCounters c;
  EXPECT_EQ(classify_arp_icmp(g.m, kLocal, &c), ArpIcmpClass::kDrop);
  EXPECT_EQ(c.drop(ArpIcmpDrop::kIcmpBadChecksum), 1u);
}

struct IcmpDropCase {
  const char* name;
  Bytes frame;
  ArpIcmpDrop reason;
};

TEST(IcmpTest, MalformedOrForeignRequestsAreNotAnswered) {
  const Bytes good = echo_frame(EchoSpec{});
  std::vector<IcmpDropCase> cases;
  cases.push_back({"truncated icmp header", Bytes(good.begin(), good.begin() + 14 + 20 + 6),
                   ArpIcmpDrop::kShortFrame});
  cases.push_back({"truncated ip header", Bytes(good.begin(), good.begin() + 14 + 16),
                   ArpIcmpDrop::kShortFrame});
  Bytes bad_ip_ck = good;
  bad_ip_ck[25] ^= 1;
  cases.push_back({"ip checksum", bad_ip_ck, ArpIcmpDrop::kIpBadChecksum});
  Bytes bad_icmp_ck = good;
  bad_icmp_ck[36] ^= 1;
  cases.push_back({"icmp checksum", bad_icmp_ck, ArpIcmpDrop::kIcmpBadChecksum});
  Bytes bad_payload = good;
  bad_payload[60] ^= 0x80;
  cases.push_back({"payload corrupted", bad_payload, ArpIcmpDrop::kIcmpBadChecksum});
  cases.push_back({"frame shorter than total length", Bytes(good.begin(), good.end() - 1),
                   ArpIcmpDrop::kIpBadLength});
  {
    EchoSpec s;
    Bytes b = echo_frame(s);
    b[16] = 0;
    b[17] = 27;  // < IHL + 8
    b[24] = b[25] = 0;
    const uint16_t ck = inet_checksum(b, 14, 20);
    b[24] = uint8_t(ck >> 8);
    b[25] = uint8_t(ck);
    cases.push_back({"total length below headers", b, ArpIcmpDrop::kIpBadLength});
  }
  Bytes bad_ihl = good;
  bad_ihl[14] = 0x44;
  cases.push_back({"ihl 4", bad_ihl, ArpIcmpDrop::kIpBadHeader});
  Bytes v6 = good;
  v6[14] = 0x65;
  cases.push_back({"version 6 in an IPv4 frame", v6, ArpIcmpDrop::kIpBadHeader});
  {
    EchoSpec s;
    s.dst = 0xC6120009;
    cases.push_back({"not our ip", echo_frame(s), ArpIcmpDrop::kIcmpNotForUs});
  }
  {
    EchoSpec s;
    s.dst = 0xC61200FF;
    s.eth_dst = kBroadcast;
    cases.push_back({"broadcast ping", echo_frame(s), ArpIcmpDrop::kIcmpNotForUs});
  }
  {
    EchoSpec s;
    s.eth_dst = config::MacAddress{{0x02, 9, 9, 9, 9, 9}};
    cases.push_back({"not our mac", echo_frame(s), ArpIcmpDrop::kIcmpNotForUs});
  }
  {
    EchoSpec s;
    s.frag = 0x2000;  // MF
    cases.push_back({"first fragment", echo_frame(s), ArpIcmpDrop::kIpFragment});
  }
  {
    EchoSpec s;
    s.type = 0;
    cases.push_back({"echo reply", echo_frame(s), ArpIcmpDrop::kIcmpUnsupported});
  }
  {
    EchoSpec s;
    s.src = 0xE0000001;
    cases.push_back({"multicast source", echo_frame(s), ArpIcmpDrop::kIpBadSource});
  }
  {
    EchoSpec s;
    s.src = kOurIp;
    cases.push_back({"our own source", echo_frame(s), ArpIcmpDrop::kIpBadSource});
  }
  // RFC 1122 §3.2.1.3: 127/8 and 0/8 are never a source on the wire; a reply would go there.
  for (uint32_t martian : {0x7F000001u, 0x7F123456u, 0x00010203u}) {
    EchoSpec s;
    s.src = martian;
    cases.push_back({"martian source", echo_frame(s), ArpIcmpDrop::kIpBadSource});
  }
  {
    EchoSpec s;
    s.eth_src = kOurMac;
    cases.push_back({"looped back", echo_frame(s), ArpIcmpDrop::kLoopedBack});
  }
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    Mbuf f(tc.frame);
    ArpIcmpCounters c;
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kDrop);
    EXPECT_EQ(c.drop(tc.reason), 1u) << arp_icmp_drop_name(tc.reason);
    EXPECT_EQ(c.total_drops(), 1u);
    EXPECT_FALSE(answer_locally(f.m, kLocal, &c, nullptr));
    EXPECT_EQ(c.echo_replies, 0u);
    EXPECT_EQ(f.bytes(), tc.frame) << "not modified";
  }
}

TEST(ClassifyTest, OtherTrafficIsLeftToOtherClassifiers) {
  ArpIcmpCounters c;
  {
    Bytes udp = echo_frame(EchoSpec{});
    udp[23] = 17;  // UDP to our address: RoCEv2's business
    Mbuf f(udp);
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kNotArpIcmp);
  }
  {
    Bytes v6 = echo_frame(EchoSpec{});
    v6[12] = 0x86;
    v6[13] = 0xDD;
    Mbuf f(v6);
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kNotArpIcmp);
  }
  {
    Mbuf f(Bytes(10, 0xAB));  // runt
    EXPECT_EQ(classify_arp_icmp(f.m, kLocal, &c), ArpIcmpClass::kNotArpIcmp);
    EXPECT_FALSE(answer_locally(f.m, kLocal, &c, nullptr));
    EXPECT_EQ(c.drop(ArpIcmpDrop::kReplyFailed), 1u);
  }
  EXPECT_EQ(c.to_control, 0u);
}

TEST(ClassifyTest, DropReasonNamesAreStable) {
  EXPECT_EQ(arp_icmp_drop_name(ArpIcmpDrop::kShortFrame), "short_frame");
  EXPECT_EQ(arp_icmp_drop_name(ArpIcmpDrop::kIcmpBadChecksum), "icmp_bad_checksum");
  EXPECT_EQ(arp_icmp_drop_name(ArpIcmpDrop::kReplyFailed), "reply_failed");
  EXPECT_EQ(arp_icmp_drop_name(ArpIcmpDrop::kCount), "unknown");
}

// ---- robustness: every truncation and every single-byte corruption of valid frames ----

// An mbuf whose data is a heap buffer of exactly the frame's size, so that a read past the frame
// is caught by AddressSanitizer (pool memory is invisible to it).
struct ExactMbuf {
  rte_mbuf* m = nullptr;
  rte_mbuf_ext_shared_info shinfo{};
  explicit ExactMbuf(const Bytes& b) {
    auto* buf = new uint8_t[b.empty() ? 1 : b.size()];
    if (!b.empty()) std::memcpy(buf, b.data(), b.size());
    shinfo.free_cb = [](void* addr, void*) { delete[] static_cast<uint8_t*>(addr); };
    rte_mbuf_ext_refcnt_set(&shinfo, 1);
    m = rte_pktmbuf_alloc(pool());
    rte_pktmbuf_attach_extbuf(m, buf, RTE_BAD_IOVA, uint16_t(b.size()), &shinfo);
    m->data_len = uint16_t(b.size());
    m->pkt_len = uint32_t(b.size());
  }
  ~ExactMbuf() { rte_pktmbuf_free(m); }
  ExactMbuf(const ExactMbuf&) = delete;
  ExactMbuf& operator=(const ExactMbuf&) = delete;
};

// classify and answer agree; a reply, whatever the input was, is well formed.
void check_consistent(const Bytes& frame) {
  ExactMbuf f(frame);
  ArpIcmpCounters c;
  const ArpIcmpClass cls = classify_arp_icmp(f.m, kLocal, &c);
  const bool answered = answer_locally(f.m, kLocal, &c, nullptr);
  ASSERT_EQ(answered, cls == ArpIcmpClass::kAnswerLocally);
  if (!answered) return;
  Bytes r(rte_pktmbuf_pkt_len(f.m));
  std::memcpy(r.data(), rte_pktmbuf_mtod(f.m, const uint8_t*), r.size());
  EXPECT_EQ(get_mac(r, 6), kOurMac);
  if (get16(r, 12) == 0x0800) {
    ASSERT_GE(r.size(), 42u);
    EXPECT_EQ(inet_checksum(r, 14, 20), 0);
    EXPECT_EQ(size_t(get16(r, 16)) + 14, r.size());
    EXPECT_EQ(inet_checksum(r, 34, r.size() - 34), 0);
  } else {
    EXPECT_EQ(get16(r, 20), 2);
    EXPECT_EQ(get32(r, 28), kOurIp);
  }
}

TEST(RobustnessTest, TruncatedAndCorruptedFramesNeverReadPastTheEnd) {
  EchoSpec with_options;
  with_options.options = {7, 7, 4, 0, 0, 0, 0, 1};
  with_options.payload = 33;
  EchoSpec tiny;
  tiny.payload = 1;
  tiny.pad_to = 60;
  const std::vector<Bytes> frames = {
      arp_frame(1, kBroadcast, kPeerMac, kPeerIp, {}, kOurIp),
      arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp),
      echo_frame(EchoSpec{}),
      echo_frame(with_options),
      echo_frame(tiny),
  };
  for (const Bytes& frame : frames) {
    for (size_t len = 0; len <= frame.size(); ++len) {
      SCOPED_TRACE("truncated to " + std::to_string(len));
      check_consistent(Bytes(frame.begin(), frame.begin() + len));
    }
    for (size_t pos = 0; pos < frame.size(); ++pos) {
      for (uint8_t flip : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
        SCOPED_TRACE("byte " + std::to_string(pos) + " ^ " + std::to_string(flip));
        Bytes b = frame;
        b[pos] ^= flip;
        check_consistent(b);
      }
    }
  }
}

}  // namespace
}  // namespace rocedp::dataplane
