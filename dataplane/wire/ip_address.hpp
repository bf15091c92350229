#pragma once
// An IP address of either family, as the control plane keeps it (bindings, 4-tuples, the CM's
// peers): IPv6, or IPv4 as IPv4-mapped (::ffff:a.b.c.d), the form RoCEv2 GIDs give it, so one
// value compares, hashes and goes into a REQ's GIDs whatever the family.

#include <cstddef>
#include <cstdint>
#include <string>

#include "dataplane/wire/ipv6.hpp"

namespace rocedp::wire {

struct IpAddress {
  Ipv6Addr bytes = ipv4_mapped(0);  ///< network order; 0.0.0.0 by default

  IpAddress() = default;
  /// An IPv4 address, host order (0: the IPv4 wildcard). Implicit: most of the control plane's
  /// addresses are IPv4, and their uint32 values read as before.
  IpAddress(std::uint32_t ipv4)
      : bytes(ipv4_mapped(ipv4)) {}  // NOLINT(google-explicit-constructor)
  /// An IPv6 address; an IPv4-mapped one is that IPv4 address.
  static IpAddress v6(const Ipv6Addr& a) {
    IpAddress r;
    r.bytes = a;
    return r;
  }

  bool is_v4() const { return is_ipv4_mapped(bytes); }
  /// The IPv4 address (host order); 0 for IPv6.
  std::uint32_t v4() const {
    std::uint32_t ip = 0;
    return is_ipv4_mapped(bytes, &ip) ? ip : 0;
  }
  /// The wildcard of its family: 0.0.0.0 or ::.
  bool is_any() const { return bytes == Ipv6Addr{} || bytes == ipv4_mapped(0); }
  std::size_t hash() const {
    return (std::size_t{load_le32(bytes.data()) ^ load_le32(bytes.data() + 4)} << 32) ^
           load_le32(bytes.data() + 8) ^ (std::size_t{load_le32(bytes.data() + 12)} * 0x9E3779B1u);
  }
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
  friend bool operator<(const IpAddress& a, const IpAddress& b) { return a.bytes < b.bytes; }
};

/// "a.b.c.d" for IPv4, RFC 5952 text for IPv6 (inet_ntop).
std::string to_string(const IpAddress& a);

}  // namespace rocedp::wire
