#include "dataplane/wire/parser.hpp"

#include <cstring>

#include "dataplane/wire/icrc.hpp"

namespace rocedp::wire {

namespace {

// Payload, pad and ICRC checks shared by both paths; `bth` is the BTH offset, `udp_payload` the
// UDP payload length (already >= BTH + ICRC).
DropReason parse_tail(Bytes frame, ParsedPacket& out, const ParseOptions& opts, std::size_t l3,
                      std::size_t bth, std::size_t udp_payload) {
  const std::uint8_t* p = frame.data();
  PacketFields& f = out.f;
  if (f.bth.tver != 0) return DropReason::kBadTver;
  if (!pkey_matches_default(f.bth.pkey)) return DropReason::kBadPkey;
  const OpcodeInfo* op = opcode_info(f.bth.opcode);
  if (op == nullptr) return DropReason::kUnknownOpcode;
  out.op = op;
  if (udp_payload < op->length + kIcrcLen) return DropReason::kHeadersTooShort;
  if (op->hdr_mask != 0) decode_ext_headers(p + bth, *op, f);

  // Payload and pad (IBTA §9.2.1.4: pad count is the bytes after the payload).
  const std::size_t with_pad = udp_payload - op->length - kIcrcLen;
  if (f.bth.pad > with_pad) return DropReason::kPadTooLarge;
  out.payload_offset = static_cast<std::uint16_t>(bth + op->length);
  out.payload_len = static_cast<std::uint32_t>(with_pad - f.bth.pad);
  if (const DropReason r = payload_rule(*op, with_pad, out.payload_len); r != DropReason::kNone)
    return r;

  // ICRC (IBTA Annex A17.3.3), little-endian after the pad.
  const std::size_t icrc_at = out.l3_end - kIcrcLen;
  out.icrc = load_le32(p + icrc_at);
  if (opts.verify_icrc && icrc_compute(frame.subspan(l3, icrc_at - l3)) != out.icrc)
    return DropReason::kBadIcrc;
  return DropReason::kNone;
}

// From a UDP header checked by the IP version's own rules on: the offsets, the BTH (`total`: the IP
// packet's bytes, `l4`: the UDP header's offset), then parse_tail.
DropReason parse_from_udp(Bytes frame, ParsedPacket& out, const ParseOptions& opts, std::size_t l3,
                          std::size_t l4, std::size_t total) {
  out.l3_offset = static_cast<std::uint16_t>(l3);
  out.l4_offset = static_cast<std::uint16_t>(l4);
  out.l3_end = static_cast<std::uint32_t>(l3 + total);
  const std::size_t udp_payload = out.f.udp.length - kUdpHdrLen;
  if (udp_payload < kBthLen + kIcrcLen) return DropReason::kBthTooShort;
  const std::size_t bth = l4 + kUdpHdrLen;
  out.bth_offset = static_cast<std::uint16_t>(bth);
  decode_bth_into(frame.data() + bth, out.f.bth);
  return parse_tail(frame, out, opts, l3, bth, udp_payload);
}

// The shape of nearly every frame: untagged Ethernet, IPv4 without options, UDP. The same checks
// in the same order as the general path below, and the same fields filled, with wide loads and
// without first resetting the whole ParsedPacket (every field is written here).
DropReason parse_plain_ipv4(Bytes frame, ParsedPacket& out, const ParseOptions& opts) {
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();
  constexpr std::size_t l3 = kEthHdrLen;
  const std::uint8_t* ip = p + l3;
  PacketFields& f = out.f;
  out.frame = frame;
  out.op = nullptr;
  out.l3_offset = out.l4_offset = out.bth_offset = out.payload_offset = 0;
  out.payload_len = out.l3_end = out.icrc = 0;
  std::memcpy(f.eth.dst.data(), p, 6);
  std::memcpy(f.eth.src.data(), p + 6, 6);
  f.eth.has_vlan = false;
  f.eth.vlan_tci = 0;
  f.eth.ethertype = kEtherTypeIpv4;
  f.ip.ihl = 5;
  f.ip.tos = ip[ipv4_off::kTos];
  f.ip.total_len = load_be16(ip + ipv4_off::kTotalLen);
  f.ip.id = load_be16(ip + ipv4_off::kId);
  f.ip.flags_frag = load_be16(ip + ipv4_off::kFlagsFrag);
  f.ip.ttl = ip[ipv4_off::kTtl];
  f.ip.protocol = kIpProtoUdp;
  f.ip.checksum = load_be16(ip + ipv4_off::kChecksum);
  f.ip.src = load_be32(ip + ipv4_off::kSrc);
  f.ip.dst = load_be32(ip + ipv4_off::kDst);
  f.ip.options = {};
  f.udp = UdpFields{};
  f.bth = BthFields{};
  f.deth = DethFields{};
  f.reth = RethFields{};
  f.atomic_eth = AtomicEthFields{};
  f.aeth = AethFields{};
  f.atomic_ack_eth = AtomicAckEthFields{};
  f.imm = 0;
  f.ieth_rkey = 0;

  const std::size_t total = f.ip.total_len;
  if (total < kIpv4MinHdrLen || l3 + total > n) return DropReason::kIpBadLength;
  if ((f.ip.flags_frag & kIpv4FragOffsetMask) != 0) return DropReason::kIpFragment;
  if (total < kIpv4MinHdrLen + kUdpHdrLen) return DropReason::kUdpTooShort;
  constexpr std::size_t l4 = l3 + kIpv4MinHdrLen;
  f.udp = decode_udp(p + l4);
  if (f.udp.dst_port != kRoceV2UdpPort) return DropReason::kNotRoce;
  if (f.ip.flags_frag & kIpv4FlagMf) return DropReason::kIpFragment;
  if (opts.verify_ip_checksum && !ipv4_checksum_valid(ip, kIpv4MinHdrLen))
    return DropReason::kIpBadChecksum;
  if (f.udp.length != total - kIpv4MinHdrLen) return DropReason::kUdpBadLength;
  out.l3_offset = l3;
  out.l4_offset = l4;
  out.l3_end = static_cast<std::uint32_t>(l3 + total);

  const std::size_t udp_payload = f.udp.length - kUdpHdrLen;
  if (udp_payload < kBthLen + kIcrcLen) return DropReason::kBthTooShort;
  constexpr std::size_t bth = l4 + kUdpHdrLen;
  out.bth_offset = bth;
  // BTH in two wide loads: bytes 0-3 (opcode, flags, P_Key) and 4-7, 8-11 (resv8a+DestQP,
  // AckReq+PSN).
  const std::uint32_t w0 = load_be32(p + bth);
  const std::uint32_t w1 = load_be32(p + bth + 4);
  const std::uint32_t w2 = load_be32(p + bth + 8);
  const auto flags = static_cast<std::uint8_t>(w0 >> 16);
  f.bth.opcode = static_cast<std::uint8_t>(w0 >> 24);
  f.bth.se = flags & bth_bits::kSe;
  f.bth.mig = flags & bth_bits::kMig;
  f.bth.pad = (flags & bth_bits::kPadMask) >> bth_bits::kPadShift;
  f.bth.tver = flags & bth_bits::kTverMask;
  f.bth.pkey = static_cast<std::uint16_t>(w0);
  const auto resv8a = static_cast<std::uint8_t>(w1 >> 24);
  f.bth.fecn = resv8a & bth_bits::kFecn;
  f.bth.becn = resv8a & bth_bits::kBecn;
  f.bth.resv6 = resv8a & bth_bits::kResv6Mask;
  f.bth.dqpn = w1 & 0xFFFFFF;
  const auto ackreq = static_cast<std::uint8_t>(w2 >> 24);
  f.bth.ack_req = ackreq & bth_bits::kAckReq;
  f.bth.resv7 = ackreq & bth_bits::kResv7Mask;
  f.bth.psn = w2 & 0xFFFFFF;
  return parse_tail(frame, out, opts, l3, bth, udp_payload);
}

// IPv6 (RFC 8200) without extension headers, from `l3` on: RoCEv2 over IPv6 (IBTA A17.4.5.1).
// The same checks as IPv4 where they apply; IPv6 has no header checksum and no fragments without
// a Fragment header, which is not UDP and so not ours.
DropReason parse_ipv6(Bytes frame, ParsedPacket& out, const ParseOptions& opts, std::size_t l3) {
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();
  PacketFields& f = out.f;
  if (n < l3 + kIpv6HdrLen) return DropReason::kIpTooShort;
  if ((p[l3] >> 4) != 6) return DropReason::kIpBadHeader;
  decode_ipv6_into(p + l3, f.ip6);
  if (f.ip6.next_header != kIpProtoUdp) return DropReason::kNotRoce;
  const std::size_t total = kIpv6HdrLen + f.ip6.payload_len;
  if (l3 + total > n) return DropReason::kIpBadLength;
  if (total < kIpv6HdrLen + kUdpHdrLen) return DropReason::kUdpTooShort;
  const std::size_t l4 = l3 + kIpv6HdrLen;
  f.udp = decode_udp(p + l4);
  if (f.udp.dst_port != kRoceV2UdpPort) return DropReason::kNotRoce;
  if (f.udp.length != f.ip6.payload_len) return DropReason::kUdpBadLength;
  return parse_from_udp(frame, out, opts, l3, l4, total);
}

}  // namespace

DropReason parse(Bytes frame, ParsedPacket& out, const ParseOptions& opts) {
  {
    const std::uint8_t* p = frame.data();
    if (frame.size() >= kEthHdrLen + kIpv4MinHdrLen && load_be16(p + 12) == kEtherTypeIpv4 &&
        p[kEthHdrLen] == 0x45 && p[kEthHdrLen + ipv4_off::kProto] == kIpProtoUdp) [[likely]] {
      return parse_plain_ipv4(frame, out, opts);
    }
  }
  out = ParsedPacket{};
  out.frame = frame;
  const std::uint8_t* p = frame.data();
  const std::size_t n = frame.size();

  // Ethernet II, optionally one 802.1Q tag.
  if (n < kEthHdrLen) return DropReason::kEthTooShort;
  EthView<const std::uint8_t> eth(p);
  PacketFields& f = out.f;
  f.eth.dst = eth.dst();
  f.eth.src = eth.src();
  std::size_t l3 = kEthHdrLen;
  f.eth.ethertype = eth.type();
  if (f.eth.ethertype == kEtherTypeVlan) {
    if (n < kEthHdrLen + kVlanTagLen) return DropReason::kEthTooShort;
    f.eth.has_vlan = true;
    f.eth.vlan_tci = eth.vlan_tci();
    f.eth.ethertype = eth.inner_type();
    l3 += kVlanTagLen;
  }
  if (f.eth.ethertype == kEtherTypeIpv6) return parse_ipv6(frame, out, opts, l3);
  if (f.eth.ethertype != kEtherTypeIpv4) return DropReason::kNotRoce;

  // IPv4 (RFC 791).
  if (n < l3 + kIpv4MinHdrLen) return DropReason::kIpTooShort;
  Ipv4View<const std::uint8_t> ip(p + l3);
  if (ip.version() != 4 || ip.ihl() < 5) return DropReason::kIpBadHeader;
  const std::size_t ip_len = ip.header_len();
  if (n < l3 + ip_len) return DropReason::kIpBadHeader;
  if (ip.protocol() != kIpProtoUdp) return DropReason::kNotRoce;
  decode_ipv4_into(p + l3, f.ip);
  const std::size_t total = ip.total_len();
  if (total < ip_len || l3 + total > n) return DropReason::kIpBadLength;
  // A non-first fragment has no UDP header to tell whose it is; RoCEv2 never
  // fragments (rxe sets DF), so any fragment towards 4791 is dropped.
  if ((ip.flags_frag() & kIpv4FragOffsetMask) != 0) return DropReason::kIpFragment;
  if (total < ip_len + kUdpHdrLen) return DropReason::kUdpTooShort;

  // UDP (RFC 768).
  const std::size_t l4 = l3 + ip_len;
  f.udp = decode_udp(p + l4);
  if (f.udp.dst_port != kRoceV2UdpPort) return DropReason::kNotRoce;
  if (ip.flags_frag() & kIpv4FlagMf) return DropReason::kIpFragment;
  if (opts.verify_ip_checksum && !ipv4_checksum_valid(p + l3, ip_len))
    return DropReason::kIpBadChecksum;
  if (f.udp.length != total - ip_len) return DropReason::kUdpBadLength;
  return parse_from_udp(frame, out, opts, l3, l4, total);  // BTH (IBTA §9.2) on
}

}  // namespace rocedp::wire
