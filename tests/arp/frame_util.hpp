#pragma once
// Frame helpers shared by the ARP/ICMP and NDP tests: bytes written and read big-endian, the
// RFC 1071 checksum and an mbuf holding a test frame. Deliberately independent of the code under
// test. Needs the process's EAL session (tests/common/eal_session.hpp) for its pool.

#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "config/config.hpp"
#include "tests/common/eal_session.hpp"

namespace rocedp::test::frames {

using Bytes = std::vector<uint8_t>;

inline rte_mempool* pool() {
  return session_pool()->get();
}

// ---- writing ----
inline void put16(Bytes& b, uint16_t v) {
  b.push_back(uint8_t(v >> 8));
  b.push_back(uint8_t(v));
}
inline void put32(Bytes& b, uint32_t v) {
  put16(b, uint16_t(v >> 16));
  put16(b, uint16_t(v));
}
inline void put_mac(Bytes& b, const config::MacAddress& m) {
  b.insert(b.end(), m.bytes.begin(), m.bytes.end());
}
// An Ethernet header.
inline void put_eth(Bytes& b, const config::MacAddress& dst, const config::MacAddress& src,
                    uint16_t ethertype) {
  put_mac(b, dst);
  put_mac(b, src);
  put16(b, ethertype);
}
inline void put_ip6(Bytes& b, const config::Ipv6Address& a) {
  b.insert(b.end(), a.bytes.begin(), a.bytes.end());
}

// ---- reading ----
inline uint16_t get16(const Bytes& b, size_t off) {
  return uint16_t(b[off] << 8 | b[off + 1]);
}
inline uint32_t get32(const Bytes& b, size_t off) {
  return uint32_t(get16(b, off)) << 16 | get16(b, off + 2);
}
inline config::MacAddress get_mac(const Bytes& b, size_t off) {
  config::MacAddress m;
  std::memcpy(m.bytes.data(), &b[off], 6);
  return m;
}
inline config::Ipv6Address get_ip6(const Bytes& b, size_t off) {
  config::Ipv6Address a;
  std::memcpy(a.bytes.data(), &b[off], 16);
  return a;
}

// RFC 1071 Internet checksum over big-endian words; 0 when a block with its checksum is valid.
inline uint16_t inet_checksum(const Bytes& b, size_t off, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i < len; i += 2) {
    sum += uint32_t(b[off + i]) << 8;
    if (i + 1 < len) sum += b[off + i + 1];
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}

// The port every Mbuf below arrives on (what the code under test reports as the peer's port).
constexpr uint16_t kRxPort = 3;

// An mbuf owning a copy of `b`, optionally split into two segments after `split` bytes.
struct Mbuf {
  rte_mbuf* m = nullptr;
  explicit Mbuf(const Bytes& b, size_t split = 0) {
    m = rte_pktmbuf_alloc(pool());
    const size_t first = split == 0 ? b.size() : split;
    std::memcpy(rte_pktmbuf_append(m, uint16_t(first)), b.data(), first);
    if (split != 0) {
      rte_mbuf* tail = rte_pktmbuf_alloc(pool());
      std::memcpy(rte_pktmbuf_append(tail, uint16_t(b.size() - split)), b.data() + split,
                  b.size() - split);
      EXPECT_EQ(rte_pktmbuf_chain(m, tail), 0);
    }
    m->port = kRxPort;
  }
  explicit Mbuf(rte_mbuf* built) : m(built) {}
  ~Mbuf() { rte_pktmbuf_free(m); }
  Mbuf(const Mbuf&) = delete;
  Mbuf& operator=(const Mbuf&) = delete;
  Bytes bytes() const {
    Bytes b(rte_pktmbuf_pkt_len(m));
    const void* p = rte_pktmbuf_read(m, 0, uint32_t(b.size()), b.data());
    if (p != b.data()) std::memcpy(b.data(), p, b.size());
    return b;
  }
};

}  // namespace rocedp::test::frames
