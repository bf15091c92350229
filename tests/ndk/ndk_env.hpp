#pragma once
// Two adapters in one process over a pmd ring pair ("ring_pair:LINK:a" / ":b"), each with two
// polling cores driven by explicit poll_once() calls from the test thread, which also plays the
// control thread (Adapter::poll_control). EAL starts once per process with --no-huge.

#include <gtest/gtest.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "control/adapter_setup.hpp"
#include "control/ndk_test_hooks.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/polling_core.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/ring_pair.hpp"
#include "pmd/rx_dispatch.hpp"
#include "rocedp/adapter.hpp"
#include "tests/common/eal_session.hpp"

namespace rocedp::test {

inline pmd::PacketPool& pool() {
  return *session_pool();
}
inline std::string file_prefix() {
  return session_prefix("ndk-test");
}

inline const auto* const kNdkEal = ::testing::AddGlobalTestEnvironment(
    new EalSession({.tag = "ndk-test", .memory_mb = 512, .mbufs = 16383}));

inline constexpr uint16_t kCores = 2;

/// One host: a port, its dispatch, two cores with their channels, and the adapter.
struct Host {
  pmd::Port* port = nullptr;
  std::unique_ptr<pmd::RxDispatch> dispatch;
  std::vector<std::unique_ptr<dataplane::CoreChannel>> channels;
  std::vector<std::unique_ptr<dataplane::PollingCore>> cores;
  Adapter* adapter = nullptr;
  config::MacAddress mac;
  uint32_t ip = 0;
  config::Ipv6Address ip6;  // the port's IPv6 address (TwoAdapters::ipv6_ports)
  uint32_t held_cores = 0;  // bit c set: the fixture's loops skip core c (a descheduled lcore)
  bool held(size_t core) const { return (held_cores >> core & 1u) != 0; }
};

/// Fills a core's request ring with requests that do nothing, as a core that is not scheduled
/// would leave it (hold the core so it stays full); returns how many it took.
inline uint32_t fill_request_ring(dataplane::CoreChannel& ch) {
  auto noop = [](const dataplane::NoArgs&, dataplane::CoreResult&, void*) {};
  uint32_t n = 0;
  while (ch.call<dataplane::NoArgs>(noop, {}, nullptr, nullptr)) ++n;
  return n;
}

inline void record_result(const dataplane::CoreMessage& msg) {
  *static_cast<NTSTATUS*>(msg.done_ctx) = msg.result.status;
}

inline config::PortConfig port_config(const std::string& name, const config::MacAddress& mac,
                                      uint32_t ip, const config::FaultConfig& fault = {},
                                      uint8_t dscp = 0) {
  config::PortConfig p;
  p.dscp = dscp;
  p.name = name;
  p.mac = mac;
  p.address.value = ip;
  p.prefix_len = 24;
  p.fault = fault;
  return p;
}

/// The fixture base: two hosts A and B over one ring pair.
class TwoAdapters : public ::testing::Test {
 protected:
  config::LimitsConfig limits() const {
    config::LimitsConfig l;
    l.max_cq_depth = 1u << 16;
    return l;
  }
  virtual config::FaultConfig fault_a() const { return {}; }
  virtual config::FaultConfig fault_b() const { return {}; }
  virtual uint8_t dscp_a() const { return 0; }  // the ports' DSCP (ports[].dscp)
  virtual uint8_t dscp_b() const { return 0; }
  virtual bool ipv6_ports() const { return true; }  // the ports have fd52::1 and fd52::2
  virtual config::LimitsConfig adapter_limits() const { return limits(); }

