// Ports on every vdev the project relies on: net_ring (through ring pairs), net_memif (server
// and client in one process), net_af_packet (over a veth pair), net_tap, net_pcap (replay and
// record). Frames cross byte-exact, link status and stats move, faults apply on the port, and
// every mbuf returns to the pool.

#include "pmd/port.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <pcap/pcap.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <rte_ethdev.h>

#include "pmd/memif_guard.hpp"
#include "pmd/ring_pair.hpp"
#include "tests/pmd/eal_env.hpp"

namespace rocedp::pmd {
namespace {

using test::is_test_frame;
using test::make_frame;
using test::pool;
using test::sh;
using test::to_bytes;
using test::to_mbuf;

std::string shared_dir() {
  const char* d = std::getenv("ROCEDP_SHARED_DIR");
  return d != nullptr ? d : "/work/shared";
}

const std::string kTag = std::to_string(getpid() % 100000);

config::PortConfig port_cfg(const std::string& name, const std::string& devargs,
                            uint8_t ip_last = 1) {
  config::PortConfig c;
  c.name = name;
  c.devargs = devargs;
  c.address.value = 0x0a000000u | ip_last;
  return c;
}

std::unique_ptr<Port> open_port(const config::PortConfig& c, uint16_t queues = 1) {
  std::string error;
  auto p = Port::open(c, queues, pool(), test::test_dataplane(), &error);
  EXPECT_TRUE(p) << error;
  return p;
}

// Waits (bounded) for the link to come up: memif and tap connect asynchronously.
bool wait_link_up(const Port& p) {
  for (int i = 0; i < 500; ++i) {
    if (p.link().up) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

uint32_t send_frames(Port& p, uint32_t seq0, uint32_t count, uint32_t len = 128) {
  uint32_t sent = 0;
  for (uint32_t i = 0; i < count; ++i) {
    rte_mbuf* m = to_mbuf(make_frame(seq0 + i, len));
    if (m == nullptr) break;
    uint16_t k = 0;
    for (int tries = 0; tries < 1000 && k == 0; ++tries) k = p.tx_burst(0, &m, 1);
    if (k == 0) {
      rte_pktmbuf_free(m);
      continue;
    }
    ++sent;
  }
  return sent;
}

// Collects test frames (ethertype 0x88B5) from queue 0 until `count` arrived or the port has
// been idle for a while (other traffic, e.g. IPv6 router solicitations, is freed and skipped).
std::vector<std::vector<uint8_t>> receive_frames(Port& p, size_t count) {
  std::vector<std::vector<uint8_t>> got;
  rte_mbuf* pkts[32];
  for (int idle = 0; idle < 300 && got.size() < count;) {
    uint16_t n = p.rx_burst(0, pkts, 32);
    if (n == 0) {
      ++idle;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (uint16_t i = 0; i < n; ++i) {
      auto f = to_bytes(pkts[i]);
      if (is_test_frame(f)) got.push_back(std::move(f));
      rte_pktmbuf_free(pkts[i]);
    }
  }
  return got;
}

void expect_frames(const std::vector<std::vector<uint8_t>>& got, uint32_t seq0, uint32_t count,
                   uint32_t len = 128) {
  ASSERT_EQ(got.size(), count);
  for (uint32_t i = 0; i < count; ++i) EXPECT_EQ(got[i], make_frame(seq0 + i, len)) << i;
}

struct PoolLeakCheck {
  uint32_t start = pool().available();
  ~PoolLeakCheck() { EXPECT_EQ(pool().available(), start) << "mbufs leaked"; }
};

// ---------------------------------------------------------------------------------------------
// net_ring (ring pairs): link status, stats, MAC, MTU, errors, fault stage.

TEST(Port, LinkFollowsStartAndStop) {
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("link" + kTag, port_cfg("a", ""), port_cfg("b", "", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  EXPECT_FALSE(pair.a->link().up);
  ASSERT_TRUE(pair.a->start(&error)) << error;
  EXPECT_TRUE(pair.a->started());
  LinkStatus l = pair.a->link();
  EXPECT_TRUE(l.up);
  EXPECT_GT(l.speed_mbps, 0u);
  EXPECT_TRUE(l.full_duplex);
  pair.a->stop();
  EXPECT_FALSE(pair.a->link().up);
  pair.a->stop();  // idempotent
}

TEST(Port, StatsCountFramesAndBytesOnBothSides) {
  PoolLeakCheck leaks;
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("stats" + kTag, port_cfg("a", ""), port_cfg("b", "", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  ASSERT_TRUE(pair.a->start(&error) && pair.b->start(&error)) << error;
  ASSERT_EQ(send_frames(*pair.a, 0, 20, 100), 20u);
  expect_frames(receive_frames(*pair.b, 20), 0, 20, 100);
  PortStats a = pair.a->stats(), b = pair.b->stats();
  EXPECT_EQ(a.tx_packets, 20u);
  EXPECT_EQ(b.rx_packets, 20u);
  EXPECT_EQ(a.rx_packets, 0u);
  EXPECT_EQ(b.tx_packets, 0u);
  EXPECT_EQ(a.tx_errors, 0u);
  EXPECT_EQ(b.fault.dropped, 0u);
  // net_ring counts packets only; byte counters are checked on memif, tap and af_packet.
}

TEST(Port, ConfiguredMacAndMtuAreApplied) {
  config::PortConfig a = port_cfg("a", "ring_pair:mac" + kTag + ":a");
  a.mac = config::MacAddress{{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}};
  a.mtu = 1400;
  auto p = open_port(a);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->mac(), *a.mac);
  EXPECT_EQ(p->mtu(), 1400);
  EXPECT_EQ(p->name(), "a");
  EXPECT_EQ(p->address().value, 0x0a000001u);
  EXPECT_EQ(p->prefix_len(), 24);
}

TEST(Port, ADeviceProbedByEalArgumentsIsFoundAndLeftInPlaceOnClose) {
  // eal_env.hpp starts EAL with --vdev=net_null7.
  uint16_t id = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_null7", &id), 0);
  {
    auto p = open_port(port_cfg("null", "net_null7"));
    ASSERT_TRUE(p);
    EXPECT_EQ(p->id(), id);
    std::string error;
    ASSERT_TRUE(p->start(&error)) << error;
  }
  EXPECT_EQ(rte_eth_dev_get_port_by_name("net_null7", &id), 0) << "a device EAL probed was removed";
  auto again = open_port(port_cfg("null", "net_null7"));
  EXPECT_TRUE(again);
}

TEST(Port, ADeviceCannotBeOpenedTwice) {
  auto first = open_port(port_cfg("one", "net_null5"));
  ASSERT_TRUE(first);
  std::string error;
  auto second = Port::open(port_cfg("two", "net_null5"), 1, pool(), test::test_dataplane(), &error);
  EXPECT_FALSE(second);
  EXPECT_NE(error.find("already open as port one"), std::string::npos) << error;
  // The refused open did not disturb the owner.
  ASSERT_TRUE(first->start(&error)) << error;
  EXPECT_TRUE(first->link().up);
  first.reset();
  EXPECT_TRUE(open_port(port_cfg("two", "net_null5")));
}

TEST(Port, UnknownDriverFailsWithTheStepAndDevargs) {
  std::string error;
  auto p = Port::open(port_cfg("x", "net_nosuchdriver0,foo=1"), 1, pool(), test::test_dataplane(),
                      &error);
  EXPECT_FALSE(p);
  EXPECT_NE(error.find("rte_dev_probe"), std::string::npos) << error;
  EXPECT_NE(error.find("net_nosuchdriver0,foo=1"), std::string::npos) << error;
}

TEST(Port, FrameLargerThanTheDataRoomIsRefusedWhenTheDeviceCannotScatter) {
  std::string error;
  auto small =
      PacketPool::create("small_pool", 255, 0, 512 + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY, &error);
  ASSERT_TRUE(small) << error;
  // net_pcap cannot scatter (net_ring can: it never touches the data).
  config::PortConfig c =
      port_cfg("big", "net_pcap9,rx_pcap=" + shared_dir() + "/captures/rxe-rping.pcap");
  c.mtu = 1500;
  auto p = Port::open(c, 1, *small, test::test_dataplane(), &error);
  EXPECT_FALSE(p);
  EXPECT_NE(error.find("data room"), std::string::npos) << error;
  c.mtu = 400;  // fits: the same device opens
  p = Port::open(c, 1, *small, test::test_dataplane(), &error);
  EXPECT_TRUE(p) << error;
}

TEST(Port, RxFaultStageDropsEverythingAtOneHundredPercent) {
  PoolLeakCheck leaks;
  config::PortConfig b = port_cfg("b", "", 2);
  b.fault.drop_pct = 100;
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("drop" + kTag, port_cfg("a", ""), b, 1, pool(), test::test_dataplane(),
                             &pair, &error))
      << error;
  ASSERT_TRUE(pair.a->start(&error) && pair.b->start(&error)) << error;
  ASSERT_EQ(send_frames(*pair.a, 0, 50), 50u);
  EXPECT_TRUE(receive_frames(*pair.b, 50).empty());
  PortStats s = pair.b->stats();
  EXPECT_EQ(s.rx_packets, 50u);  // the device received them; the stage dropped them
  EXPECT_EQ(s.fault.dropped, 50u);
}

TEST(Port, TxFaultStageDelaysFramesAndRxBurstDrainsThem) {
  PoolLeakCheck leaks;
  config::PortConfig a = port_cfg("a", "");
  a.fault.direction = config::FaultConfig::Direction::kTx;
  a.fault.delay_us = 20000;
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("delay" + kTag, a, port_cfg("b", "", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  ASSERT_TRUE(pair.a->start(&error) && pair.b->start(&error)) << error;
  ASSERT_EQ(send_frames(*pair.a, 0, 10), 10u);
  // Held in a's TX stage: the device has sent nothing yet (20 ms is far above this check).
  EXPECT_EQ(pair.a->stats().tx_packets, 0u);
  // a's polling loop (rx_burst) moves them to the wire once their time has come.
  rte_mbuf* pkts[8];
  std::vector<std::vector<uint8_t>> got;
  for (int i = 0; i < 2000 && got.size() < 10; ++i) {
    EXPECT_EQ(pair.a->rx_burst(0, pkts, 8), 0);
    auto more = receive_frames(*pair.b, 10 - got.size());
    got.insert(got.end(), more.begin(), more.end());
  }
  expect_frames(got, 0, 10);
  PortStats s = pair.a->stats();
  EXPECT_EQ(s.tx_packets, 10u);
  EXPECT_EQ(s.fault.delayed, 10u);
}

TEST(Port, HeldFramesAreFreedAtStop) {
  PoolLeakCheck leaks;
  config::PortConfig a = port_cfg("a", "");
  a.fault.direction = config::FaultConfig::Direction::kTx;
  a.fault.delay_us = 1000000;
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("held" + kTag, a, port_cfg("b", "", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  ASSERT_TRUE(pair.a->start(&error)) << error;
  const uint32_t before = pool().available();
  ASSERT_EQ(send_frames(*pair.a, 0, 30), 30u);
  EXPECT_EQ(pool().available(), before - 30);
  pair.a->stop();
  EXPECT_EQ(pool().available(), before);
  EXPECT_EQ(pair.a->stats().fault.flushed, 30u);
}

TEST(Port, ChaosOnBothDirectionsAccountsForEveryFrame) {
  PoolLeakCheck leaks;
  config::PortConfig b = port_cfg("b", "", 2);
  b.fault.direction = config::FaultConfig::Direction::kRx;
  b.fault.drop_pct = 5;
  b.fault.duplicate_pct = 1;
  b.fault.corrupt_pct = 1;
  b.fault.reorder_window = 8;
  b.fault.seed = 42;
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("chaos" + kTag, port_cfg("a", ""), b, 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  ASSERT_TRUE(pair.a->start(&error) && pair.b->start(&error)) << error;
  constexpr uint32_t kFrames = 10000;
  std::vector<uint32_t> seen(kFrames, 0);
  uint64_t received = 0, corrupted_seen = 0;
  rte_mbuf* pkts[32];
  auto drain = [&](int idle_limit) {
    for (int idle = 0; idle < idle_limit;) {
      uint16_t n = pair.b->rx_burst(0, pkts, 32);
      if (n == 0) {
        ++idle;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      for (uint16_t i = 0; i < n; ++i) {
        auto f = to_bytes(pkts[i]);
        rte_pktmbuf_free(pkts[i]);
        ++received;
        uint32_t seq = test::frame_seq(f);
        if (seq < kFrames && f == make_frame(seq)) {
          ++seen[seq];
        } else {
          ++corrupted_seen;
        }
      }
    }
  };
  for (uint32_t base = 0; base < kFrames; base += 256) {
    ASSERT_EQ(send_frames(*pair.a, base, std::min<uint32_t>(256, kFrames - base)),
              std::min<uint32_t>(256, kFrames - base));
    drain(1);
  }
  drain(50);  // the last partial reorder window is released after its hold time
  PortStats s = pair.b->stats();
  EXPECT_EQ(s.rx_packets, kFrames);
  EXPECT_EQ(received, kFrames - s.fault.dropped + s.fault.duplicated);
  // A corrupted frame that is also duplicated arrives corrupted twice.
  EXPECT_GE(corrupted_seen, s.fault.corrupted);
  EXPECT_LE(corrupted_seen, s.fault.corrupted + s.fault.duplicated);
  EXPECT_NEAR(static_cast<double>(s.fault.dropped), kFrames * 0.05, kFrames * 0.015);
  EXPECT_GT(s.fault.duplicated, 0u);
  EXPECT_GT(s.fault.corrupted, 0u);
  EXPECT_GT(s.fault.reordered, 0u);
  uint32_t twice = 0;
  for (uint32_t c : seen) twice += c == 2;
  EXPECT_LE(twice, s.fault.duplicated);
}

TEST(Port, TxFaultStageTakesFramesItDropsAndCountsThem) {
  PoolLeakCheck leaks;
  config::PortConfig a = port_cfg("a", "");
  a.fault.direction = config::FaultConfig::Direction::kBoth;
  a.fault.drop_pct = 100;
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("txdrop" + kTag, a, port_cfg("b", "", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  ASSERT_TRUE(pair.a->start(&error) && pair.b->start(&error)) << error;
  ASSERT_EQ(send_frames(*pair.a, 0, 25), 25u);  // taken by the stage: they count as sent
  EXPECT_TRUE(receive_frames(*pair.b, 25).empty());
  PortStats s = pair.a->stats();
  EXPECT_EQ(s.tx_packets, 0u);
  EXPECT_EQ(s.fault.dropped, 25u);
}

TEST(Port, PortsWithoutFaultsAddNoFaultCounters) {
  RingPair pair;
  std::string error;
  ASSERT_TRUE(open_ring_pair("nofault" + kTag, port_cfg("a", ""), port_cfg("b", "", 2), 1, pool(),
                             test::test_dataplane(), &pair, &error))
      << error;
  FaultStats f = pair.a->stats().fault;
  EXPECT_EQ(f.dropped + f.duplicated + f.corrupted + f.reordered + f.delayed + f.flushed, 0u);
}

// ---------------------------------------------------------------------------------------------
// net_memif: server and client vdevs in this process on a socket file under /tmp.

// A file the test creates: a stale one from an earlier run goes first, and the file goes at exit.
struct RemoveOnExit {
  std::string path;
  explicit RemoveOnExit(std::string p) : path(std::move(p)) { ::unlink(path.c_str()); }
  ~RemoveOnExit() { ::unlink(path.c_str()); }
};

// A server (net_memif<n>) and a client (net_memif<n+1>) with `queues` queue pairs each, started
// and connected over the socket file `sock`, with memif id `id`.
struct MemifPair {
  std::unique_ptr<Port> server, client;
};
void open_memif_pair(MemifPair& p, const std::string& sock, int n, int id, uint16_t queues) {
  const std::string common = ",socket=" + sock + ",socket-abstract=no,id=" + std::to_string(id);
  const std::string srv = "net_memif" + std::to_string(n),
                    cli = "net_memif" + std::to_string(n + 1);
  p.server = open_port(port_cfg(srv, srv + ",role=server" + common), queues);
  p.client = open_port(port_cfg(cli, cli + ",role=client" + common, 2), queues);
  ASSERT_TRUE(p.server && p.client);
  std::string error;
  ASSERT_TRUE(p.server->start(&error)) << error;
  ASSERT_TRUE(p.client->start(&error)) << error;
  ASSERT_TRUE(wait_link_up(*p.server)) << "memif never connected";
  ASSERT_TRUE(wait_link_up(*p.client));
}

TEST(Port, MemifServerAndClientExchangeFramesByteExact) {
  PoolLeakCheck leaks;
  RemoveOnExit sock{"/tmp/rocedp-pmd-test-" + kTag + ".sock"};
  {
    MemifPair pair;
    ASSERT_NO_FATAL_FAILURE(open_memif_pair(pair, sock.path, 0, 7, 2));
    auto& server = pair.server;
    auto& client = pair.client;
    // memif: the client posts the server-to-client buffers from its RX path, so the server can
    // transmit only once the client has polled (as a polling core always does).
    rte_mbuf* none[1];
    EXPECT_EQ(client->rx_burst(0, none, 1), 0);
    ASSERT_EQ(send_frames(*server, 200, 40, 64), 40u);
    expect_frames(receive_frames(*client, 40), 200, 40, 64);
    ASSERT_EQ(send_frames(*client, 100, 40, 1000), 40u);
    expect_frames(receive_frames(*server, 40), 100, 40, 1000);
    EXPECT_EQ(client->stats().tx_packets, 40u);
    EXPECT_EQ(server->stats().rx_packets, 40u);
    EXPECT_EQ(server->stats().rx_bytes, 40u * 1000);
    // Every queue pair is its own lane: queue 1 carries frames too.
    EXPECT_EQ(server->queue_count(), 2);
    EXPECT_EQ(client->queue_count(), 2);
    EXPECT_EQ(client->rx_burst(1, none, 1), 0);
    std::vector<rte_mbuf*> q1;
    for (uint32_t i = 0; i < 5; ++i) q1.push_back(to_mbuf(make_frame(700 + i)));
    ASSERT_EQ(client->tx_burst(1, q1.data(), 5), 5);
    std::vector<std::vector<uint8_t>> got1;
    rte_mbuf* pkts[8];
    for (int i = 0; i < 1000 && got1.size() < 5; ++i) {
      uint16_t n = server->rx_burst(1, pkts, 8);
      for (uint16_t k = 0; k < n; ++k) {
        got1.push_back(to_bytes(pkts[k]));
        rte_pktmbuf_free(pkts[k]);
      }
    }
    expect_frames(got1, 700, 5);
    // One side at a time: close the server, wait until the client sees its link go down, then
    // close the client. (With both ends in one process, DPDK 22.11's memif sometimes still prints
    // "EAL: Error: Invalid memory" at teardown: rte_free refusing a pointer it does not own.
    // Two daemons, the real set-up, each hold one end and do not share the socket object.)
    server.reset();
    for (int i = 0; i < 500 && client->link().up; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(client->link().up) << "the client never saw the server go";
  }
  // The server removes its socket file when it closes.
  EXPECT_NE(::access(sock.path.c_str(), F_OK), 0);
}

// The memif guard's watcher shares a pinned polling core's CPU, so it must stay asleep while the
// queue owners burst (they see a departure first and wake it), and look every millisecond while
// nobody bursts (then it alone notices a departure or a link coming up).
TEST(Port, MemifWatcherSleepsWhileTheQueuesAreBurstingAndLooksOftenWhileNot) {
  PoolLeakCheck leaks;
  RemoveOnExit sock{"/tmp/rocedp-pmd-test-watch-" + kTag + ".sock"};
  {
    MemifPair pair;
    ASSERT_NO_FATAL_FAILURE(open_memif_pair(pair, sock.path, 2, 8, 1));
    auto& server = pair.server;
    auto& client = pair.client;
    const MemifGuard* guard = server->memif_guard();
    ASSERT_NE(guard, nullptr) << "DPDK 22.11's memif with the layout the guard expects";
    rte_mbuf* pkts[8];
    auto burst_for = [&](std::chrono::milliseconds d) {
      const auto end = std::chrono::steady_clock::now() + d;
      while (std::chrono::steady_clock::now() < end) {
        for (Port* p : {server.get(), client.get()}) {
          const uint16_t n = p->rx_burst(0, pkts, 8);
          for (uint16_t k = 0; k < n; ++k) rte_pktmbuf_free(pkts[k]);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    };
    burst_for(std::chrono::milliseconds(50));  // the owners go online; the watcher sees them
    const uint64_t bursting0 = guard->looks();
    burst_for(std::chrono::milliseconds(500));
    const uint64_t bursting = guard->looks() - bursting0;
    const uint64_t idle0 = guard->looks();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const uint64_t idle = guard->looks() - idle0;
    EXPECT_LE(bursting, 8u) << "about one look per 100 ms while the owners burst";
    EXPECT_GE(idle, 30u) << "about one look per millisecond while nobody bursts";
    // A departure while the owner bursts is still handled at once: the client goes (closed by
    // another thread, as a peer process would), and the server's bursts quiesce and memif tears
    // the link down long before the watcher's next timed look.
    const auto t0 = std::chrono::steady_clock::now();
    std::thread closer([&] { client.reset(); });
    while (guard->teardowns() == 0 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
      const uint16_t n = server->rx_burst(0, pkts, 8);
      for (uint16_t k = 0; k < n; ++k) rte_pktmbuf_free(pkts[k]);
    }
    const auto took = std::chrono::steady_clock::now() - t0;
    closer.join();
    EXPECT_EQ(guard->teardowns(), 1u) << "bursts quiesced, then memif tore the link down";
    EXPECT_LT(took, std::chrono::milliseconds(40)) << "woken by the bursts, not by its 100 ms look";
    EXPECT_FALSE(server->link().up) << "the server saw the client go";
  }
  EXPECT_NE(::access(sock.path.c_str(), F_OK), 0);
}

// memif maps its shared memory without populating it; the guard maps every page once the link is
// up (before it lets the bursts in), so no burst pays a page fault. Every memif region mapping of
// the process (the client's and the server's view of the same memfd) is resident in full.
TEST(Port, MemifRegionsAreResidentBeforeTheFirstBurst) {
  PoolLeakCheck leaks;
  RemoveOnExit sock{"/tmp/rocedp-pmd-test-populate-" + kTag + ".sock"};
  {
    MemifPair pair;
    ASSERT_NO_FATAL_FAILURE(open_memif_pair(pair, sock.path, 4, 9, 1));
    for (Port* p : {pair.server.get(), pair.client.get()}) {
      const MemifGuard* guard = p->memif_guard();
      ASSERT_NE(guard, nullptr) << "DPDK 22.11's memif with the layout the guard expects";
      for (int i = 0; i < 500 && !guard->polling(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ASSERT_TRUE(guard->polling());
    }
    // /proc/self/smaps: a mapping's header line, then its fields (Rss in kB).
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    int regions = 0;
    uint64_t size_kb = 0;
    bool in_region = false;
    while (std::getline(smaps, line)) {
      unsigned long start = 0, end = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
        in_region = line.find("/memfd:memif_region_") != std::string::npos;
        size_kb = (end - start) / 1024;
        if (in_region) ++regions;
        continue;
      }
      unsigned long rss = 0;
      if (in_region && std::sscanf(line.c_str(), "Rss: %lu kB", &rss) == 1) {
        EXPECT_EQ(rss, size_kb) << "a memif region with pages not mapped: " << line;
      }
    }
    EXPECT_GE(regions, 2) << "the client's region and the server's view of it";
    pair.server.reset();
    for (int i = 0; i < 500 && pair.client->link().up; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---------------------------------------------------------------------------------------------
// net_af_packet over a veth pair this test creates (root only).

struct Veth {
  std::string a, b;
  bool ok = false;
  explicit Veth(const std::string& tag) : a("rdpva" + tag), b("rdpvb" + tag) {
    ok = sh("ip link add " + a + " type veth peer name " + b + " >/dev/null 2>&1") == 0;
    if (!ok) return;
    // No IPv6 on the test pair: fewer kernel frames (router solicitations) to skip over.
    sh("sysctl -qw net.ipv6.conf." + a + ".disable_ipv6=1 net.ipv6.conf." + b +
       ".disable_ipv6=1 >/dev/null 2>&1");
    ok = sh("ip link set " + a + " up && ip link set " + b + " up") == 0;
  }
  ~Veth() { sh("ip link del " + a + " >/dev/null 2>&1"); }
};

TEST(Port, AfPacketOverVethCarriesFramesBothWays) {
  if (!test::is_root()) GTEST_SKIP() << "needs root to create a veth pair";
  PoolLeakCheck leaks;
  Veth veth(kTag);
  ASSERT_TRUE(veth.ok) << "ip link add veth failed";
  {
    auto a = open_port(port_cfg("a", "net_af_packet0,iface=" + veth.a), 4);
    auto b = open_port(port_cfg("b", "net_af_packet1,iface=" + veth.b, 2), 4);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->queue_count(), 1)
        << "af_packet offers qpairs=1 by default: the queue count is capped";
    std::string error;
    ASSERT_TRUE(a->start(&error) && b->start(&error)) << error;
    ASSERT_TRUE(wait_link_up(*a));
    ASSERT_TRUE(wait_link_up(*b));
    ASSERT_EQ(send_frames(*a, 0, 30, 200), 30u);
    expect_frames(receive_frames(*b, 30), 0, 30, 200);
    ASSERT_EQ(send_frames(*b, 500, 30, 1514), 30u);
    expect_frames(receive_frames(*a, 30), 500, 30, 1514);
    EXPECT_GE(b->stats().rx_packets, 30u);
    EXPECT_EQ(a->stats().tx_packets, 30u);
    EXPECT_EQ(a->stats().tx_bytes, 30u * 200);
  }
}

// ---------------------------------------------------------------------------------------------
// net_tap: the PMD creates a kernel interface; a raw socket on it plays the peer (root only).

struct RawSocket {
  int fd = -1;
  int ifindex = 0;
  explicit RawSocket(const std::string& iface) {
    ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
    if (ifindex == 0) return;
    fd = ::socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0) return;
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = ifindex;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
      ::close(fd);
      fd = -1;
      return;
    }
    timeval tv{0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawSocket() {
    if (fd >= 0) ::close(fd);
  }
  bool send(const std::vector<uint8_t>& f) {
    return ::send(fd, f.data(), f.size(), 0) == static_cast<ssize_t>(f.size());
  }
  std::vector<std::vector<uint8_t>> receive_test_frames(size_t count) {
    std::vector<std::vector<uint8_t>> got;
    uint8_t buf[2048];
    for (int timeouts = 0; timeouts < 20 && got.size() < count;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        ++timeouts;
        continue;
      }
      std::vector<uint8_t> f(buf, buf + n);
      if (is_test_frame(f)) got.push_back(std::move(f));
    }
    return got;
  }
};

TEST(Port, TapCreatesItsInterfaceAndRemovesItOnClose) {
  if (!test::is_root()) GTEST_SKIP() << "needs root to create a tap interface";
  PoolLeakCheck leaks;
  const std::string iface = "rdptap" + kTag;
  {
    auto p = open_port(port_cfg("tap", "net_tap0,iface=" + iface));
    ASSERT_TRUE(p);
    EXPECT_NE(if_nametoindex(iface.c_str()), 0u) << "net_tap did not create " << iface;
    std::string error;
    ASSERT_TRUE(p->start(&error)) << error;
    ASSERT_TRUE(wait_link_up(*p));
    sh("sysctl -qw net.ipv6.conf." + iface + ".disable_ipv6=1 >/dev/null 2>&1");
    RawSocket raw(iface);
    ASSERT_GE(raw.fd, 0) << "raw socket on " << iface;
    // Port -> kernel.
    ASSERT_EQ(send_frames(*p, 0, 20, 300), 20u);
    expect_frames(raw.receive_test_frames(20), 0, 20, 300);
    // Kernel -> port.
    for (uint32_t i = 0; i < 20; ++i) ASSERT_TRUE(raw.send(make_frame(900 + i, 300)));
    expect_frames(receive_frames(*p, 20), 900, 20, 300);
    EXPECT_EQ(p->stats().tx_packets, 20u);
    EXPECT_EQ(p->stats().tx_bytes, 20u * 300);
    EXPECT_GE(p->stats().rx_packets, 20u);
  }
  EXPECT_EQ(if_nametoindex(iface.c_str()), 0u) << iface << " still exists after close";
}

TEST(Port, TapGivesEveryPollingCoreItsOwnQueuePair) {
  if (!test::is_root()) GTEST_SKIP() << "needs root to create a tap interface";
  const std::string iface = "rdptq" + kTag;
  auto p = open_port(port_cfg("tapq", "net_tap1,iface=" + iface), 3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->queue_count(), 3);
  std::string error;
  ASSERT_TRUE(p->start(&error)) << error;
  rte_mbuf* pkts[4];
  for (uint16_t q = 0; q < 3; ++q) p->rx_burst(q, pkts, 0);  // every queue is usable
}

// ---------------------------------------------------------------------------------------------
// net_pcap: replay a real capture, and record what we send.

struct PcapFile {
  std::vector<std::vector<uint8_t>> frames;
  bool ok = false;
  explicit PcapFile(const std::string& path) {
    char err[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline(path.c_str(), err);
    if (p == nullptr) return;
    pcap_pkthdr* h;
    const u_char* data;
    while (pcap_next_ex(p, &h, &data) == 1) frames.emplace_back(data, data + h->caplen);
    pcap_close(p);
    ok = true;
  }
};

TEST(Port, PcapReplaysEveryFrameOfARealCapture) {
  PoolLeakCheck leaks;
  const std::string capture = shared_dir() + "/captures/rxe-rping.pcap";
  PcapFile expected(capture);
  ASSERT_TRUE(expected.ok) << "cannot read " << capture;
  ASSERT_EQ(expected.frames.size(), 127u);  // 125 RoCEv2 + the ARP exchange (captures/README.md)
  auto p = open_port(port_cfg("replay", "net_pcap0,rx_pcap=" + capture));
  ASSERT_TRUE(p);
  std::string error;
  ASSERT_TRUE(p->start(&error)) << error;
  std::vector<std::vector<uint8_t>> got;
  rte_mbuf* pkts[32];
  for (int idle = 0; idle < 200;) {
    uint16_t n = p->rx_burst(0, pkts, 32);
    if (n == 0) ++idle;
    for (uint16_t i = 0; i < n; ++i) {
      got.push_back(to_bytes(pkts[i]));
      rte_pktmbuf_free(pkts[i]);
    }
  }
  ASSERT_EQ(got.size(), expected.frames.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected.frames[i]) << "frame " << i;
  EXPECT_EQ(p->stats().rx_packets, expected.frames.size());
}

TEST(Port, PcapRecordsTheFramesWeSend) {
  PoolLeakCheck leaks;
  const char* art = std::getenv("ROCEDP_ARTIFACT_DIR");
  const std::string out = std::string(art != nullptr ? art : "/tmp") + "/pmd-tx-" + kTag + ".pcap";
  RemoveOnExit cleanup{out};
  {
    auto p = open_port(port_cfg("record", "net_pcap1,tx_pcap=" + out));
    ASSERT_TRUE(p);
    std::string error;
    ASSERT_TRUE(p->start(&error)) << error;
    ASSERT_EQ(send_frames(*p, 300, 25, 90), 25u);
    EXPECT_EQ(p->stats().tx_packets, 25u);
  }  // closing the port flushes and closes the file
  PcapFile written(out);
  ASSERT_TRUE(written.ok) << "cannot read " << out;
  expect_frames(written.frames, 300, 25, 90);
}

}  // namespace
}  // namespace rocedp::pmd
