#include "dataplane/wire/rc_rx.hpp"

#include "dataplane/wire/parser.hpp"

namespace rocedp::wire {

// Any other shape: the general parser, then the same view of its result.
DropReason parse_rc_general(Bytes frame, RcRxPacket& out) {
  ParsedPacket p;
  const DropReason why = parse(frame, p);
  if (why != DropReason::kNone) return why;
  out.bth = frame.data() + p.bth_offset;
  out.op = p.op;
  out.payload_len = p.payload_len;
  out.psn = p.f.bth.psn;
  out.dqpn = p.f.bth.dqpn;
  if (p.f.ipv6()) {
    out.src_ip = 0;
    out.dst_ip = kIpv6DstTag;
    out.ipv6 = 1;
    out.ip6 = frame.data() + p.l3_offset;
  } else {
    out.src_ip = p.f.ip.src;
    out.dst_ip = p.f.ip.dst;
    out.ipv6 = 0;
  }
  out.ecn = p.f.tos() & kEcnMask;
  return DropReason::kNone;
}

namespace {
// parse_tail's checks in its order, from the BTH at `bth` (UDP payload `udp_payload` bytes, the
// IP packet `ip` of `ip_total` bytes whose ICRC `icrc` computes), then the view's BTH fields. The
// caller fills the addresses.
template <class Icrc>
DropReason rc_tail(const std::uint8_t* ip, std::size_t ip_total, const std::uint8_t* bth,
                   std::size_t udp_payload, Icrc icrc, RcRxPacket& out) {
  if (udp_payload < kBthLen + kIcrcLen) return DropReason::kBthTooShort;
  const std::uint32_t w0 = load_be32(bth);  // opcode, flags, P_Key
  const auto flags = static_cast<std::uint8_t>(w0 >> 16);
  if ((w0 & kBthWord0TverPkeyMask) != kPkeyBaseMask)  // which of the two failed: only on a drop
    return (flags & bth_bits::kTverMask) != 0 ? DropReason::kBadTver : DropReason::kBadPkey;
  const OpcodeInfo* op = opcode_info(static_cast<std::uint8_t>(w0 >> 24));
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
  const std::size_t icrc_at = ip_total - kIcrcLen;
  if (icrc(ip, icrc_at) != load_le32(ip + icrc_at)) return DropReason::kBadIcrc;
  out.bth = bth;
  out.op = op;
  out.payload_len = payload_len;
  out.psn = load_be32(bth + 8) & kPsnMask;   // AckReq, PSN
  out.dqpn = load_be32(bth + 4) & kQpnMask;  // resv8a, DestQP
  return DropReason::kNone;
}

// The checks of parse() (parse_ipv6, then parse_tail) in the same order, for untagged Ethernet +
// IPv6 + UDP (the caller checked the version and the next header), decoding only what
// RcRxPacket holds.
DropReason parse_rc_ipv6(Bytes frame, RcRxPacket& out) {
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();
  constexpr std::size_t l3 = kEthHdrLen;
  constexpr std::size_t l4 = l3 + kIpv6HdrLen;
  const std::uint8_t* ip = p + l3;
  const std::size_t total = kIpv6HdrLen + load_be16(ip + ipv6_off::kPayloadLen);
  if (l3 + total > n) return DropReason::kIpBadLength;
  if (total < kIpv6HdrLen + kUdpHdrLen) return DropReason::kUdpTooShort;
  const std::uint8_t* udp = p + l4;
  if (load_be16(udp + udp_off::kDst) != kRoceV2UdpPort) return DropReason::kNotRoce;
  const std::size_t udp_len = load_be16(udp + udp_off::kLen);
  if (udp_len != total - kIpv6HdrLen) return DropReason::kUdpBadLength;
  const DropReason r = rc_tail(
      ip, total, udp + kUdpHdrLen, udp_len - kUdpHdrLen,
      [](const std::uint8_t* at, std::size_t len) { return icrc_plain_ipv6(at, len); }, out);
  if (r != DropReason::kNone) return r;
  out.src_ip = 0;
  out.dst_ip = kIpv6DstTag;
  out.ipv6 = 1;
  out.ip6 = ip;
  out.ecn = ipv6_traffic_class(ip) & kEcnMask;
  return DropReason::kNone;
}
}  // namespace

// The checks of parse() (parse_plain_ipv4, then parse_tail) in the same order, for untagged
// Ethernet + IPv4 without options + UDP, decoding only what RcRxPacket holds; untagged IPv6 + UDP
// in parse_rc_ipv6.
DropReason parse_rc_ordered(Bytes frame, RcRxPacket& out) {
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();
  constexpr std::size_t l3 = kEthHdrLen;
  if (n >= kEthHdrLen + kIpv6HdrLen && load_be16(p + 12) == kEtherTypeIpv6 && (p[l3] >> 4) == 6 &&
      p[l3 + ipv6_off::kNextHeader] == kIpProtoUdp) {
    return parse_rc_ipv6(frame, out);
  }
  if (n < kEthHdrLen + kIpv4MinHdrLen || load_be16(p + 12) != kEtherTypeIpv4 || p[l3] != 0x45 ||
      p[l3 + ipv4_off::kProto] != kIpProtoUdp) {
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
  if (!ipv4_checksum_valid(ip, kIpv4MinHdrLen)) return DropReason::kIpBadChecksum;
  const std::size_t udp_len = load_be16(udp + udp_off::kLen);
  if (udp_len != total - kIpv4MinHdrLen) return DropReason::kUdpBadLength;
  const DropReason r =
      rc_tail(ip, total, udp + kUdpHdrLen, udp_len - kUdpHdrLen, icrc_plain_ipv4, out);
  if (r != DropReason::kNone) return r;
  out.src_ip = load_be32(ip + ipv4_off::kSrc);
  out.dst_ip = load_be32(ip + ipv4_off::kDst);
  out.ecn = ip[ipv4_off::kTos] & kEcnMask;
  out.ipv6 = 0;
  return DropReason::kNone;
}

}  // namespace rocedp::wire
