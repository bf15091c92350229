#pragma once
// Helpers shared by the wire tests: sample fields for any opcode, exact-size
// heap copies (so ASan flags any read past the end), and "forge" helpers
// that change bytes and re-seal checksums so only the intended defect remains.

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/ipv6.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocedp::wire::test {

inline PacketFields sample_fields(std::uint8_t opcode, std::mt19937& rng) {
  std::uniform_int_distribution<std::uint32_t> u32;
  PacketFields f;
  f.eth.dst = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0b};
  f.eth.src = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0c};
  f.ip.src = 0xC612000C;  // 198.18.0.12
  f.ip.dst = 0xC612000B;
  f.ip.id = static_cast<std::uint16_t>(u32(rng));
  f.ip.tos = static_cast<std::uint8_t>(u32(rng) & 0xFE);  // any DSCP, ECN 0/1/2
  f.udp.src_port = static_cast<std::uint16_t>(0xC000 | (u32(rng) & 0x3FFF));
  f.bth.opcode = opcode;
  f.bth.se = u32(rng) & 1;
  f.bth.pkey = 0xFFFF;
  // QP1 is reserved for CM MADs (roce-check insists), so samples avoid it.
  f.bth.dqpn = 2 + (u32(rng) % 0xFFFF00);
  f.bth.psn = u32(rng) & 0xFFFFFF;
  const OpcodeInfo* op = opcode_info(opcode);
  f.bth.ack_req = op && op->is(op_flag::kAckReqAllowed) && (u32(rng) & 1);
  if (opcode == opcode::kCnp) {
    f.bth.becn = true;
    f.bth.ack_req = false;
  }
  f.reth = {(std::uint64_t{u32(rng)} << 32) | u32(rng), u32(rng), u32(rng) % 65536};
  f.aeth = {static_cast<std::uint8_t>(u32(rng) & 0x1F), u32(rng) & 0xFFFFFF};
  f.atomic_eth = {(std::uint64_t{u32(rng)} << 32) | 0x8, u32(rng),
                  (std::uint64_t{u32(rng)} << 32) | u32(rng),
                  (std::uint64_t{u32(rng)} << 32) | u32(rng)};
  f.atomic_ack_eth.orig = (std::uint64_t{u32(rng)} << 32) | u32(rng);
  f.imm = u32(rng);
  f.ieth_rkey = u32(rng);
  f.deth = {u32(rng), 0, u32(rng) & 0xFFFFFF};
  return f;
}

// A payload length the opcode accepts, near `want`.
inline std::size_t legal_payload_len(const OpcodeInfo& op, std::size_t want) {
  switch (op.payload) {
    case Payload::kNone:
      return 0;
    case Payload::kFixed:
      return op.fixed_payload;
    case Payload::kRequired:
      return want == 0 ? 1 : want;
    case Payload::kOptional:
      return want;
  }
  return want;
}

inline std::vector<std::uint8_t> make_payload(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(seed + i * 7);
  return p;
}

inline std::vector<std::uint8_t> build(const PacketFields& f, Bytes payload,
                                       const BuildOptions& o = {}) {
  std::vector<std::uint8_t> out(frame_len(f, payload.size()));
  const std::size_t n = build_frame(out, f, payload, o);
  out.resize(n);
  return out;
}

// An exact-size heap copy: any read past size() is a heap-buffer-overflow under ASan.
struct ExactBuffer {
  explicit ExactBuffer(Bytes b) : size(b.size()), data(new std::uint8_t[b.size() ? b.size() : 1]) {
    if (!b.empty()) std::memcpy(data.get(), b.data(), b.size());
  }
  Bytes bytes() const { return Bytes(data.get(), size); }
  std::size_t size;
  std::unique_ptr<std::uint8_t[]> data;
};

// Recomputes the IPv4 header checksum and the ICRC of an untagged frame whose IP length (IPv4
// total length, IPv6 payload length) is still right for the frame.
inline void reseal(std::vector<std::uint8_t>& fr) {
  std::uint8_t* ip = fr.data() + kEthHdrLen;
  std::size_t ip_hdr = kIpv6HdrLen;
  std::size_t l3_end = kEthHdrLen + kIpv6HdrLen + load_be16(ip + ipv6_off::kPayloadLen);
  if (load_be16(fr.data() + eth_off::kType) != kEtherTypeIpv6) {
    ip_hdr = std::size_t{ip[0] & 0x0Fu} * 4;
    Ipv4View<std::uint8_t>(ip).set_checksum(ipv4_header_checksum(ip, ip_hdr));
    l3_end = kEthHdrLen + load_be16(ip + ipv4_off::kTotalLen);
  }
  if (l3_end > fr.size() || l3_end < kEthHdrLen + ip_hdr + kUdpHdrLen + kBthLen + kIcrcLen) return;
  const Bytes l3(fr.data() + kEthHdrLen, l3_end - kEthHdrLen - kIcrcLen);
  store_le32(fr.data() + l3_end - kIcrcLen, icrc_compute(l3));
}

// The frame again (untagged, no IP options) with the IP identification chosen so that its header
// checksum computes to 0x0000, the ICRC resealed, and the field holding `field` (0xFFFF: the same
// checksum as -0, as Linux's nftables writes it after `ip ecn set ce`).
inline std::vector<std::uint8_t> with_zero_checksum(std::vector<std::uint8_t> fr,
                                                    std::uint16_t field) {
  std::uint8_t* ip = fr.data() + kEthHdrLen;
  for (std::uint32_t id = 0; id <= 0xFFFF; ++id) {
    store_be16(ip + ipv4_off::kId, static_cast<std::uint16_t>(id));
    if (ipv4_header_checksum(ip, kIpv4MinHdrLen) == 0) break;
  }
  reseal(fr);  // the ICRC covers the identification (and masks the checksum)
  store_be16(ip + ipv4_off::kChecksum, field);
  return fr;
}

}  // namespace rocedp::wire::test
