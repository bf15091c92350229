#pragma once
// The opcode table: one entry per BTH opcode we speak, recording which
// extension headers follow the BTH and at which offset, what payload the
// opcode may carry, its place in a message and its role. Packet-level
// accessors (packet.hpp) find every header through it (CONVENTIONS.md item 9;
// IBTA Vol 1 §9.2-9.3 and Table 41 "Operation codes"; rxe_opcode.c).
//
// Covered: RC 0x00-0x14, 0x16, 0x17 (SEND_LAST/ONLY_WITH_INVALIDATE); UD
// SEND_ONLY 0x64 and SEND_ONLY_WITH_IMM 0x65 (QP1 CM traffic); CNP 0x81.
// Deliberately NOT covered: RC FLUSH 0x1C and ATOMIC_WRITE 0x1D (IBTA 1.5
// persistent-memory extensions). NDK has no verb that produces them, the
// Debian 12 tshark dissector and ../shared/tools/roce-check do not know them,
// so accepting them would only widen the attack surface: the parser drops them
// as unknown_opcode. UC/RD/XRC are out of scope for an RC-only provider.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/wire/bth.hpp"
#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/ext_headers.hpp"

namespace rocedp::wire {

// Extension headers in the order they follow the BTH (IBTA §9.2: DETH first on
// UD, RETH before ImmDt on RDMA WRITE, AETH before AtomicAckETH on responses).
enum class Hdr : std::uint8_t {
  kDeth,
  kReth,
  kAtomicEth,
  kAeth,
  kAtomicAckEth,
  kImmDt,
  kIeth,
  kCount
};
inline constexpr std::size_t kHdrCount = static_cast<std::size_t>(Hdr::kCount);
inline constexpr std::array<std::size_t, kHdrCount> kHdrLen = {
    kDethLen, kRethLen, kAtomicEthLen, kAethLen, kAtomicAckEthLen, kImmDtLen, kIethLen};
inline constexpr std::array<std::string_view, kHdrCount> kHdrName = {
    "DETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH"};
constexpr std::uint8_t hdr_bit(Hdr h) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(h));
}

enum class Transport : std::uint8_t { kRc, kUd, kCnp };
// Where a packet sits in a message (IBTA §9.4: FIRST/MIDDLE/LAST/ONLY).
enum class Position : std::uint8_t { kFirst, kMiddle, kLast, kOnly };
// kNone: no payload allowed; kRequired: at least 1 byte (FIRST/MIDDLE carry a
// full PMTU and LAST 1..PMTU, IBTA §9.7.1); kOptional: 0..PMTU (the ONLY
// packet of a zero-length message); kFixed: exactly fixed_payload bytes.
enum class Payload : std::uint8_t { kNone, kRequired, kOptional, kFixed };

namespace op_flag {
inline constexpr std::uint16_t kRequest = 1 << 0;   // requester -> responder, consumes a PSN
inline constexpr std::uint16_t kResponse = 1 << 1;  // responder -> requester
inline constexpr std::uint16_t kSend = 1 << 2;
inline constexpr std::uint16_t kWrite = 1 << 3;
inline constexpr std::uint16_t kRead = 1 << 4;
inline constexpr std::uint16_t kAtomic = 1 << 5;
inline constexpr std::uint16_t kImm = 1 << 6;
inline constexpr std::uint16_t kInvalidate = 1 << 7;
inline constexpr std::uint16_t kConsumesRecv = 1 << 8;  // uses a receive WQE at the responder
// The responder answers whether or not AckReq is set: READ and atomics have
// explicit responses (IBTA §9.7.5.1.x). Other requests are acknowledged when
// AckReq is set or when the responder coalesces (§9.7.5.1.1).
inline constexpr std::uint16_t kImplicitAck = 1 << 9;
// AckReq may be set: requests only; ACKs and read/atomic responses are never
// acknowledged (§9.2.3 "AckReq ... shall be zero for responses").
inline constexpr std::uint16_t kAckReqAllowed = 1 << 10;
}  // namespace op_flag

struct OpcodeInfo {
  std::string_view name{};  // e.g. "RC SEND_ONLY"; empty = not in the table
  Transport transport = Transport::kRc;
  Position position = Position::kOnly;
  Payload payload = Payload::kNone;
  std::uint8_t hdr_mask = 0;                     // hdr_bit(...) of every header present
  std::array<std::uint8_t, kHdrCount> offset{};  // from the start of the BTH
  std::uint8_t length = 0;                       // BTH + all extension headers
  std::uint16_t fixed_payload = 0;               // for Payload::kFixed
  std::uint16_t flags = 0;

