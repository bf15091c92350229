#pragma once
// The receive-side view of a RoCEv2 frame for the RC data path: one pass over Ethernet, IPv4,
// UDP and BTH fills a compact RcRxPacket with what the RC roles read (opcode, PSN, QPN, the
// addresses, where the extension headers and the payload are), and the extension headers are
// read from the frame only when a role asks for them. The general parser (parser.hpp) decodes
// every field of every header; the data path reads a handful of them.
//
// parse_rc returns exactly the DropReason parse() returns for the same bytes (same checks, same
// order; tests/wire/test_rc_rx.cpp compares both over every opcode and every malformation the
// parser tests build, and over random mutations), so every refused frame is counted under the
// same reason whichever parser saw it. Frames of an unusual shape (802.1Q tag, IP options) go
// through parse() itself.

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

struct RcRxPacket {
  const std::uint8_t* bth = nullptr;  // the BTH inside the frame (the frame must outlive this)
  const OpcodeInfo* op = nullptr;     // never null after a successful parse
  const std::uint8_t* payload = nullptr;
  std::uint32_t payload_len = 0;  // without pad
  std::uint32_t psn = 0;
  std::uint32_t dqpn = 0;
  std::uint32_t src_ip = 0;  // host order
  std::uint32_t dst_ip = 0;
  std::uint8_t opcode = 0;
  bool ack_req = false;
  bool se = false;

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

// Parses `frame` (IP checksum and ICRC verified). kNone: `out` describes the packet; otherwise
// the reason parse() gives (kNotRoce for a frame that is not IPv4/UDP to 4791), `out` unspecified.
// Inline: it runs once per received frame, inside the engine's burst loop.
// The checks of parse() (parse_plain_ipv4, then parse_tail) in the same order, for untagged
// Ethernet + IPv4 without options + UDP, decoding only what RcRxPacket holds.
inline DropReason parse_rc(Bytes frame, RcRxPacket& out) {
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();
  constexpr std::size_t l3 = kEthHdrLen;
  if (n < kEthHdrLen + kIpv4MinHdrLen || load_be16(p + 12) != kEtherTypeIpv4 || p[l3] != 0x45 ||
      p[l3 + ipv4_off::kProto] != kIpProtoUdp) [[unlikely]] {
    return parse_rc_general(frame, out);
  }
  const std::uint8_t* ip = p + l3;
  const std::size_t total = load_be16(ip + ipv4_off::kTotalLen);
  const std::uint16_t flags_frag = load_be16(ip + ipv4_off::kFlagsFrag);
  if (total < kIpv4MinHdrLen || l3 + total > n) return DropReason::kIpBadLength;
  if ((flags_frag & kIpv4FragOffsetMask) != 0) return DropReason::kIpFragment;
  if (total < kIpv4MinHdrLen + kUdpHdrLen) return DropReason::kUdpTooShort;
  constexpr std::size_t l4 = l3 + kIpv4MinHdrLen;
  const std::uint8_t* udp = p + l4;
  if (load_be16(udp + udp_off::kDst) != kRoceV2UdpPort) return DropReason::kNotRoce;
  if (flags_frag & kIpv4FlagMf) return DropReason::kIpFragment;
  if (ipv4_header_checksum(ip, kIpv4MinHdrLen) != load_be16(ip + ipv4_off::kChecksum))
    return DropReason::kIpBadChecksum;
  const std::size_t udp_len = load_be16(udp + udp_off::kLen);
  if (udp_len != total - kIpv4MinHdrLen) return DropReason::kUdpBadLength;
  const std::size_t udp_payload = udp_len - kUdpHdrLen;
  if (udp_payload < kBthLen + kIcrcLen) return DropReason::kBthTooShort;

  constexpr std::size_t bth = l4 + kUdpHdrLen;
  const std::uint32_t w0 = load_be32(p + bth);  // opcode, flags, P_Key
  const auto flags = static_cast<std::uint8_t>(w0 >> 16);
  if ((flags & bth_bits::kTverMask) != 0) return DropReason::kBadTver;
  const auto opcode = static_cast<std::uint8_t>(w0 >> 24);
  const OpcodeInfo* op = opcode_info(opcode);
  if (op == nullptr) return DropReason::kUnknownOpcode;
  if (udp_payload < op->length + kIcrcLen) return DropReason::kHeadersTooShort;

  // Payload and pad (IBTA §9.2.1.4: pad count is the bytes after the payload).
  const std::size_t pad = (flags & bth_bits::kPadMask) >> bth_bits::kPadShift;
  const std::size_t with_pad = udp_payload - op->length - kIcrcLen;
  if (pad > with_pad) return DropReason::kPadTooLarge;
  const auto payload_len = static_cast<std::uint32_t>(with_pad - pad);
  if (const DropReason r = payload_rule(*op, with_pad, payload_len); r != DropReason::kNone)
    return r;

  // ICRC (IBTA Annex A17.3.3), little-endian after the pad.
  const std::size_t icrc_at = l3 + total - kIcrcLen;
  if (icrc_plain_ipv4(ip, icrc_at - l3) != load_le32(p + icrc_at)) return DropReason::kBadIcrc;

  const std::uint32_t w1 = load_be32(p + bth + 4);  // resv8a, DestQP
  const std::uint32_t w2 = load_be32(p + bth + 8);  // AckReq, PSN
  out.bth = p + bth;
  out.op = op;
  out.payload = p + bth + op->length;
  out.payload_len = payload_len;
  out.psn = w2 & kPsnMask;
  out.dqpn = w1 & kQpnMask;
  out.src_ip = load_be32(ip + ipv4_off::kSrc);
  out.dst_ip = load_be32(ip + ipv4_off::kDst);
  out.opcode = opcode;
  out.ack_req = (w2 >> 24) & bth_bits::kAckReq;
  out.se = flags & bth_bits::kSe;
  return DropReason::kNone;
}

}  // namespace rocedp::wire
