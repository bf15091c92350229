#pragma once
// The ones'-complement sum of a byte range of a (possibly chained) mbuf, shared by the ICMP
// (dataplane/arp_icmp) and ICMPv6 (dataplane/ndp) checks. Touches only its arguments; any thread.

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstdint>

namespace rocedp::dataplane {

// Sum of [off, off+len) of `m`, folded to 16 bits but not complemented, in the representation
// rte_raw_cksum gives (16-bit words as loaded from memory), so it adds to other rte_raw_cksum
// results. False if the range is not inside the packet. The single-segment case is DPDK's; the
// chained case sums byte by byte to keep odd segment boundaries right.
inline bool mbuf_ones_sum(const rte_mbuf* m, uint32_t off, uint32_t len, uint16_t* out) {
  if (off + len > rte_pktmbuf_pkt_len(m)) return false;
  if (off + len <= rte_pktmbuf_data_len(m)) {
    *out = rte_raw_cksum(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), len);
    return true;
  }
  uint64_t hi = 0, lo = 0;  // bytes at even / odd positions of the summed range
  uint32_t pos = 0;
  for (const rte_mbuf* seg = m; seg != nullptr && pos < len; seg = seg->next) {
    uint32_t n = rte_pktmbuf_data_len(seg);
    if (off >= n) {
      off -= n;
      continue;
    }
    const uint8_t* p = rte_pktmbuf_mtod_offset(seg, const uint8_t*, off);
    n -= off;
    off = 0;
    for (uint32_t i = 0; i < n && pos < len; ++i, ++pos) ((pos & 1) ? lo : hi) += p[i];
  }
  if (pos != len) return false;
  uint64_t sum = (hi << 8) + lo;  // big-endian words
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  // A ones'-complement sum commutes with byte swapping: the big-endian value, stored big-endian
  // and loaded as a host word, is what rte_raw_cksum would have returned.
  *out = rte_cpu_to_be_16(static_cast<uint16_t>(sum));
  return true;
}

}  // namespace rocedp::dataplane
