#pragma once
// EAL for the runtime tests (tests/dataplane, tests/control): started once per process with
// --no-huge and a file prefix unique to the process, one packet pool, a ring-pair "wire", and
// helpers that build the frames a peer would send. ROCEDP_TEST_LCORES (e.g. {0, 1}) before
// including this header chooses the EAL lcores.

#include <gtest/gtest.h>
#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "dataplane/wire/icrc.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/ring_pair.hpp"
#include "tests/common/eal_session.hpp"

#ifndef ROCEDP_TEST_LCORES
#define ROCEDP_TEST_LCORES \
  { 0 }
#endif

namespace rocedp::test {

inline pmd::PacketPool& pool() {
  return *session_pool();
}
inline std::string file_prefix() {
  return session_prefix("runtime-test");
}

inline const auto* const kRuntimeEal = ::testing::AddGlobalTestEnvironment(
    new EalSession({.tag = "runtime-test", .lcores = ROCEDP_TEST_LCORES, .mbufs = 4095}));

// Addresses of the two ends of the test wire: "us" (the side the polling core serves) and "peer".
inline const config::MacAddress kOurMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
inline const config::MacAddress kPeerMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
inline const config::Ipv4Address kOurIp{0xC6120001};   // 198.18.0.1
inline const config::Ipv4Address kPeerIp{0xC6120002};  // 198.18.0.2

inline config::PortConfig port_config(const std::string& name, config::MacAddress mac,
                                      config::Ipv4Address ip) {
  config::PortConfig p;
  p.name = name;
  p.mac = mac;
  p.address = ip;
  p.prefix_len = 24;
  return p;
}

inline config::DataplaneConfig small_dataplane() {
  config::DataplaneConfig dp;
  dp.rx_ring_size = 256;
  dp.tx_ring_size = 256;
  return dp;
}

inline rte_mbuf* to_mbuf(const std::vector<uint8_t>& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool().get());
  if (m == nullptr) return nullptr;
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
  std::memcpy(p, f.data(), f.size());
  return m;
}

inline std::vector<uint8_t> to_bytes(const rte_mbuf* m) {
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  return std::vector<uint8_t>(p, p + rte_pktmbuf_data_len(m));
}

inline void put_mac(uint8_t* p, const config::MacAddress& mac) {
  std::memcpy(p, mac.bytes.data(), 6);
}
inline void put16(uint8_t* p, uint16_t v) {
  p[0] = v >> 8;
  p[1] = v & 0xFF;
}
inline void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

// ARP (RFC 826) from the peer: op 1 request "who has target", op 2 reply "sender is at sender_mac".
inline std::vector<uint8_t> arp_frame(uint16_t op, const config::MacAddress& dst_mac,
                                      config::Ipv4Address target) {
  std::vector<uint8_t> f(60, 0);
  if (op == 1)
    std::memset(f.data(), 0xFF, 6);
  else
    put_mac(f.data(), dst_mac);
  put_mac(f.data() + 6, kPeerMac);
  put16(f.data() + 12, 0x0806);
  put16(f.data() + 14, 1);       // htype Ethernet
  put16(f.data() + 16, 0x0800);  // ptype IPv4
  f[18] = 6;
  f[19] = 4;
  put16(f.data() + 20, op);
  put_mac(f.data() + 22, kPeerMac);
  put32(f.data() + 28, kPeerIp.value);
  if (op == 2) put_mac(f.data() + 32, dst_mac);
  put32(f.data() + 38, target.value);
  return f;
}

inline uint16_t ip_checksum(const uint8_t* p, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += (uint32_t{p[i]} << 8) | p[i + 1];
  if (len & 1) sum += uint32_t{p[len - 1]} << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// IPv4 header from the peer to `dst` (20 bytes, checksum set) at f[14..34).
inline void ipv4_header(std::vector<uint8_t>& f, uint8_t proto, config::Ipv4Address dst) {
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  put16(ip + 2, static_cast<uint16_t>(f.size() - 14));
  ip[8] = 64;
  ip[9] = proto;
  put32(ip + 12, kPeerIp.value);
  put32(ip + 16, dst.value);
  put16(ip + 10, ip_checksum(ip, 20));
}

// ICMP echo request (RFC 792) from the peer to us, 32 bytes of payload.
inline std::vector<uint8_t> icmp_echo(uint16_t id, uint16_t seq) {
  std::vector<uint8_t> f(14 + 20 + 8 + 32, 0);
  put_mac(f.data(), kOurMac);
  put_mac(f.data() + 6, kPeerMac);
  put16(f.data() + 12, 0x0800);
  ipv4_header(f, 1, kOurIp);
  uint8_t* icmp = f.data() + 34;
  icmp[0] = 8;
  put16(icmp + 4, id);
  put16(icmp + 6, seq);
  for (int i = 0; i < 32; ++i) icmp[8 + i] = static_cast<uint8_t>(i);
  put16(icmp + 2, ip_checksum(icmp, 8 + 32));
  return f;
}

// A RoCEv2 SEND_ONLY (opcode 4) from the peer to `dest_qpn`: Ethernet, IPv4, UDP 4791, BTH,
// 16 bytes of payload and its ICRC.
inline std::vector<uint8_t> roce_frame(uint32_t dest_qpn,
                                       const config::MacAddress& dst_mac = kOurMac) {
  std::vector<uint8_t> f(14 + 20 + 8 + 12 + 16 + 4, 0);
  put_mac(f.data(), dst_mac);
  put_mac(f.data() + 6, kPeerMac);
  put16(f.data() + 12, 0x0800);
  ipv4_header(f, 17, kOurIp);
  uint8_t* udp = f.data() + 34;
  put16(udp, 49152);
  put16(udp + 2, 4791);
  put16(udp + 4, static_cast<uint16_t>(f.size() - 34));
  uint8_t* bth = udp + 8;
  bth[0] = 0x04;
  put16(bth + 2, 0xFFFF);  // P_Key
  bth[5] = static_cast<uint8_t>(dest_qpn >> 16);
  bth[6] = static_cast<uint8_t>(dest_qpn >> 8);
  bth[7] = static_cast<uint8_t>(dest_qpn);
  // ICRC over IP..payload (RoCEv2 Annex A17.3.3), stored least significant byte first.
  const uint32_t icrc = wire::icrc_compute(wire::Bytes(f.data() + 14, f.size() - 14 - 4));
  for (int i = 0; i < 4; ++i) f[f.size() - 4 + i] = static_cast<uint8_t>(icrc >> (8 * i));
  return f;
}

}  // namespace rocedp::test
