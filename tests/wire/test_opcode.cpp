// Opcode table invariants (IBTA §9.2-9.3 header sets).
#include "dataplane/wire/opcode.hpp"

#include <gtest/gtest.h>

#include <set>

namespace rocedp::wire {
namespace {

TEST(OpcodeTable, CoversExactlyTheDocumentedOpcodes) {
  std::set<int> have;
  for (int i = 0; i < 256; ++i)
    if (kOpcodeTable[i].valid()) have.insert(i);
  std::set<int> want;
  for (int i = 0x00; i <= 0x14; ++i) want.insert(i);
  want.insert({0x16, 0x17, 0x64, 0x65, 0x81});
  EXPECT_EQ(have, want);
  // FLUSH and ATOMIC_WRITE are deliberately not spoken (see opcode.hpp).
  EXPECT_EQ(opcode_info(0x1C), nullptr);
  EXPECT_EQ(opcode_info(0x1D), nullptr);
  EXPECT_EQ(opcode_info(0x15), nullptr);
  EXPECT_EQ(opcode_name(0x15), "UNKNOWN");
}

TEST(OpcodeTable, OffsetsAreContiguousInCanonicalOrder) {
  for (const OpcodeInfo& op : kOpcodeTable) {
    if (!op.valid()) continue;
    std::size_t at = kBthLen;
    for (std::size_t h = 0; h < kHdrCount; ++h) {
      if (!op.has(static_cast<Hdr>(h))) continue;
      EXPECT_EQ(op.offset[h], at) << op.name << " " << kHdrName[h];
      at += kHdrLen[h];
    }
    EXPECT_EQ(op.length, at) << op.name;
  }
}

TEST(OpcodeTable, HeaderSetsFollowTheSpec) {
  using namespace opcode;
  auto hdrs = [](std::uint8_t o) { return kOpcodeTable[o].hdr_mask; };
  EXPECT_EQ(hdrs(kRcSendOnly), 0);
  EXPECT_EQ(hdrs(kRcSendOnlyImm), hdr_bit(Hdr::kImmDt));
  EXPECT_EQ(hdrs(kRcWriteFirst), hdr_bit(Hdr::kReth));
  EXPECT_EQ(hdrs(kRcWriteMiddle), 0);
  EXPECT_EQ(hdrs(kRcWriteOnlyImm), hdr_bit(Hdr::kReth) | hdr_bit(Hdr::kImmDt));
  EXPECT_EQ(hdrs(kRcReadRequest), hdr_bit(Hdr::kReth));
  EXPECT_EQ(hdrs(kRcReadRespFirst), hdr_bit(Hdr::kAeth));
  EXPECT_EQ(hdrs(kRcReadRespMiddle), 0) << "READ_RESPONSE_MIDDLE has no AETH";
  EXPECT_EQ(hdrs(kRcReadRespLast), hdr_bit(Hdr::kAeth));
  EXPECT_EQ(hdrs(kRcAck), hdr_bit(Hdr::kAeth));
  EXPECT_EQ(hdrs(kRcAtomicAck), hdr_bit(Hdr::kAeth) | hdr_bit(Hdr::kAtomicAckEth));
  EXPECT_EQ(hdrs(kRcCompareSwap), hdr_bit(Hdr::kAtomicEth));
  EXPECT_EQ(hdrs(kRcSendOnlyInv), hdr_bit(Hdr::kIeth));
  EXPECT_EQ(hdrs(kUdSendOnly), hdr_bit(Hdr::kDeth));
  EXPECT_EQ(hdrs(kUdSendOnlyImm), hdr_bit(Hdr::kDeth) | hdr_bit(Hdr::kImmDt));
  EXPECT_EQ(kOpcodeTable[kCnp].payload, Payload::kFixed);
  EXPECT_EQ(kOpcodeTable[kCnp].fixed_payload, kCnpReservedLen);
}

TEST(OpcodeTable, RolesAndPositionsAreConsistent) {
  for (const OpcodeInfo& op : kOpcodeTable) {
    if (!op.valid()) continue;
    // Exactly one of request/response, except CNP.
    if (op.transport != Transport::kCnp) {
      EXPECT_NE(op.is(op_flag::kRequest), op.is(op_flag::kResponse)) << op.name;
    }
    // Responses never ask for an ACK.
    if (op.is(op_flag::kResponse)) {
      EXPECT_FALSE(op.is(op_flag::kAckReqAllowed)) << op.name;
    }
    // Packets without payload are single-packet messages.
    if (op.payload == Payload::kNone) {
      EXPECT_EQ(op.position, Position::kOnly) << op.name;
    }
    // FIRST/MIDDLE packets always carry a full PMTU of payload.
    if (op.position == Position::kFirst || op.position == Position::kMiddle) {
      EXPECT_EQ(op.payload, Payload::kRequired) << op.name;
    }
    // Immediate data iff an ImmDt header; invalidate iff an IETH.
    EXPECT_EQ(op.is(op_flag::kImm), op.has(Hdr::kImmDt)) << op.name;
    EXPECT_EQ(op.is(op_flag::kInvalidate), op.has(Hdr::kIeth)) << op.name;
    EXPECT_EQ(op.transport == Transport::kUd, op.has(Hdr::kDeth)) << op.name;
    EXPECT_EQ(op.name.starts_with("RC "), op.transport == Transport::kRc) << op.name;
    EXPECT_LE(op.length, kMaxTransportHdrLen);
  }
}

}  // namespace
}  // namespace rocedp::wire
