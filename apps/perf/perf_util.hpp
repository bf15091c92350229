#pragma once
// Small helpers shared by rocedp-perf's modes: number and address text, the path MTU.

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "rocedp/connection_manager.hpp"

namespace rocedp::perf {

/// A whole unsigned number (decimal, 0x hex or 0 octal), nothing after it. False otherwise.
inline bool parse_u64(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

/// "a.b.c.d" (decimal octets, no leading zeros: inet_pton's rule) in host order.
inline std::optional<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

inline std::string format_ipv4(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." +
         std::to_string((ip >> 8) & 0xFF) + "." + std::to_string(ip & 0xFF);
}

/// An IPv6 address (inet_pton's text) in network order.
inline std::optional<std::array<uint8_t, 16>> parse_ipv6(const std::string& text) {
  std::array<uint8_t, 16> a{};
  if (inet_pton(AF_INET6, text.c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

/// A GID as text: "::ffff:a.b.c.d" for an IPv4-mapped one, inet_ntop's IPv6 text otherwise.
inline std::string format_gid(const uint8_t gid[16]) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid, text, sizeof(text));
  return text;
}

/// An IPv4 or IPv6 address as a socket address (port 0).
inline std::optional<NdkSockAddr> parse_address(const std::string& text) {
  NdkSockAddr a;
  if (const auto v4 = parse_ipv4(text)) {
    a.ip = *v4;
    return a;
  }
  if (const auto v6 = parse_ipv6(text)) {
    a.ipv6 = true;
    a.ip6 = *v6;
    return a;
  }
  return std::nullopt;
}

/// "a.b.c.d:port" or "[v6]:port".
inline std::string format_sockaddr(const NdkSockAddr& a) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on a chain of operator+.
  std::string out;
  if (a.ipv6) {
    out.append("[").append(format_gid(a.ip6.data())).append("]");
  } else {
    out.append(format_ipv4(a.ip));
  }
  out.append(":").append(std::to_string(a.port));
  return out;
}

/// Six colon-separated pairs of hex digits.
inline std::optional<std::array<uint8_t, 6>> parse_mac(const std::string& text) {
  std::array<uint8_t, 6> mac{};
  int used = 0;
  if (text.size() != 17 ||
      std::sscanf(text.c_str(), "%2hhx:%2hhx:%2hhx:%2hhx:%2hhx:%2hhx%n", &mac[0], &mac[1], &mac[2],
                  &mac[3], &mac[4], &mac[5], &used) != 6 ||
      used != 17)
    return std::nullopt;
  return mac;
}

/// parse_mac's text: "02:00:00:00:00:01".
inline std::string format_mac(const std::array<uint8_t, 6>& mac) {
  char text[18];
  std::snprintf(text, sizeof(text), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return text;
}

/// The largest IB MTU whose RoCEv2 packet (IPv4, UDP, BTH, RETH, ICRC) fits an Ethernet MTU:
/// 1024 on 1500, as Linux picks.
inline uint32_t path_mtu_for(uint16_t port_mtu) {
  for (uint32_t m : {4096u, 2048u, 1024u, 512u, 256u})
    if (m + 20 + 8 + 12 + 16 + 4 <= port_mtu) return m;
  return 256;
}

}  // namespace rocedp::perf
