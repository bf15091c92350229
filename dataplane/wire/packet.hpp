#pragma once
// A RoCEv2 packet in two forms:
//  * PacketFields: every header decoded into plain values. The parser fills
//    it; the builder writes exactly these values back (so parse -> build
//    reproduces a frame byte-for-byte).
//  * ParsedPacket: the fields plus where each header sits in the frame, and
//    packet-level accessors that find extension headers through the opcode
//    table (the upper layer of CONVENTIONS.md item 9).

#include <cstddef>
#include <cstdint>

#include "dataplane/wire/bth.hpp"
#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/eth.hpp"
#include "dataplane/wire/ext_headers.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/ipv6.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/udp.hpp"

namespace rocedp::wire {

struct PacketFields {
  EthFields eth;
  Ipv4Fields ip;   // when eth.ethertype is IPv4
  Ipv6Fields ip6;  // when eth.ethertype is IPv6
  UdpFields udp;
  BthFields bth;
  // Extension headers: meaningful only when the opcode carries them.
  DethFields deth;
  RethFields reth;
  AtomicEthFields atomic_eth;
  AethFields aeth;
  AtomicAckEthFields atomic_ack_eth;
  std::uint32_t imm = 0;        // ImmDt, as the 32-bit big-endian value on the wire
  std::uint32_t ieth_rkey = 0;  // IETH

  bool ipv6() const { return eth.ethertype == kEtherTypeIpv6; }
  std::size_t ip_header_len() const { return ipv6() ? kIpv6HdrLen : ip.header_len(); }
  /// The IP header's DSCP and ECN bits (IPv4 ToS, IPv6 traffic class).
  std::uint8_t tos() const { return ipv6() ? ip6.traffic_class : ip.tos; }

  friend bool operator==(const PacketFields&, const PacketFields&) = default;
};

struct ParsedPacket {
  Bytes frame;                     // the whole frame as given
  const OpcodeInfo* op = nullptr;  // never null after a successful parse
  std::uint16_t l3_offset = 0;     // IP header
  std::uint16_t l4_offset = 0;     // UDP header
  std::uint16_t bth_offset = 0;
  std::uint16_t payload_offset = 0;  // after the last extension header
  std::uint32_t payload_len = 0;     // without pad
  std::uint32_t l3_end = 0;          // end of the IP packet (frame may have a trailer)
  std::uint32_t icrc = 0;            // as stored (little-endian on the wire)
  PacketFields f;

  Bytes l3() const { return frame.subspan(l3_offset, l3_end - l3_offset); }
  Bytes payload() const { return frame.subspan(payload_offset, payload_len); }
  Bytes pad_bytes() const { return frame.subspan(payload_offset + payload_len, f.bth.pad); }
  std::size_t trailer_len() const { return frame.size() - l3_end; }  // Ethernet padding, FCS...

  // Packet-level raw accessors: the header's bytes located via the opcode table.
  const std::uint8_t* hdr(Hdr h) const { return frame.data() + bth_offset + op->offset_of(h); }
  BthView<const std::uint8_t> bth() const {
    return BthView<const std::uint8_t>(frame.data() + bth_offset);
  }
  RethView<const std::uint8_t> reth() const {
    return RethView<const std::uint8_t>(hdr(Hdr::kReth));
  }
  AethView<const std::uint8_t> aeth() const {
    return AethView<const std::uint8_t>(hdr(Hdr::kAeth));
  }
  DethView<const std::uint8_t> deth() const {
    return DethView<const std::uint8_t>(hdr(Hdr::kDeth));
  }
  AtomicEthView<const std::uint8_t> atomic_eth() const {
    return AtomicEthView<const std::uint8_t>(hdr(Hdr::kAtomicEth));
  }
  AtomicAckEthView<const std::uint8_t> atomic_ack_eth() const {
    return AtomicAckEthView<const std::uint8_t>(hdr(Hdr::kAtomicAckEth));
  }
  ImmDtView<const std::uint8_t> immdt() const {
    return ImmDtView<const std::uint8_t>(hdr(Hdr::kImmDt));
  }
  IethView<const std::uint8_t> ieth() const {
    return IethView<const std::uint8_t>(hdr(Hdr::kIeth));
  }
};

// Pad bytes that bring a payload of `len` bytes to a 4-byte multiple (IBTA §9.2.1.4).
constexpr std::uint8_t pad_for(std::size_t len) {
  return static_cast<std::uint8_t>((4 - (len & 3)) & 3);
}

// Decodes / encodes the extension headers the opcode carries. `bth` points at the BTH.
void decode_ext_headers(const std::uint8_t* bth, const OpcodeInfo& op, PacketFields& f);
void encode_ext_headers(std::uint8_t* bth, const OpcodeInfo& op, const PacketFields& f);

}  // namespace rocedp::wire