  void SetUp() override {
    static int serial = 0;
    const std::string link =
        "ndk" + std::to_string(getpid() % 1000) + "x" + std::to_string(serial++);
    a_.mac = config::MacAddress{{0x02, 0x00, 0x00, 0x00, 0x0A, 0x01}};
    b_.mac = config::MacAddress{{0x02, 0x00, 0x00, 0x00, 0x0B, 0x01}};
    a_.ip = 0xC6120001;  // 198.18.0.1
    b_.ip = 0xC6120002;
    a_.ip6.bytes = {0xFD, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    b_.ip6.bytes = {0xFD, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    config::PortConfig pa = port_config("a", a_.mac, a_.ip, fault_a(), dscp_a());
    config::PortConfig pb = port_config("b", b_.mac, b_.ip, fault_b(), dscp_b());
    if (ipv6_ports()) {
      pa.address6 = a_.ip6;
      pb.address6 = b_.ip6;
    }
    config::DataplaneConfig dp;
    dp.rx_ring_size = 1024;
    dp.tx_ring_size = 1024;
    std::string error;
    ASSERT_TRUE(pmd::open_ring_pair(link, pa, pb, kCores, pool(), dp, &pair_, &error)) << error;
    a_.port = pair_.a.get();
    b_.port = pair_.b.get();
    ASSERT_TRUE(a_.port->start(&error)) << error;
    ASSERT_TRUE(b_.port->start(&error)) << error;
    for (Host* h : {&a_, &b_}) {
      h->dispatch = std::make_unique<pmd::RxDispatch>(kCores, 1024);
      AdapterSetup setup;
      setup.limits = adapter_limits();
      setup.port = h->port;
      setup.pool = &pool();
      for (uint16_t i = 0; i < kCores; ++i) {
        h->channels.push_back(dataplane::CoreChannel::create(i, 256, &error));
        ASSERT_TRUE(h->channels.back()) << error;
        h->cores.push_back(std::make_unique<dataplane::PollingCore>(
            i, rte_lcore_id(), 32, *h->dispatch, *h->channels.back()));
        NTSTATUS result = STATUS_PENDING;
        ASSERT_TRUE(dataplane::core_requests::attach_port(*h->channels[i], h->port, i,
                                                          &record_result, &result));
        h->cores[i]->poll_once();
        h->channels[i]->poll_completions(8);
        ASSERT_EQ(result, STATUS_SUCCESS);
        setup.cores.push_back(h->cores[i].get());
        setup.channels.push_back(h->channels[i].get());
      }
      ASSERT_EQ(open_adapter_on(setup, &h->adapter), STATUS_SUCCESS);
    }
    poll(4);
  }

  void TearDown() override {
    // Close whatever the test left open, then the adapters; everything must come back.
    for (Host* h : {&a_, &b_}) {
      if (h->adapter == nullptr) continue;
      bool closed = false;
      EXPECT_EQ(h->adapter->close([](void* c) { *static_cast<bool*>(c) = true; }, &closed),
                STATUS_PENDING);
      for (int i = 0; i < 100000 && !closed; ++i) poll(1);
      EXPECT_TRUE(closed) << "adapter close did not complete (children left open?)";
      h->adapter = nullptr;
    }
    for (Host* h : {&a_, &b_}) {
      for (auto& c : h->cores) c->drain_after_stop();
    }
    pair_ = {};
    for (Host* h : {&a_, &b_}) {
      h->cores.clear();
      h->dispatch.reset();
      h->channels.clear();
    }
  }

  /// One round: every core of both hosts polls once, then both control sides.
  void poll(int rounds = 1) {
    for (int r = 0; r < rounds; ++r) {
      for (Host* h : {&a_, &b_}) {
        for (size_t c = 0; c < h->cores.size(); ++c)
          if (!h->held(c)) h->cores[c]->poll_once();
      }
      for (Host* h : {&a_, &b_}) {
        if (h->adapter != nullptr) h->adapter->poll_control();
      }
    }
  }

  /// Polls until pred() holds; false after `max_rounds` (a generous bound, not a timing check).
  bool poll_until(const std::function<bool()>& pred, uint64_t max_rounds = 2'000'000) {
    for (uint64_t i = 0; i < max_rounds; ++i) {
      if (pred()) return true;
      poll(1);
    }
    return pred();
  }

  pmd::RingPair pair_;
  Host a_, b_;
};

}  // namespace rocedp::test
