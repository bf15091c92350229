// Builder: bytes of known packets, builder -> parser -> builder round trips
// for every opcode, payload 0..4096 and every pad count, and the headroom API.
#include "dataplane/wire/builder.hpp"

#include <gtest/gtest.h>

#include <random>

#include "dataplane/wire/parser.hpp"
#include "tests/wire/wire_test_util.hpp"

namespace rocedp::wire {
namespace {

TEST(Builder, WritesTheExpectedBytesForAnAck) {
  PacketFields f;
  f.eth.dst = {0x02, 0, 0, 0, 0, 0x0c};
  f.eth.src = {0x02, 0, 0, 0, 0, 0x0b};
  f.ip.id = 0x9b4f;
  f.ip.src = 0xC612000B;
  f.ip.dst = 0xC612000C;
  f.udp.src_port = 49762;
  f.bth.opcode = opcode::kRcAck;
  f.bth.dqpn = 0x11;
  f.bth.psn = 516535;
  f.aeth = {0x1F, 1};
  std::vector<std::uint8_t> out(frame_len(f, 0));
  ASSERT_EQ(out.size(), 62u);
  ASSERT_EQ(build_frame(out, f, {}), 62u);
  // IPv4: version/IHL, total length 48, DF, TTL 64, UDP.
  EXPECT_EQ(out[14], 0x45);
  EXPECT_EQ(load_be16(&out[16]), 48);
  EXPECT_EQ(load_be16(&out[20]), 0x4000);
  EXPECT_EQ(out[22], 64);
  EXPECT_EQ(out[23], 17);
  EXPECT_EQ(ipv4_header_checksum(&out[14], 20), load_be16(&out[24]));
  // UDP: ports, length 28, checksum 0.
  EXPECT_EQ(load_be16(&out[34]), 49762);
  EXPECT_EQ(load_be16(&out[36]), 4791);
  EXPECT_EQ(load_be16(&out[38]), 28);
  EXPECT_EQ(load_be16(&out[40]), 0);
  // BTH + AETH.
  const std::uint8_t bth[] = {0x11, 0x00, 0xff, 0xff, 0x00, 0x00,
                              0x00, 0x11, 0x00, 0x07, 0xe1, 0xb7};
  EXPECT_TRUE(std::equal(std::begin(bth), std::end(bth), out.begin() + 42));
  const std::uint8_t aeth[] = {0x1f, 0x00, 0x00, 0x01};
  EXPECT_TRUE(std::equal(std::begin(aeth), std::end(aeth), out.begin() + 54));
  EXPECT_TRUE(icrc_verify(Bytes(out).subspan(14)));
}

TEST(Builder, RoundTripsEveryOpcodePayloadAndPad) {
  std::mt19937 rng(42);
  std::size_t packets = 0;
  const std::size_t lens[] = {0,   1,    2,    3,    4,    5,    63,   64,   255, 256,
                              257, 1023, 1024, 1025, 2047, 4093, 4094, 4095, 4096};
  for (const OpcodeInfo& op : kOpcodeTable) {
    if (!op.valid()) continue;
    const auto code = static_cast<std::uint8_t>(&op - kOpcodeTable.data());
    for (std::size_t want : lens) {
      const std::size_t len = test::legal_payload_len(op, want);
      for (std::uint8_t pad = 0; pad < 4; ++pad) {
        if (op.payload == Payload::kNone || op.payload == Payload::kFixed) {
          if (pad != 0) continue;  // these carry no pad
        }
        PacketFields f = test::sample_fields(code, rng);
        f.eth.has_vlan = (rng() & 3) == 0;
        f.eth.vlan_tci = f.eth.has_vlan ? static_cast<std::uint16_t>(rng()) : 0;
        f.bth.pad = pad;
        const auto payload = test::make_payload(len, static_cast<std::uint8_t>(rng()));
        const auto fr = test::build(f, payload);
        ASSERT_EQ(fr.size(), frame_len(f, len));
        test::ExactBuffer e(fr);
        ParsedPacket p;
        ASSERT_EQ(parse(e.bytes(), p), DropReason::kNone)
            << op.name << " len " << len << " pad " << int(pad) << ": "
            << drop_reason_name(parse(fr, p));
        EXPECT_EQ(p.payload_len, len);
        EXPECT_TRUE(std::equal(payload.begin(), payload.end(), p.payload().begin()));
        EXPECT_EQ(p.f.bth, f.bth);
        // Lengths and checksums were computed; everything else must be what we gave.
        PacketFields expect = f;
        expect.ip.total_len = p.f.ip.total_len;
        expect.ip.checksum = p.f.ip.checksum;
        expect.udp.length = p.f.udp.length;
        auto strip = [&op](PacketFields x) {
          // Fields of headers the opcode does not carry are not on the wire.
          if (!op.has(Hdr::kDeth)) x.deth = {};
          if (!op.has(Hdr::kReth)) x.reth = {};
          if (!op.has(Hdr::kAtomicEth)) x.atomic_eth = {};
          if (!op.has(Hdr::kAeth)) x.aeth = {};
          if (!op.has(Hdr::kAtomicAckEth)) x.atomic_ack_eth = {};
          if (!op.has(Hdr::kImmDt)) x.imm = 0;
          if (!op.has(Hdr::kIeth)) x.ieth_rkey = 0;
          return x;
        };
        EXPECT_EQ(strip(p.f), strip(expect)) << op.name;
        // And back to the identical bytes.
        EXPECT_EQ(test::build(p.f, p.payload()), fr) << op.name << " len " << len;
        ++packets;
      }
    }
  }
  EXPECT_GT(packets, 1000u);
}

TEST(Builder, HeadroomEntryPointMatchesBuildFrame) {
  std::mt19937 rng(8);
  for (std::uint8_t code : {opcode::kRcWriteFirst, opcode::kRcReadRespLast, opcode::kUdSendOnlyImm,
                            opcode::kRcSendOnlyInv}) {
    PacketFields f = test::sample_fields(code, rng);
    const std::size_t len = 1500;
    f.bth.pad = pad_for(len);
    const auto payload = test::make_payload(len, 0x5a);
    const auto want = test::build(f, payload);

    // Headroom of 128 bytes (like an mbuf) followed by the payload in 3 segments.
    std::vector<std::uint8_t> headroom(128, 0xEE);
    const HeaderSpan hs = write_headers(headroom, f, len);
    ASSERT_EQ(hs.headers.size(), header_len(f));
    ASSERT_EQ(hs.headers.data() + hs.headers.size(), headroom.data() + headroom.size())
        << "ends at the payload";
    const Bytes pl(payload);
    const Bytes segs[] = {pl.first(100), pl.subspan(100, 1000), pl.subspan(1100)};
    std::uint8_t tail[8];
    const std::size_t tn = finish_packet(tail, hs, segs, f.bth.pad);
    ASSERT_EQ(tn, f.bth.pad + kIcrcLen);

    std::vector<std::uint8_t> got(hs.headers.begin(), hs.headers.end());
    got.insert(got.end(), payload.begin(), payload.end());
    got.insert(got.end(), tail, tail + tn);
    EXPECT_EQ(got, want) << opcode_name(code);
    // Bytes in front of the headers are untouched.
    EXPECT_EQ(headroom[0], 0xEE);
  }
}

TEST(Builder, RefusesTooSmallBuffersAndUnknownOpcodes) {
  std::mt19937 rng(9);
  PacketFields f = test::sample_fields(opcode::kRcWriteOnly, rng);
  std::vector<std::uint8_t> small(header_len(f) - 1);
  EXPECT_TRUE(write_headers(small, f, 0).headers.empty());
  std::vector<std::uint8_t> out(frame_len(f, 10) - 1);
  EXPECT_EQ(build_frame(out, f, test::make_payload(10, 0)), 0u);
  std::uint8_t tail[3];
  std::vector<std::uint8_t> room(header_len(f));
  const HeaderSpan hs = write_headers(room, f, 0);
  EXPECT_EQ(finish_packet(MutBytes(tail), hs, {}, 0), 0u) << "no room for the ICRC";
  f.bth.opcode = 0x1C;
  EXPECT_EQ(header_len(f), 0u);
  EXPECT_EQ(frame_len(f, 0), 0u);
  std::vector<std::uint8_t> big(256);
  EXPECT_EQ(build_frame(big, f, {}), 0u);
}

TEST(Builder, ForgedIcrcIsWrittenAsGiven) {
  std::mt19937 rng(10);
  PacketFields f = test::sample_fields(opcode::kRcAck, rng);
  BuildOptions o;
  o.fill_icrc = false;
  o.icrc = 0xDEADBEEF;
  const auto fr = test::build(f, {}, o);
  EXPECT_EQ(load_le32(fr.data() + fr.size() - 4), 0xDEADBEEFu);
  ParsedPacket p;
  EXPECT_EQ(parse(fr, p), DropReason::kBadIcrc);
}

}  // namespace
}  // namespace rocedp::wire
