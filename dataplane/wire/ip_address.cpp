#include "dataplane/wire/ip_address.hpp"

#include <arpa/inet.h>

namespace rocedp::wire {

std::string to_string(const IpAddress& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.is_v4()) {
    const std::uint32_t ip = a.v4();
    return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." +
           std::to_string((ip >> 8) & 0xFF) + "." + std::to_string(ip & 0xFF);
  }
  inet_ntop(AF_INET6, a.bytes.data(), text, sizeof(text));
  return text;
}

}  // namespace rocedp::wire