  constexpr bool valid() const { return !name.empty(); }
  constexpr bool has(Hdr h) const { return (hdr_mask & hdr_bit(h)) != 0; }
  constexpr std::size_t offset_of(Hdr h) const { return offset[static_cast<std::size_t>(h)]; }
  constexpr bool is(std::uint16_t f) const { return (flags & f) == f; }
  constexpr bool first() const {
    return position == Position::kFirst || position == Position::kOnly;
  }
  constexpr bool last() const { return position == Position::kLast || position == Position::kOnly; }
};

// The opcode's payload rule (IBTA §9.2.1.4) for `with_pad` bytes after the headers, of which
// `payload_len` are payload: kNone when they fit. One rule for the general parser and the RC view.
constexpr DropReason payload_rule(const OpcodeInfo& op, std::size_t with_pad,
                                  std::uint32_t payload_len) {
  switch (op.payload) {
    case Payload::kNone:
      return with_pad != 0 ? DropReason::kPayloadNotAllowed : DropReason::kNone;
    case Payload::kRequired:
      return payload_len == 0 ? DropReason::kPayloadMissing : DropReason::kNone;
    case Payload::kFixed:
      return with_pad != op.fixed_payload ? DropReason::kBadPayloadLength : DropReason::kNone;
    case Payload::kOptional:
      break;
  }
  return DropReason::kNone;
}

namespace opcode {
inline constexpr std::uint8_t kRcSendFirst = 0x00, kRcSendMiddle = 0x01, kRcSendLast = 0x02,
                              kRcSendLastImm = 0x03, kRcSendOnly = 0x04, kRcSendOnlyImm = 0x05,
                              kRcWriteFirst = 0x06, kRcWriteMiddle = 0x07, kRcWriteLast = 0x08,
                              kRcWriteLastImm = 0x09, kRcWriteOnly = 0x0A, kRcWriteOnlyImm = 0x0B,
                              kRcReadRequest = 0x0C, kRcReadRespFirst = 0x0D,
                              kRcReadRespMiddle = 0x0E, kRcReadRespLast = 0x0F,
                              kRcReadRespOnly = 0x10, kRcAck = 0x11, kRcAtomicAck = 0x12,
                              kRcCompareSwap = 0x13, kRcFetchAdd = 0x14, kRcSendLastInv = 0x16,
                              kRcSendOnlyInv = 0x17, kUdSendOnly = 0x64, kUdSendOnlyImm = 0x65,
                              kCnp = 0x81;
}

// CNP: BTH (BECN set) + 16 reserved bytes + ICRC (RoCEv2 Annex A17.9.3; scapy cnp()).
inline constexpr std::size_t kCnpReservedLen = 16;

