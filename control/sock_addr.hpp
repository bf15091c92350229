#pragma once
// NdkSockAddr (the public socket address, IPv4 or IPv6) and the control plane's
// wire::IpAddress (IPv4 as IPv4-mapped), both ways.

#include <cstdint>

#include "dataplane/wire/ip_address.hpp"
#include "rocedp/connection_manager.hpp"

namespace rocedp::control {

inline wire::IpAddress ip_of(const NdkSockAddr& a) {
  return a.ipv6 ? wire::IpAddress::v6(a.ip6) : wire::IpAddress(a.ip);
}

/// IPv4-mapped addresses come back as IPv4 (SOCKADDR_IN), others as IPv6 (SOCKADDR_IN6).
inline NdkSockAddr sockaddr_of(const wire::IpAddress& ip, uint16_t port) {
  NdkSockAddr a;
  a.port = port;
  if (ip.is_v4()) {
    a.ip = ip.v4();
  } else {
    a.ipv6 = true;
    a.ip6 = ip.bytes;
  }
  return a;
}

}  // namespace rocedp::control
