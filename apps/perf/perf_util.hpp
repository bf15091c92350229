#pragma once
// Small helpers shared by the benchmark tools (rocedp-perf and its perftest mode).

#include <cerrno>
#include <cstdint>
#include <cstdlib>

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

/// The largest IB MTU whose RoCEv2 packet (IPv4, UDP, BTH, RETH, ICRC) fits an Ethernet MTU:
/// 1024 on 1500, as Linux picks.
inline uint32_t path_mtu_for(uint16_t port_mtu) {
  for (uint32_t m : {4096u, 2048u, 1024u, 512u, 256u})
    if (m + 20 + 8 + 12 + 16 + 4 <= port_mtu) return m;
  return 256;
}

}  // namespace rocedp::perf
