#pragma once
// The receive-side view of a RoCEv2 frame for the RC data path: one pass over Ethernet, IPv4,
// UDP and BTH fills a compact RcRxPacket with what the RC roles read (opcode, PSN, QPN, the
// addresses, where the extension headers and the payload are), and the extension headers are
// read from the frame only when a role asks for them. The general parser (parser.hpp) decodes
// every field of every header; the data path reads a handful of them. RoCEv2 over IPv6 goes
// through it (parse_rc_general).
//
// parse_rc returns exactly the DropReason parse() returns for the same bytes (the same checks;
// a frame that fails one is checked again in parse()'s order to name it. tests/wire/
// test_rc_rx.cpp compares both over every opcode and every malformation the parser tests build,
// and over random mutations), so every refused frame is counted under the same reason whichever
// parser saw it. Frames of an unusual shape (802.1Q tag, IP options) go through parse() itself.

#include <array>
#include <cstdint>

#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/eth.hpp"
#include "dataplane/wire/ext_headers.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/psn.hpp"
#include "dataplane/wire/udp.hpp"

namespace rocedp::wire {

/// RcRxPacket::dst_ip of an IPv6 frame, and local_ip of an IPv6 QP: 255.255.255.255, which no
/// RoCEv2 packet that reaches a QP has as its IPv4 destination (the port's unicast address). A QP
/// with it compares whole IPv6 addresses after the words.
inline constexpr std::uint32_t kIpv6DstTag = 0xFFFFFFFFu;

struct RcRxPacket {
  const std::uint8_t* bth = nullptr;  // the BTH inside the frame (the frame must outlive this)
  const OpcodeInfo* op = nullptr;     // never null after a successful parse
  std::uint32_t payload_len = 0;      // without pad
  std::uint32_t psn = 0;
  std::uint32_t dqpn = 0;
  std::uint32_t src_ip = 0;  // IPv4, host order; in an IPv6 frame 0 and kIpv6DstTag
  std::uint32_t dst_ip = 0;
  std::uint8_t ecn = 0;   // the IPv4 ToS's (IPv6 traffic class's) ECN bits (kEcnCe: congested)
  std::uint8_t ipv6 = 0;  // 1: an IPv6 frame, whose header `ip6` points at
  const std::uint8_t* ip6 = nullptr;  // set only in an IPv6 frame

  // BTH fields read where they are used (fewer stores per frame in the burst's parse pass).
  std::uint8_t opcode() const { return bth[bth_off::kOpcode]; }
  bool ack_req() const { return (bth[bth_off::kAckReq] & bth_bits::kAckReq) != 0; }
  bool se() const { return (bth[bth_off::kFlags] & bth_bits::kSe) != 0; }
  const std::uint8_t* payload() const { return bth + op->length; }

