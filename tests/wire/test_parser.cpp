// Parser: valid packets decode; each malformed class is rejected with its
// reason; no input makes it read past the buffer (exact-size heap copies, ASan).
#include "dataplane/wire/parser.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tests/wire/wire_test_util.hpp"

namespace rocedp::wire {
namespace {

using test::build;
using test::ExactBuffer;
using test::reseal;

DropReason parse_exact(Bytes b, ParsedPacket* out = nullptr) {
  ExactBuffer e(b);
  ParsedPacket p;
  const DropReason r = parse(e.bytes(), p);
  if (out) {
    *out = p;
    out->frame = b;  // e dies here
  }
  return r;
}

std::vector<std::uint8_t> frame_of(std::uint8_t opcode, std::size_t payload_len,
                                   std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  PacketFields f = test::sample_fields(opcode, rng);
  payload_len = test::legal_payload_len(*opcode_info(opcode), payload_len);
  f.bth.pad = pad_for(payload_len);
  return build(f, test::make_payload(payload_len, 9));
}

TEST(Parser, DecodesEveryHeaderField) {
  std::mt19937 rng(5);
  PacketFields f = test::sample_fields(opcode::kRcWriteOnlyImm, rng);
  f.eth.has_vlan = true;
  f.eth.vlan_tci = 0x6123;
  f.bth.pad = pad_for(13);
  const auto fr = build(f, test::make_payload(13, 0));
  ParsedPacket p;
  ASSERT_EQ(parse(fr, p), DropReason::kNone);
  EXPECT_EQ(p.l3_offset, kEthHdrLen + kVlanTagLen);
  EXPECT_EQ(p.payload_len, 13u);
  EXPECT_EQ(p.f.bth.pad, 3);
  EXPECT_EQ(p.f.eth, f.eth);
  EXPECT_EQ(p.f.bth, f.bth);
  EXPECT_EQ(p.f.reth, f.reth);
  EXPECT_EQ(p.f.imm, f.imm);
  // Packet-level accessors read the same values through the opcode table.
  EXPECT_EQ(p.reth().va(), f.reth.va);
  EXPECT_EQ(p.reth().rkey(), f.reth.rkey);
  EXPECT_EQ(p.immdt().value(), f.imm);
  EXPECT_EQ(p.bth().psn(), f.bth.psn);
  EXPECT_EQ(p.f.udp.length, 8 + 12 + 16 + 4 + 13 + 3 + 4);
  EXPECT_EQ(p.trailer_len(), 0u);
}

TEST(Parser, AcceptsEthernetTrailerAfterTheIpPacket) {
  auto fr = frame_of(opcode::kRcAck, 0);
  fr.resize(fr.size() + 6, 0);  // minimum-size padding after the IP packet
  ParsedPacket p;
  ASSERT_EQ(parse(fr, p), DropReason::kNone);
  EXPECT_EQ(p.trailer_len(), 6u);
}

TEST(Parser, NotRoceIsNotAFailure) {
  const std::uint8_t arp[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06};
  EXPECT_EQ(parse_exact(Bytes(arp)), DropReason::kNotRoce);
  auto fr = frame_of(opcode::kRcSendOnly, 8);
  auto other_port = fr;
  UdpView<std::uint8_t>(other_port.data() + 34).set_dst_port(4790);
  reseal(other_port);
  EXPECT_EQ(parse_exact(other_port), DropReason::kNotRoce);
  auto tcp = fr;
  tcp[kEthHdrLen + 9] = 6;
  reseal(tcp);
  EXPECT_EQ(parse_exact(tcp), DropReason::kNotRoce);
  auto v6 = fr;  // an IPv4 header under the IPv6 EtherType
  store_be16(v6.data() + 12, kEtherTypeIpv6);
  EXPECT_EQ(parse_exact(v6), DropReason::kIpBadHeader);
  EXPECT_FALSE(is_failure(DropReason::kNotRoce));
}

// RoCEv2 over IPv6 (IBTA A17.4.5.1): untagged and tagged frames round-trip field by field, the
// ICRC covers the IPv6 header with its variant fields masked, and each malformation of the IPv6
// or UDP header is named as for IPv4.
std::vector<std::uint8_t> frame6_of(std::uint8_t opcode, std::size_t payload_len, bool vlan,
                                    PacketFields* fields = nullptr) {
  std::mt19937 rng(11);
  PacketFields f = test::sample_fields(opcode, rng);
  f.eth.ethertype = kEtherTypeIpv6;
  f.eth.has_vlan = vlan;
  f.eth.vlan_tci = vlan ? 0x6005 : 0;
  f.ip6.traffic_class = 0x6A;
  f.ip6.flow_label = 0x12345;
  f.ip6.hop_limit = 63;
  for (std::size_t i = 0; i < 16; ++i) {
    f.ip6.src[i] = static_cast<std::uint8_t>(0xF0 + i);
    f.ip6.dst[i] = static_cast<std::uint8_t>(0x20 + i);
  }
  payload_len = test::legal_payload_len(*opcode_info(opcode), payload_len);
  f.bth.pad = pad_for(payload_len);
  if (fields != nullptr) *fields = f;
  return build(f, test::make_payload(payload_len, 3));
}

TEST(Parser, Ipv6FramesRoundTripEveryField) {
  for (bool vlan : {false, true}) {
    for (std::uint8_t op : {opcode::kRcSendOnly, opcode::kRcWriteOnlyImm, opcode::kRcReadRequest,
                            opcode::kRcAck, opcode::kRcCompareSwap, opcode::kCnp}) {
      SCOPED_TRACE(std::string(opcode_name(op)) + (vlan ? " tagged" : ""));
      PacketFields f;
      const auto fr = frame6_of(op, 13, vlan, &f);
      ParsedPacket p;
      ASSERT_EQ(parse_exact(fr, &p), DropReason::kNone);
      EXPECT_TRUE(p.f.ipv6());
      EXPECT_EQ(p.l3_offset, kEthHdrLen + (vlan ? kVlanTagLen : 0));
      EXPECT_EQ(p.l4_offset, p.l3_offset + kIpv6HdrLen);
      EXPECT_EQ(p.f.ip6.payload_len, fr.size() - p.l4_offset);
      EXPECT_EQ(p.f.ip6.traffic_class, 0x6A);
      EXPECT_EQ(p.f.ip6.flow_label, 0x12345u);
      EXPECT_EQ(p.f.ip6.hop_limit, 63);
      EXPECT_EQ(p.f.ip6.src, f.ip6.src);
      EXPECT_EQ(p.f.ip6.dst, f.ip6.dst);
      EXPECT_EQ(p.f.bth, f.bth);
      // Built again from what was parsed: the same bytes.
      EXPECT_EQ(build(p.f, std::vector<std::uint8_t>(p.payload().begin(), p.payload().end())), fr);
      // The variant fields are outside the ICRC: another class, flow label or hop limit keeps it.
      auto varied = fr;
      std::uint8_t* ip = varied.data() + p.l3_offset;
      set_ipv6_traffic_class(ip, 0x03);
      ip[3] ^= 0x5A;
      ip[ipv6_off::kHopLimit] = 1;
      EXPECT_EQ(parse_exact(varied), DropReason::kNone);
      // An address is inside it.
      auto moved = fr;
      moved[p.l3_offset + ipv6_off::kSrc + 15] ^= 1;
      EXPECT_EQ(parse_exact(moved), DropReason::kBadIcrc);
    }
  }
}

TEST(Parser, Ipv6MalformationsAreNamed) {
  const auto fr = frame6_of(opcode::kRcSendOnly, 8, false);
  ASSERT_EQ(parse_exact(fr), DropReason::kNone);
  constexpr std::size_t ip = kEthHdrLen, udp = ip + kIpv6HdrLen;
  auto version = fr;
  version[ip] = static_cast<std::uint8_t>((version[ip] & 0x0F) | 0x50);
  EXPECT_EQ(parse_exact(version), DropReason::kIpBadHeader);
  auto tcp = fr;
  tcp[ip + ipv6_off::kNextHeader] = 6;
  EXPECT_EQ(parse_exact(tcp), DropReason::kNotRoce);
  auto hop_by_hop = fr;  // an extension header: not the shape RoCEv2 sends
  hop_by_hop[ip + ipv6_off::kNextHeader] = 0;
  EXPECT_EQ(parse_exact(hop_by_hop), DropReason::kNotRoce);
  auto long_payload = fr;
  store_be16(long_payload.data() + ip + ipv6_off::kPayloadLen,
             static_cast<std::uint16_t>(fr.size() - udp + 1));
  EXPECT_EQ(parse_exact(long_payload), DropReason::kIpBadLength);
  auto no_udp = fr;
  store_be16(no_udp.data() + ip + ipv6_off::kPayloadLen, 7);
  EXPECT_EQ(parse_exact(no_udp), DropReason::kUdpTooShort);
  auto other_port = fr;
  UdpView<std::uint8_t>(other_port.data() + udp).set_dst_port(4790);
  EXPECT_EQ(parse_exact(other_port), DropReason::kNotRoce);
  auto udp_len = fr;
  store_be16(udp_len.data() + udp + udp_off::kLen, static_cast<std::uint16_t>(fr.size() - udp - 4));
  EXPECT_EQ(parse_exact(udp_len), DropReason::kUdpBadLength);
  auto icrc = fr;
  icrc[fr.size() - 6] ^= 0x40;  // payload
  EXPECT_EQ(parse_exact(icrc), DropReason::kBadIcrc);
  // Ethernet trailer after the IPv6 packet: kept outside it.
  auto padded = fr;
  padded.insert(padded.end(), 6, 0);
  ParsedPacket p;
  ASSERT_EQ(parse_exact(padded, &p), DropReason::kNone);
  EXPECT_EQ(p.trailer_len(), 6u);
}

TEST(Parser, Ipv6FramesCutAtEveryByteFailWithoutReadingPastThem) {
  const auto fr = frame6_of(opcode::kRcWriteOnly, 20, false);
  ASSERT_EQ(parse_exact(fr), DropReason::kNone);
  for (std::size_t cut = 0; cut < fr.size(); ++cut) {
    const DropReason r = parse_exact(Bytes(fr).first(cut));
    EXPECT_TRUE(is_failure(r)) << cut << " -> " << drop_reason_name(r);
    if (cut >= kEthHdrLen && cut < kEthHdrLen + kIpv6HdrLen) {
      EXPECT_EQ(r, DropReason::kIpTooShort) << cut;
    } else if (cut >= kEthHdrLen + kIpv6HdrLen) {
      EXPECT_EQ(r, DropReason::kIpBadLength) << cut;
    }
  }
}

TEST(Parser, ShortFramesAtEveryLayer) {
  for (std::uint8_t op : {opcode::kRcSendOnly, opcode::kRcWriteOnlyImm, opcode::kRcCompareSwap,
                          opcode::kRcAtomicAck, opcode::kUdSendOnlyImm, opcode::kCnp}) {
    const auto fr = frame_of(op, 20);
    ASSERT_EQ(parse_exact(fr), DropReason::kNone);
    for (std::size_t cut = 0; cut < fr.size(); ++cut) {
      const DropReason r = parse_exact(Bytes(fr).first(cut));
      EXPECT_TRUE(is_failure(r)) << opcode_name(op) << " cut at " << cut << " -> "
                                 << drop_reason_name(r);
      if (cut < kEthHdrLen) {
        EXPECT_EQ(r, DropReason::kEthTooShort);
      } else if (cut < kEthHdrLen + kIpv4MinHdrLen) {
        EXPECT_EQ(r, DropReason::kIpTooShort);
      } else {
        EXPECT_EQ(r, DropReason::kIpBadLength) << "IP total length runs past the frame";
      }
    }
  }
  const std::uint8_t vlan_only[15] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0};
  EXPECT_EQ(parse_exact(Bytes(vlan_only)), DropReason::kEthTooShort);
}

// Shrinks the IP packet to `l4_len` bytes of UDP (lengths consistent) so the
// inner layers are short while IP/UDP agree with the frame.
std::vector<std::uint8_t> shrink_l4(std::vector<std::uint8_t> fr, std::size_t l4_len) {
  fr.resize(kEthHdrLen + kIpv4MinHdrLen + l4_len);
  store_be16(fr.data() + kEthHdrLen + 2, static_cast<std::uint16_t>(kIpv4MinHdrLen + l4_len));
  if (l4_len >= kUdpHdrLen) store_be16(fr.data() + 34 + 4, static_cast<std::uint16_t>(l4_len));
  reseal(fr);
  return fr;
}

TEST(Parser, ShortInnerLayersWithConsistentLengths) {
  const auto fr = frame_of(opcode::kRcReadRequest, 0);
  EXPECT_EQ(parse_exact(shrink_l4(fr, 4)), DropReason::kUdpTooShort);
  EXPECT_EQ(parse_exact(shrink_l4(fr, 8)), DropReason::kBthTooShort);
  EXPECT_EQ(parse_exact(shrink_l4(fr, 8 + 15)), DropReason::kBthTooShort);
  // BTH + ICRC fit, the RETH does not.
  EXPECT_EQ(parse_exact(shrink_l4(fr, 8 + 12 + 4)), DropReason::kHeadersTooShort);
  EXPECT_EQ(parse_exact(shrink_l4(fr, 8 + 12 + 15 + 4)), DropReason::kHeadersTooShort);
}

TEST(Parser, IpHeaderDefects) {
  const auto good = frame_of(opcode::kRcSendOnly, 40);
  auto bad_ver = good;
  bad_ver[kEthHdrLen] = 0x55;
  EXPECT_EQ(parse_exact(bad_ver), DropReason::kIpBadHeader);
  auto small_ihl = good;
  small_ihl[kEthHdrLen] = 0x44;
  EXPECT_EQ(parse_exact(small_ihl), DropReason::kIpBadHeader);
  // IHL 15 (60 bytes) in a frame that ends at 14 + 40.
  std::vector<std::uint8_t> long_ihl(good.begin(), good.begin() + kEthHdrLen + 40);
  long_ihl[kEthHdrLen] = 0x4F;
  EXPECT_EQ(parse_exact(long_ihl), DropReason::kIpBadHeader);
  auto total_small = good;
  store_be16(total_small.data() + kEthHdrLen + 2, 19);
  reseal(total_small);
  EXPECT_EQ(parse_exact(total_small), DropReason::kIpBadLength);
  auto total_big = good;
  store_be16(total_big.data() + kEthHdrLen + 2,
             static_cast<std::uint16_t>(good.size() - kEthHdrLen + 1));
  reseal(total_big);
  EXPECT_EQ(parse_exact(total_big), DropReason::kIpBadLength);
  auto csum = good;
  csum[kEthHdrLen + 10] ^= 0x40;
  EXPECT_EQ(parse_exact(csum), DropReason::kIpBadChecksum);
  // A checksum that computes to 0x0000 may arrive as 0xFFFF (-0: RFC 1071's sum is the same), as
  // Linux's nftables writes it after rewriting the ToS; 0x0001 is wrong.
  ASSERT_EQ(ipv4_header_checksum(test::with_zero_checksum(good, 0).data() + kEthHdrLen, 20), 0);
  EXPECT_EQ(parse_exact(test::with_zero_checksum(good, 0x0000)), DropReason::kNone);
  EXPECT_EQ(parse_exact(test::with_zero_checksum(good, 0xFFFF)), DropReason::kNone);
  EXPECT_EQ(parse_exact(test::with_zero_checksum(good, 0x0001)), DropReason::kIpBadChecksum);
  ParsedPacket p;
  ParseOptions no_csum;
  no_csum.verify_ip_checksum = false;
  EXPECT_EQ(parse(csum, p, no_csum), DropReason::kNone) << "checksum check can be left to the NIC";
  auto mf = good;
  store_be16(mf.data() + kEthHdrLen + 6, kIpv4FlagMf);
  reseal(mf);
  EXPECT_EQ(parse_exact(mf), DropReason::kIpFragment);
  auto off = good;
  store_be16(off.data() + kEthHdrLen + 6, 0x0010);
  reseal(off);
  EXPECT_EQ(parse_exact(off), DropReason::kIpFragment);
}

TEST(Parser, IpOptionsAreCoveredAndKept) {
  std::mt19937 rng(2);
  PacketFields f = test::sample_fields(opcode::kRcSendOnly, rng);
  f.ip.ihl = 6;
  f.ip.options = {0x01, 0x01, 0x01, 0x00};  // NOP NOP NOP EOL
  const auto fr = build(f, test::make_payload(8, 1));
  ParsedPacket p;
  ASSERT_EQ(parse(fr, p), DropReason::kNone);
  EXPECT_EQ(p.l4_offset, kEthHdrLen + 24);
  EXPECT_EQ(p.f.ip.options, f.ip.options);
}

TEST(Parser, UdpLengthInconsistent) {
  const auto good = frame_of(opcode::kRcSendOnly, 40);
  for (int delta : {-1, 1, -20}) {
    auto fr = good;
    UdpView<std::uint8_t> u(fr.data() + 34);
    u.set_length(static_cast<std::uint16_t>(u.length() + delta));
    EXPECT_EQ(parse_exact(fr), DropReason::kUdpBadLength) << delta;
  }
}

TEST(Parser, TransportDefects) {
  auto tver = frame_of(opcode::kRcSendOnly, 4);
  tver[42 + 1] |= 0x01;
  reseal(tver);
  EXPECT_EQ(parse_exact(tver), DropReason::kBadTver);

  // The port holds the default partition only: its full (0xFFFF) and limited (0x7FFF) members
  // pass; any other P_Key, 0x0000 and 0x8000 included, is another partition's.
  for (std::uint16_t pkey : {0xFFFF, 0x7FFF, 0x0000, 0x8000, 0x1234, 0xFFFE, 0x7FFE}) {
    auto fr = frame_of(opcode::kRcSendOnly, 4);
    store_be16(fr.data() + 42 + 2, pkey);
    reseal(fr);
    const bool ours = pkey == 0xFFFF || pkey == 0x7FFF;
    EXPECT_EQ(parse_exact(fr), ours ? DropReason::kNone : DropReason::kBadPkey) << pkey;
  }
  // TVer is checked first.
  store_be16(tver.data() + 42 + 2, 0x1234);
  reseal(tver);
  EXPECT_EQ(parse_exact(tver), DropReason::kBadTver);

  for (std::uint8_t bad : {0x15, 0x18, 0x1C, 0x1D, 0x20, 0x66, 0x80, 0xFF}) {
    auto fr = frame_of(opcode::kRcSendOnly, 4);
    fr[42] = bad;
    reseal(fr);
    EXPECT_EQ(parse_exact(fr), DropReason::kUnknownOpcode) << int(bad);
  }

  // Pad count 3 on a SEND_ONLY with nothing after the BTH.
  auto pad = frame_of(opcode::kRcSendOnly, 0);
  BthView<std::uint8_t>(pad.data() + 42).set_pad(3);
  reseal(pad);
  EXPECT_EQ(parse_exact(pad), DropReason::kPadTooLarge);
  auto pad2 = frame_of(opcode::kRcSendOnly, 2);  // 2 bytes + 2 pad
  BthView<std::uint8_t>(pad2.data() + 42).set_pad(3);
  reseal(pad2);
  EXPECT_EQ(parse_exact(pad2), DropReason::kNone) << "pad 3 <= 4 bytes after the headers";

  std::mt19937 rng(1);
  PacketFields ack = test::sample_fields(opcode::kRcAck, rng);
  EXPECT_EQ(parse_exact(build(ack, test::make_payload(4, 0))), DropReason::kPayloadNotAllowed);
  PacketFields rr = test::sample_fields(opcode::kRcReadRequest, rng);
  rr.bth.pad = 2;
  EXPECT_EQ(parse_exact(build(rr, {})), DropReason::kPayloadNotAllowed)
      << "pad bytes on a no-payload opcode";
  for (std::uint8_t op : {opcode::kRcSendFirst, opcode::kRcSendMiddle, opcode::kRcSendLast,
                          opcode::kRcWriteFirst, opcode::kRcReadRespMiddle}) {
    PacketFields f = test::sample_fields(op, rng);
    EXPECT_EQ(parse_exact(build(f, {})), DropReason::kPayloadMissing) << opcode_name(op);
  }
  PacketFields cnp = test::sample_fields(opcode::kCnp, rng);
  EXPECT_EQ(parse_exact(build(cnp, test::make_payload(8, 0))), DropReason::kBadPayloadLength);
  EXPECT_EQ(parse_exact(build(cnp, test::make_payload(16, 0))), DropReason::kNone);
}

TEST(Parser, BadIcrc) {
  const auto good = frame_of(opcode::kRcWriteOnly, 100);
  for (std::size_t at :
       {std::size_t{43} /* SE */, std::size_t{42 + 12 + 3}, good.size() - 5, good.size() - 1}) {
    auto fr = good;
    fr[at] ^= 0x80;
    EXPECT_EQ(parse_exact(fr), DropReason::kBadIcrc) << at;
  }
  auto fr = good;
  fr[42 + 4] ^= 0x80;  // FECN: a variant bit, not covered by the ICRC
  EXPECT_EQ(parse_exact(fr), DropReason::kNone);
  ParsedPacket p;
  ParseOptions no_icrc;
  no_icrc.verify_icrc = false;
  auto bad = good;
  bad[good.size() - 1] ^= 1;
  EXPECT_EQ(parse(bad, p, no_icrc), DropReason::kNone);
}

TEST(Parser, RandomGarbageNeverReadsPastTheBuffer) {
  std::mt19937 rng(99);
  const auto base = frame_of(opcode::kRcWriteFirst, 64);
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    auto fr = base;
    fr.resize(rng() % (base.size() + 8));
    for (int k = 0; k < 4 && !fr.empty(); ++k)
      fr[rng() % fr.size()] = static_cast<std::uint8_t>(rng());
    if (rng() & 1) reseal(fr);
    parsed += parse_exact(fr) == DropReason::kNone;
  }
  EXPECT_LT(parsed, 20000);
}

TEST(DropReasons, NamesAreUniqueAndStable) {
  std::set<std::string_view> names(kDropReasonNames.begin(), kDropReasonNames.end());
  EXPECT_EQ(names.size(), kDropReasonCount);
  EXPECT_EQ(drop_reason_name(DropReason::kNone), "none");
  EXPECT_EQ(drop_reason_name(DropReason::kBadIcrc), "bad_icrc");
  EXPECT_EQ(drop_reason_name(DropReason::kCount), "invalid");
}

}  // namespace
}  // namespace rocedp::wire