namespace detail {
constexpr OpcodeInfo make_op(std::string_view name, Transport t, Position pos, Payload pl,
                             std::uint8_t mask, std::uint16_t flags, std::uint16_t fixed = 0) {
  OpcodeInfo o;
  o.name = name;
  o.transport = t;
  o.position = pos;
  o.payload = pl;
  o.hdr_mask = mask;
  o.flags = flags;
  o.fixed_payload = fixed;
  std::size_t off = kBthLen;
  for (std::size_t h = 0; h < kHdrCount; ++h) {
    if (mask & (1u << h)) {
      o.offset[h] = static_cast<std::uint8_t>(off);
      off += kHdrLen[h];
    }
  }
  o.length = static_cast<std::uint8_t>(off);
  return o;
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  using namespace op_flag;
  constexpr auto R = Transport::kRc;
  constexpr auto F = Position::kFirst, M = Position::kMiddle, L = Position::kLast,
                 O = Position::kOnly;
  constexpr auto kNo = Payload::kNone, kReq = Payload::kRequired, kOpt = Payload::kOptional;
  const std::uint8_t imm = hdr_bit(Hdr::kImmDt), reth = hdr_bit(Hdr::kReth),
                     aeth = hdr_bit(Hdr::kAeth), ieth = hdr_bit(Hdr::kIeth),
                     deth = hdr_bit(Hdr::kDeth), atm = hdr_bit(Hdr::kAtomicEth),
                     atmack = hdr_bit(Hdr::kAtomicAckEth);
  const std::uint16_t rq = kRequest | kAckReqAllowed;
  const std::uint16_t send = rq | kSend | kConsumesRecv;
  const std::uint16_t write = rq | kWrite;
  const std::uint16_t rresp = kResponse | kRead;
  std::array<OpcodeInfo, 256> t{};
  using namespace opcode;
  t[kRcSendFirst] = make_op("RC SEND_FIRST", R, F, kReq, 0, send);
  t[kRcSendMiddle] = make_op("RC SEND_MIDDLE", R, M, kReq, 0, send);
  t[kRcSendLast] = make_op("RC SEND_LAST", R, L, kReq, 0, send);
  t[kRcSendLastImm] = make_op("RC SEND_LAST_WITH_IMMEDIATE", R, L, kReq, imm, send | kImm);
  t[kRcSendOnly] = make_op("RC SEND_ONLY", R, O, kOpt, 0, send);
  t[kRcSendOnlyImm] = make_op("RC SEND_ONLY_WITH_IMMEDIATE", R, O, kOpt, imm, send | kImm);
  t[kRcWriteFirst] = make_op("RC RDMA_WRITE_FIRST", R, F, kReq, reth, write);
  t[kRcWriteMiddle] = make_op("RC RDMA_WRITE_MIDDLE", R, M, kReq, 0, write);
  t[kRcWriteLast] = make_op("RC RDMA_WRITE_LAST", R, L, kReq, 0, write);
  t[kRcWriteLastImm] =
      make_op("RC RDMA_WRITE_LAST_WITH_IMMEDIATE", R, L, kReq, imm, write | kImm | kConsumesRecv);
  t[kRcWriteOnly] = make_op("RC RDMA_WRITE_ONLY", R, O, kOpt, reth, write);
  t[kRcWriteOnlyImm] = make_op("RC RDMA_WRITE_ONLY_WITH_IMMEDIATE", R, O, kOpt, reth | imm,
                               write | kImm | kConsumesRecv);
  t[kRcReadRequest] = make_op("RC RDMA_READ_REQUEST", R, O, kNo, reth, rq | kRead | kImplicitAck);
  t[kRcReadRespFirst] = make_op("RC RDMA_READ_RESPONSE_FIRST", R, F, kReq, aeth, rresp);
  // READ_RESPONSE_MIDDLE carries no AETH (IBTA §9.3.5; rxe_comp.c).
  t[kRcReadRespMiddle] = make_op("RC RDMA_READ_RESPONSE_MIDDLE", R, M, kReq, 0, rresp);
  t[kRcReadRespLast] = make_op("RC RDMA_READ_RESPONSE_LAST", R, L, kReq, aeth, rresp);
  t[kRcReadRespOnly] = make_op("RC RDMA_READ_RESPONSE_ONLY", R, O, kOpt, aeth, rresp);
  t[kRcAck] = make_op("RC ACKNOWLEDGE", R, O, kNo, aeth, kResponse);
  t[kRcAtomicAck] = make_op("RC ATOMIC_ACKNOWLEDGE", R, O, kNo, aeth | atmack, kResponse | kAtomic);
  t[kRcCompareSwap] = make_op("RC CMP_SWAP", R, O, kNo, atm, rq | kAtomic | kImplicitAck);
  t[kRcFetchAdd] = make_op("RC FETCH_ADD", R, O, kNo, atm, rq | kAtomic | kImplicitAck);
  t[kRcSendLastInv] = make_op("RC SEND_LAST_WITH_INVALIDATE", R, L, kReq, ieth, send | kInvalidate);
  t[kRcSendOnlyInv] = make_op("RC SEND_ONLY_WITH_INVALIDATE", R, O, kOpt, ieth, send | kInvalidate);
  // UD: each packet is a whole message; there is no acknowledgement.
  t[kUdSendOnly] =
      make_op("UD SEND_ONLY", Transport::kUd, O, kOpt, deth, kRequest | kSend | kConsumesRecv);
  t[kUdSendOnlyImm] = make_op("UD SEND_ONLY_WITH_IMMEDIATE", Transport::kUd, O, kOpt, deth | imm,
                              kRequest | kSend | kImm | kConsumesRecv);
  t[kCnp] = make_op("CNP", Transport::kCnp, O, Payload::kFixed, 0, 0, kCnpReservedLen);
  return t;
}
}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::make_table();

// The entry for an opcode byte, or nullptr when we do not speak it.
constexpr const OpcodeInfo* opcode_info(std::uint8_t op) {
  return kOpcodeTable[op].valid() ? &kOpcodeTable[op] : nullptr;
}

constexpr std::string_view opcode_name(std::uint8_t op) {
  return kOpcodeTable[op].valid() ? kOpcodeTable[op].name : std::string_view{"UNKNOWN"};
}

// The largest header area after the BTH: RETH + ImmDt (WRITE_ONLY_WITH_IMM) and AtomicETH.
inline constexpr std::size_t kMaxTransportHdrLen = [] {
  std::size_t m = 0;
  for (const auto& o : kOpcodeTable) m = o.length > m ? o.length : m;
  return m;
}();
static_assert(kMaxTransportHdrLen == kBthLen + kAtomicEthLen,
              "AtomicETH is the longest header set");
static_assert(kOpcodeTable[opcode::kRcWriteOnlyImm].offset_of(Hdr::kImmDt) == kBthLen + kRethLen);
static_assert(kOpcodeTable[opcode::kRcAtomicAck].offset_of(Hdr::kAtomicAckEth) ==
              kBthLen + kAethLen);
static_assert(kOpcodeTable[opcode::kUdSendOnlyImm].offset_of(Hdr::kImmDt) == kBthLen + kDethLen);

}  // namespace rocedp::wire
