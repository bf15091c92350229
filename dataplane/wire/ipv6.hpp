#pragma once
// IPv6 header (RFC 8200), as RoCEv2 carries it: no extension headers, UDP next (a RoCEv2 peer
// sends nothing else; the parser leaves any other next header alone as not ours).

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

inline constexpr std::size_t kIpv6HdrLen = 40;

/// An IPv6 address in network order; an IPv4 address as IPv4-mapped (::ffff:a.b.c.d), the form
/// RoCEv2 GIDs give it.
using Ipv6Addr = std::array<std::uint8_t, 16>;

/// ::ffff:`ipv4` (host-order IPv4).
inline Ipv6Addr ipv4_mapped(std::uint32_t ipv4) {
  Ipv6Addr a{};
  a[10] = a[11] = 0xFF;
  store_be32(a.data() + 12, ipv4);
  return a;
}
/// Whether `a` is IPv4-mapped, and then its IPv4 address (host order) in `*ipv4`.
inline bool is_ipv4_mapped(const Ipv6Addr& a, std::uint32_t* ipv4 = nullptr) {
  static constexpr std::uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  if (std::memcmp(a.data(), kPrefix, sizeof(kPrefix)) != 0) return false;
  if (ipv4 != nullptr) *ipv4 = load_be32(a.data() + 12);
  return true;
}
/// 32 bits standing for an IPv6 address where the data path compares addresses as 32-bit words
/// first (the QP's check of a packet's addresses; the whole address is compared after).
inline std::uint32_t ipv6_fold(const std::uint8_t* a) {
  return load_le32(a) ^ load_le32(a + 4) ^ load_le32(a + 8) ^ load_le32(a + 12);
}

namespace ipv6_off {
// Version(4) TrafficClass(8) FlowLabel(20) in the first word.
inline constexpr std::size_t kVerTcFlow = 0, kPayloadLen = 4, kNextHeader = 6, kHopLimit = 7,
                             kSrc = 8, kDst = 24;
}  // namespace ipv6_off
static_assert(ipv6_off::kDst + 16 == kIpv6HdrLen);

struct Ipv6Fields {
  std::uint8_t traffic_class = 0;  // DSCP(6) ECN(2), as IPv4's ToS
  std::uint32_t flow_label = 0;    // 20 bits
  std::uint16_t payload_len = 0;   // the builder computes it
  std::uint8_t next_header = 17;   // UDP
  std::uint8_t hop_limit = 64;
  Ipv6Addr src{};
  Ipv6Addr dst{};

  friend bool operator==(const Ipv6Fields&, const Ipv6Fields&) = default;
};

inline void encode_ipv6(std::uint8_t* p, const Ipv6Fields& f) {
  store_be32(p + ipv6_off::kVerTcFlow,
             (6u << 28) | (std::uint32_t{f.traffic_class} << 20) | (f.flow_label & 0xFFFFF));
  store_be16(p + ipv6_off::kPayloadLen, f.payload_len);
  p[ipv6_off::kNextHeader] = f.next_header;
  p[ipv6_off::kHopLimit] = f.hop_limit;
  std::memcpy(p + ipv6_off::kSrc, f.src.data(), 16);
  std::memcpy(p + ipv6_off::kDst, f.dst.data(), 16);
}

inline void decode_ipv6_into(const std::uint8_t* p, Ipv6Fields& f) {
  const std::uint32_t w0 = load_be32(p + ipv6_off::kVerTcFlow);
  f.traffic_class = static_cast<std::uint8_t>(w0 >> 20);
  f.flow_label = w0 & 0xFFFFF;
  f.payload_len = load_be16(p + ipv6_off::kPayloadLen);
  f.next_header = p[ipv6_off::kNextHeader];
  f.hop_limit = p[ipv6_off::kHopLimit];
  std::memcpy(f.src.data(), p + ipv6_off::kSrc, 16);
  std::memcpy(f.dst.data(), p + ipv6_off::kDst, 16);
}

/// Sets the traffic class of the IPv6 header at `p` (the flow label stays).
inline void set_ipv6_traffic_class(std::uint8_t* p, std::uint8_t tc) {
  const std::uint32_t w0 = load_be32(p);
  store_be32(p, (w0 & 0xF00FFFFFu) | (std::uint32_t{tc} << 20));
}

/// The traffic class of the IPv6 header at `p` (its ECN bits are the low two, as IPv4's ToS).
inline std::uint8_t ipv6_traffic_class(const std::uint8_t* p) {
  return static_cast<std::uint8_t>(load_be16(p) >> 4);
}

}  // namespace rocedp::wire
