#pragma once
// Shared by the EAL test executables of tests/pmd: EAL starts once per process (--no-huge, a
// file prefix unique to the process), a packet pool, and helpers to build and compare frames.

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "tests/common/eal_session.hpp"

namespace rocedp::pmd::test {

inline PacketPool& pool() {
  return *rocedp::test::session_pool();
}
inline std::string file_prefix() {
  return rocedp::test::session_prefix("pmdtest");
}

inline rocedp::test::EalSessionOptions eal_options() {
  rocedp::test::EalSessionOptions o{.tag = "pmdtest", .mbufs = 8191, .mbuf_cache = 256};
  // net_null7 is probed by EAL itself: Port::open must find such a device and leave it in place.
  o.extra_args = {"--no-telemetry", "--no-pci", "--vdev=net_null7"};
  // ROCEDP_TEST_EAL_ARGS="a b": extra EAL arguments when debugging a driver.
  if (const char* extra = std::getenv("ROCEDP_TEST_EAL_ARGS")) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) o.extra_args.push_back(w);
  }
  // ROCEDP_TEST_LOG=info shows pmd/'s own events (port_open with the device's queue maxima...).
  const char* lvl = std::getenv("ROCEDP_TEST_LOG");
  o.log_level = lvl != nullptr && std::string(lvl) == "info" ? LogLevel::kInfo : LogLevel::kWarning;
  return o;
}

inline const auto* const kEalEnvironment =
    ::testing::AddGlobalTestEnvironment(new rocedp::test::EalSession(eal_options()));

inline config::DataplaneConfig test_dataplane() {
  config::DataplaneConfig dp;
  dp.rx_ring_size = 512;
  dp.tx_ring_size = 512;
  return dp;
}

// An Ethernet frame: broadcast destination, the given source, ethertype 0x88B5 (IEEE 802
// local experimental, so no kernel stack consumes it), then `len - 14` payload bytes that
// encode `seq` and a pattern, so every frame is distinct and checkable byte for byte.
constexpr uint16_t kTestEthertype = 0x88B5;
inline std::vector<uint8_t> make_frame(uint32_t seq, uint32_t len = 128, uint8_t src_last = 0x01) {
  std::vector<uint8_t> f(len, 0);
  std::memset(f.data(), 0xff, 6);
  const uint8_t src[6] = {0x02, 0x00, 0x00, 0x00, 0x00, src_last};
  std::memcpy(f.data() + 6, src, 6);
  f[12] = kTestEthertype >> 8;
  f[13] = kTestEthertype & 0xff;
  for (int i = 0; i < 4; ++i) f[14 + i] = static_cast<uint8_t>(seq >> (24 - 8 * i));
  for (uint32_t i = 18; i < len; ++i) f[i] = static_cast<uint8_t>(seq * 7 + i);
  return f;
}

inline uint32_t frame_seq(const std::vector<uint8_t>& f) {
  return (uint32_t{f[14]} << 24) | (uint32_t{f[15]} << 16) | (uint32_t{f[16]} << 8) | f[17];
}

inline rte_mbuf* to_mbuf(const std::vector<uint8_t>& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool().get());
  if (m == nullptr) return nullptr;
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memcpy(p, f.data(), f.size());
  return m;
}

inline std::vector<uint8_t> to_bytes(const rte_mbuf* m) {
  std::vector<uint8_t> out(rte_pktmbuf_pkt_len(m));
  const void* p = rte_pktmbuf_read(m, 0, static_cast<uint32_t>(out.size()), out.data());
  if (p != out.data()) std::memcpy(out.data(), p, out.size());
  return out;
}

inline bool is_test_frame(const std::vector<uint8_t>& f) {
  return f.size() >= 18 && f[12] == (kTestEthertype >> 8) && f[13] == (kTestEthertype & 0xff);
}

inline bool is_root() {
  return geteuid() == 0;
}

// Runs a shell command; returns its exit status.
inline int sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace rocedp::pmd::test