  // Extension headers, read from the frame: only for an opcode that carries them.
  const std::uint8_t* hdr(Hdr h) const { return bth + op->offset_of(h); }
  RethFields reth() const {
    const std::uint8_t* h = hdr(Hdr::kReth);
    return RethFields{load_be64(h + reth_off::kVa), load_be32(h + reth_off::kRkey),
                      load_be32(h + reth_off::kLen)};
  }
  std::uint8_t aeth_syndrome() const { return hdr(Hdr::kAeth)[aeth_off::kSyndrome]; }
  AtomicEthFields atomic_eth() const {
    AtomicEthView<const std::uint8_t> v(hdr(Hdr::kAtomicEth));
    return AtomicEthFields{v.va(), v.rkey(), v.swap_add(), v.compare()};
  }
  std::uint64_t atomic_ack_orig() const { return load_be64(hdr(Hdr::kAtomicAckEth)); }
  std::uint32_t imm() const { return load_be32(hdr(Hdr::kImmDt)); }
  std::uint32_t ieth_rkey() const { return load_be32(hdr(Hdr::kIeth)); }
};

/// parse_rc for the shapes it does not decode itself: parse(), then the same view.
[[gnu::cold]] DropReason parse_rc_general(Bytes frame, RcRxPacket& out);
/// parse_rc's checks one by one, in parse()'s order: the frames the fast path does not accept
/// (a malformed one learns its reason here; a valid one of a rare shape is decoded).
[[gnu::cold]] DropReason parse_rc_ordered(Bytes frame, RcRxPacket& out);

namespace rc_rx_detail {
// Per opcode, what the fast path of parse_rc needs: the header length (0: not on the fast path,
// i.e. not RC, unknown, or a fixed payload), the least payload and the most payload with pad.
struct FastOp {
  std::uint8_t length = 0;
  std::uint8_t min_payload = 0;
  std::uint16_t max_with_pad = 0;
};
inline constexpr std::array<FastOp, 256> kFastOps = [] {
  std::array<FastOp, 256> t{};
  for (std::size_t i = 0; i < t.size(); ++i) {
    const OpcodeInfo& o = kOpcodeTable[i];
    if (!o.valid() || o.transport != Transport::kRc || o.payload == Payload::kFixed) continue;
    t[i].length = o.length;
    t[i].min_payload = o.payload == Payload::kRequired ? 1 : 0;
    t[i].max_with_pad = o.payload == Payload::kNone ? 0 : 0xFFFF;
  }
  return t;
}();

// The IPv4 header (no options) passes RFC 1071's check (ipv4_checksum_valid, as parse() applies
// it): the one's-complement sum of all ten 16-bit words, checksum included, is 0xFFFF, i.e. the
// plain sum is a non-zero multiple of 0xFFFF (never zero: the version byte is not). A field of
// 0xFFFF for a computed 0x0000 passes, as it must. Words are summed as host-order 32-bit loads:
// a byte swap multiplies the sum by 256 modulo 0xFFFF, which keeps it a multiple.
inline bool ipv4_checksum_ok(const std::uint8_t* ip) {
  const std::uint64_t sum = std::uint64_t{load_le32(ip)} + load_le32(ip + 4) + load_le32(ip + 8) +
                            load_le32(ip + 12) + load_le32(ip + 16);
  return sum % 0xFFFF == 0;
}
}  // namespace rc_rx_detail

// Parses `frame` (IP checksum and ICRC verified). kNone: `out` describes the packet; otherwise
// the reason parse() gives (kNotRoce for a frame that is not IPv4/UDP to 4791), `out` unspecified.
// Inline: it runs once per received frame, inside the engine's burst loop. Every check of
// parse() holds for a frame the fast path accepts (validity is their conjunction, so it tests
// them in any order); any other frame goes through parse_rc_ordered, which names the first
// failing check as parse() does.
inline DropReason parse_rc(Bytes frame, RcRxPacket& out) {
  using rc_rx_detail::kFastOps;
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();
  constexpr std::size_t l3 = kEthHdrLen;
  constexpr std::size_t l4 = l3 + kIpv4MinHdrLen;
  constexpr std::size_t bth = l4 + kUdpHdrLen;
  if (n < bth + kBthLen + kIcrcLen) [[unlikely]]
    return parse_rc_ordered(frame, out);
  const std::uint8_t* ip = p + l3;
  const std::uint8_t* udp = p + l4;
  const std::uint32_t w0 = load_be32(p + bth);  // opcode, flags, P_Key
  const rc_rx_detail::FastOp f = kFastOps[w0 >> 24];
  const std::size_t total = load_be16(ip + ipv4_off::kTotalLen);
  const std::size_t udp_len = load_be16(udp + udp_off::kLen);
  // Wraps (and fails below) when the UDP payload is shorter than the headers and ICRC.
  const std::size_t with_pad = udp_len - kUdpHdrLen - kIcrcLen - f.length;
  const std::size_t pad = (w0 >> (16 + bth_bits::kPadShift)) & 3;
  // Bytes 12..14: EtherType IPv4, version 4 without options. Bytes 6..9 of IPv4: no fragment
  // (MF and offset clear; DF and the TTL are free), protocol UDP. Host-order 32-bit loads.
  constexpr std::uint32_t kEthIpv4 =
      (std::uint32_t{0x45} << 16) | (kEtherTypeIpv4 >> 8) | ((kEtherTypeIpv4 & 0xFF) << 8);
  constexpr std::uint32_t kFragMask = 0xFF00FF00u | ((kIpv4FlagMf | kIpv4FragOffsetMask) >> 8);
  constexpr std::uint32_t kUdpNoFrag = std::uint32_t{kIpProtoUdp} << 24;
  static_assert(ipv4_off::kVerIhl == 0 && ipv4_off::kFlagsFrag + 3 == ipv4_off::kProto);
  static_assert(((kIpv4FlagMf | kIpv4FragOffsetMask) & 0xFF) == 0xFF);
  if ((load_le32(p + 12) & 0x00FFFFFFu) != kEthIpv4 ||
      (load_le32(ip + ipv4_off::kFlagsFrag) & kFragMask) != kUdpNoFrag || l3 + total > n ||
      load_be16(udp + udp_off::kDst) != kRoceV2UdpPort || udp_len != total - kIpv4MinHdrLen ||
      (w0 & kBthWord0TverPkeyMask) != kPkeyBaseMask || f.length == 0 || with_pad > f.max_with_pad ||
      pad + f.min_payload > with_pad || !rc_rx_detail::ipv4_checksum_ok(ip)) [[unlikely]] {
    return parse_rc_ordered(frame, out);
  }
  // The view first (`out` is unspecified on failure): less to keep across the ICRC call.
  out.bth = p + bth;
  out.op = &kOpcodeTable[w0 >> 24];
  out.payload_len = static_cast<std::uint32_t>(with_pad - pad);
  out.psn = load_be32(p + bth + 8) & kPsnMask;   // AckReq, PSN
  out.dqpn = load_be32(p + bth + 4) & kQpnMask;  // resv8a, DestQP
  out.src_ip = load_be32(ip + ipv4_off::kSrc);
  out.dst_ip = load_be32(ip + ipv4_off::kDst);
  out.ecn = ip[ipv4_off::kTos] & kEcnMask;
  out.ipv6 = 0;
  // ICRC (IBTA Annex A17.3.3), little-endian after the pad: the last check in parse()'s order.
  const std::size_t icrc_at = total - kIcrcLen;
  if (icrc_plain_ipv4(ip, icrc_at) != load_le32(ip + icrc_at)) return DropReason::kBadIcrc;
  return DropReason::kNone;
}

}  // namespace rocedp::wire
