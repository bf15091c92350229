#include "dataplane/wire/parser.hpp"

#include "dataplane/wire/icrc.hpp"

namespace rocedp::wire {

DropReason parse(Bytes frame, ParsedPacket& out, const ParseOptions& opts) {
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
  // RoCEv2 over IPv6 is not supported: such a frame is not ours.
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
  if (opts.verify_ip_checksum && ipv4_header_checksum(p + l3, ip_len) != ip.checksum())
    return DropReason::kIpBadChecksum;
  if (f.udp.length != total - ip_len) return DropReason::kUdpBadLength;
  out.l3_offset = static_cast<std::uint16_t>(l3);
  out.l4_offset = static_cast<std::uint16_t>(l4);
  out.l3_end = static_cast<std::uint32_t>(l3 + total);

  // BTH (IBTA §9.2).
  const std::size_t udp_payload = f.udp.length - kUdpHdrLen;
  if (udp_payload < kBthLen + kIcrcLen) return DropReason::kBthTooShort;
  const std::size_t bth = l4 + kUdpHdrLen;
  out.bth_offset = static_cast<std::uint16_t>(bth);
  decode_bth_into(p + bth, f.bth);
  if (f.bth.tver != 0) return DropReason::kBadTver;
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
  switch (op->payload) {
    case Payload::kNone:
      if (with_pad != 0) return DropReason::kPayloadNotAllowed;
      break;
    case Payload::kRequired:
      if (out.payload_len == 0) return DropReason::kPayloadMissing;
      break;
    case Payload::kFixed:
      if (with_pad != op->fixed_payload) return DropReason::kBadPayloadLength;
      break;
    case Payload::kOptional:
      break;
  }

  // ICRC (IBTA Annex A17.3.3), little-endian after the pad.
  const std::size_t icrc_at = out.l3_end - kIcrcLen;
  out.icrc = load_le32(p + icrc_at);
  if (opts.verify_icrc && icrc_compute(frame.subspan(l3, icrc_at - l3)) != out.icrc)
    return DropReason::kBadIcrc;
  return DropReason::kNone;
}

}  // namespace rocedp::wire
