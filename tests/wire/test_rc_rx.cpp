// The RC receive view: parse_rc gives the DropReason parse() gives for the same bytes (every
// opcode, every malformation the parser tests build, random mutations, the real Soft-RoCE
// capture), and on success the same values as the general parser.
#include "dataplane/wire/rc_rx.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "dataplane/wire/parser.hpp"
#include "dataplane/wire/pcap_io.hpp"
#include "tests/common/tool_run.hpp"
#include "tests/wire/wire_test_util.hpp"

namespace rocedp::wire {
namespace {

// Both parsers over an exact-size copy (ASan: no read past the frame); on success every value
// of the view must equal the general parser's.
DropReason check_same(Bytes frame) {
  test::ExactBuffer e(frame);
  ParsedPacket p;
  RcRxPacket r;
  const DropReason general = parse(e.bytes(), p);
  const DropReason rc = parse_rc(e.bytes(), r);
  EXPECT_EQ(drop_reason_name(rc), drop_reason_name(general));
  if (general != DropReason::kNone || rc != DropReason::kNone) return general;
  const std::uint8_t* base = e.bytes().data();
  EXPECT_EQ(r.bth, base + p.bth_offset);
  EXPECT_EQ(r.op, p.op);
  EXPECT_EQ(r.payload(), base + p.payload_offset);
  EXPECT_EQ(r.payload_len, p.payload_len);
  EXPECT_EQ(r.psn, p.f.bth.psn);
  EXPECT_EQ(r.dqpn, p.f.bth.dqpn);
  EXPECT_EQ(r.ipv6 != 0, p.f.ipv6());
  if (p.f.ipv6()) {  // the whole addresses through ip6; the IPv4 words are the stand-ins
    EXPECT_EQ(r.ip6, base + p.l3_offset);
    EXPECT_EQ(r.src_ip, 0u);
    EXPECT_EQ(r.dst_ip, kIpv6DstTag);
  } else {
    EXPECT_EQ(r.src_ip, p.f.ip.src);
    EXPECT_EQ(r.dst_ip, p.f.ip.dst);
  }
  EXPECT_EQ(r.ecn, p.f.tos() & kEcnMask);
  EXPECT_EQ(r.opcode(), p.f.bth.opcode);
  EXPECT_EQ(r.ack_req(), p.f.bth.ack_req);
  EXPECT_EQ(r.se(), p.f.bth.se);
  const OpcodeInfo& op = *p.op;
  if (op.has(Hdr::kReth)) {
    EXPECT_EQ(r.reth(), p.f.reth);
  }
  if (op.has(Hdr::kAeth)) {
    EXPECT_EQ(r.aeth_syndrome(), p.f.aeth.syndrome);
  }
  if (op.has(Hdr::kAtomicEth)) {
    EXPECT_EQ(r.atomic_eth(), p.f.atomic_eth);
  }
  if (op.has(Hdr::kAtomicAckEth)) {
    EXPECT_EQ(r.atomic_ack_orig(), p.f.atomic_ack_eth.orig);
  }
  if (op.has(Hdr::kImmDt)) {
    EXPECT_EQ(r.imm(), p.f.imm);
  }
  if (op.has(Hdr::kIeth)) {
    EXPECT_EQ(r.ieth_rkey(), p.f.ieth_rkey);
  }
  return general;
}

std::vector<std::uint8_t> sample(std::uint8_t opcode, std::size_t payload, std::mt19937& rng,
                                 bool vlan = false, bool ipv6 = false) {
  PacketFields f = test::sample_fields(opcode, rng);
  f.eth.has_vlan = vlan;
  f.eth.vlan_tci = vlan ? 0x0123 : 0;
  if (ipv6) {
    f.eth.ethertype = kEtherTypeIpv6;
    f.ip6.traffic_class = static_cast<std::uint8_t>(rng());
    f.ip6.flow_label = rng() & 0xFFFFF;
    for (auto& x : f.ip6.src) x = static_cast<std::uint8_t>(rng());
    for (auto& x : f.ip6.dst) x = static_cast<std::uint8_t>(rng());
  }
  payload = test::legal_payload_len(*opcode_info(opcode), payload);
  f.bth.pad = pad_for(payload);
  return test::build(f, test::make_payload(payload, static_cast<std::uint8_t>(opcode)));
}

TEST(RcRx, EveryOpcodeParsesLikeTheGeneralParser) {
  std::mt19937 rng(11);
  int n = 0;
  for (int code = 0; code < 256; ++code) {
    if (opcode_info(static_cast<std::uint8_t>(code)) == nullptr) continue;
    for (std::size_t len : {0, 1, 3, 4, 64, 1024}) {
      for (bool vlan : {false, true}) {
        for (bool ipv6 : {false, true}) {
          EXPECT_EQ(check_same(sample(static_cast<std::uint8_t>(code), len, rng, vlan, ipv6)),
                    DropReason::kNone)
              << opcode_name(static_cast<std::uint8_t>(code)) << " payload " << len;
          ++n;
        }
      }
    }
  }
  EXPECT_GT(n, 100);
}

TEST(RcRx, MalformedFramesGetTheGeneralParsersReason) {
  std::mt19937 rng(12);
  auto fr = sample(opcode::kRcWriteOnly, 64, rng);
  std::vector<std::vector<std::uint8_t>> bad;
  for (std::size_t cut = 0; cut < fr.size(); cut += 3)
    bad.emplace_back(fr.begin(), fr.begin() + cut);
  auto forge = [&](std::size_t at, std::uint8_t v, bool reseal) {
    auto b = fr;
    b[at] = v;
    if (reseal) test::reseal(b);
    bad.push_back(b);
  };
  const std::size_t ip = kEthHdrLen, udp = ip + kIpv4MinHdrLen, bth = udp + kUdpHdrLen;
  forge(12, 0x86, false);                    // not IPv4
  forge(ip, 0x46, false);                    // IP options claimed, none there
  forge(ip, 0x55, false);                    // IPv5
  forge(ip + 9, 6, false);                   // TCP
  forge(ip + 2, 0xFF, true);                 // total length past the frame
  forge(ip + 3, 10, true);                   // total length below the headers
  forge(ip + 6, 0x20, true);                 // more fragments
  forge(ip + 7, 0x01, true);                 // fragment offset
  forge(ip + 10, 0x00, false);               // IP checksum
  forge(udp + 3, 0xB6, true);                // UDP port 4790
  forge(udp + 5, 0x01, true);                // UDP length
  forge(bth, 0x1C, true);                    // FLUSH: not spoken
  forge(bth, opcode::kRcAck, true);          // payload on an ACK
  forge(bth + 1, 0x01, true);                // TVer 1
  forge(bth + 1, 0x30, true);                // pad 3
  forge(bth + 2, 0x12, true);                // P_Key 0x12FF: another partition
  forge(bth + 3, 0xFE, true);                // P_Key 0xFFFE
  forge(bth + 2, 0x7F, true);                // P_Key 0x7FFF: a limited member, accepted
  forge(bth, opcode::kRcSendMiddle, true);   // SEND_MIDDLE: no RETH, 16 more payload bytes
  forge(bth, opcode::kRcCompareSwap, true);  // AtomicETH longer than the rest
  forge(fr.size() - 2, 0x00, false);         // ICRC
  forge(fr.size() - 20, 0x00, false);        // payload byte: ICRC
  for (const auto& b : bad) check_same(b);
  // An IPv4 checksum of 0x0000 written as 0xFFFF (-0) is valid for both parsers; 0xFFFE is not.
  EXPECT_EQ(check_same(test::with_zero_checksum(fr, 0xFFFF)), DropReason::kNone);
  EXPECT_EQ(check_same(test::with_zero_checksum(fr, 0x0000)), DropReason::kNone);
  EXPECT_EQ(check_same(test::with_zero_checksum(fr, 0xFFFE)), DropReason::kIpBadChecksum);
  // IPv6: each malformation of its header and UDP's (the ICRC resealed where the check after it
  // is the one meant).
  auto fr6 = sample(opcode::kRcWriteOnly, 64, rng, false, true);
  EXPECT_EQ(check_same(fr6), DropReason::kNone);
  const std::size_t udp6 = ip + kIpv6HdrLen, bth6 = udp6 + kUdpHdrLen;
  auto reseal6 = [](std::vector<std::uint8_t>& b) {
    const std::size_t end = kEthHdrLen + kIpv6HdrLen + load_be16(b.data() + kEthHdrLen + 4);
    if (end > b.size() || end < kEthHdrLen + kIpv6HdrLen + kUdpHdrLen + kBthLen + kIcrcLen) return;
    const Bytes l3(b.data() + kEthHdrLen, end - kEthHdrLen - kIcrcLen);
    store_le32(b.data() + end - kIcrcLen, icrc_compute(l3));
  };
  std::vector<std::vector<std::uint8_t>> bad6;
  for (std::size_t cut = 0; cut < fr6.size(); cut += 3)
    bad6.emplace_back(fr6.begin(), fr6.begin() + cut);
  auto forge6 = [&](std::size_t at, std::uint8_t v, bool reseal) {
    auto b = fr6;
    b[at] = v;
    if (reseal) reseal6(b);
    bad6.push_back(b);
  };
  forge6(ip, 0x50, false);                     // version 5
  forge6(ip + 6, 6, false);                    // TCP
  forge6(ip + 6, 0, false);                    // a hop-by-hop header
  forge6(ip + 4, 0xFF, false);                 // payload length past the frame
  forge6(ip + 5, 4, false);                    // payload length below UDP's
  forge6(udp6 + 3, 0xB6, true);                // UDP port 4790
  forge6(udp6 + 5, 0x01, true);                // UDP length
  forge6(bth6, 0x1C, true);                    // FLUSH
  forge6(bth6 + 1, 0x01, true);                // TVer 1
  forge6(bth6 + 3, 0x00, true);                // P_Key 0xFF00
  forge6(bth6, opcode::kRcCompareSwap, true);  // AtomicETH longer than the rest
  forge6(ip + 8, 0x00, false);                 // source address: ICRC
  forge6(fr6.size() - 20, 0x00, false);        // payload byte: ICRC
  for (const auto& b : bad6) check_same(b);
  // ARP and a short Ethernet frame.
  const std::uint8_t arp[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06};
  EXPECT_EQ(check_same(Bytes(arp)), DropReason::kNotRoce);
  EXPECT_EQ(check_same(Bytes(arp, 10)), DropReason::kEthTooShort);
}

TEST(RcRx, RandomMutationsGetTheGeneralParsersReason) {
  std::mt19937 rng(13);
  const std::uint8_t ops[] = {
      opcode::kRcSendOnly, opcode::kRcWriteFirst, opcode::kRcReadRequest, opcode::kRcReadRespOnly,
      opcode::kRcAck,      opcode::kRcAtomicAck,  opcode::kRcFetchAdd,    opcode::kRcSendOnlyImm,
      opcode::kUdSendOnly, opcode::kCnp};
  for (int i = 0; i < 20000; ++i) {
    auto fr = sample(ops[rng() % std::size(ops)], rng() % 200, rng, rng() % 8 == 0, rng() % 4 == 0);
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k)
      fr[rng() % fr.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    // Keep the checksums, so deeper checks are reached (reseal reads the IP header the IHL
    // claims: only when the frame holds it).
    const std::size_t ihl = fr.size() > kEthHdrLen ? std::size_t{fr[kEthHdrLen] & 0x0Fu} * 4 : 0;
    if (rng() % 2 && fr.size() >= kEthHdrLen + ihl) test::reseal(fr);
    if (rng() % 4 == 0) fr.resize(rng() % fr.size());
    check_same(fr);
  }
}

TEST(RcRx, SoftRoceCaptureParsesLikeTheGeneralParser) {
  const std::string dir = rocedp::test::env("ROCEDP_SHARED_DIR");
  ASSERT_FALSE(dir.empty());
  PcapReader reader;
  ASSERT_TRUE(reader.open(dir + "/captures/rxe-rping.pcap")) << reader.error();
  PcapFrame frame;
  int roce = 0;
  while (reader.next(frame)) roce += check_same(frame.data) == DropReason::kNone;
  EXPECT_EQ(roce, 125);  // ../shared/captures/README.md
}

}  // namespace
}  // namespace rocedp::wire
