// rocedpd's built-in services (control/services.cpp) in one process: B's adapter serves them, A
// connects like any client, every core and both control sides driven by the test
// (tests/seeds/cm_env.hpp). Here the paths the daemon tests cannot reach on demand: a close that
// meets a core whose request ring is full (a descheduled lcore on a loaded machine) must be tried
// again, not taken for done, so no region is left registered (a connection's buffers, a memory
// listener's memory) and stop still finishes.

#include "control/services.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "control/connection_telemetry.hpp"
#include "dataplane/core_channel.hpp"
#include "tests/seeds/cm_env.hpp"

namespace rocedp::test {
namespace {

constexpr uint16_t kPort = 7000;

class ServicesTest : public CmFixture {
 protected:
  void TearDown() override {
    // Whatever a test left: stopped here, so the adapters close with nothing of the services'.
    if (svc_ != nullptr) {
      b_.held_cores = 0;
      svc_->stop();
      EXPECT_TRUE(pump_until([&] { return svc_->stopped(); }));
      svc_.reset();
    }
    CmFixture::TearDown();
  }

  static config::ListenerConfig entry(config::ListenerConfig::Service service,
                                      uint16_t nd_port = kPort) {
    config::ListenerConfig l;
    l.port = "b";
    l.nd_port = nd_port;
    l.service = service;
    l.message_bytes = 256;
    l.queue_depth = 8;
    l.memory_bytes = 65536;
    l.keepalive_ms = 0;
    return l;
  }
  void start(config::ListenerConfig::Service service) { start_all({entry(service)}); }
  void start_all(const std::vector<config::ListenerConfig>& listeners) {
    std::string error;
    ASSERT_EQ(control::Services::start(*b_.adapter, listeners, &svc_, &error), STATUS_SUCCESS)
        << error;
    on_round_ = [this] {  // every pump round runs the services' poll(), as the daemon's loop does
      if (svc_) svc_->poll();
    };
  }

  /// Holds B's core `core` with its request ring full (fill_request_ring); returns how many
  /// requests the ring took.
  uint32_t fill_b_ring(uint32_t core) {
    b_.held_cores |= 1u << core;
    dataplane::CoreChannel& ch = *b_.channels[core];
    const uint32_t n = fill_request_ring(ch);
    EXPECT_EQ(ch.in_flight(), ch.capacity());
    return n;
  }

  /// B's QP rows as its cores report them (/rocedp/qps).
  std::vector<control::QpRow> b_qp_rows() {
    bool done = false;
    std::vector<control::QpRow> rows;
    control::collect_connection_snapshot(*b_.adapter, {},
                                         [&](bool ok, control::ConnectionSnapshot s) {
                                           EXPECT_TRUE(ok);
                                           done = true;
                                           rows = std::move(s.qps);
                                         });
    EXPECT_TRUE(pump_until([&] { return done; }));
    return rows;
  }
  size_t b_qps() { return b_qp_rows().size(); }
  uint32_t b_qp_core() {
    const auto rows = b_qp_rows();
    EXPECT_EQ(rows.size(), 1u);
    return rows.empty() ? 0 : rows[0].core;
  }

  /// A client on A connected to B's service: its endpoint, a buffer and the connector.
  struct Client {
    Endpoint ep;
    std::unique_ptr<Buffer> buf;
    Connector* conn = nullptr;
    Req connected, completed, disconnected;
  };
  /// A client whose Connect to B's service succeeded (the service accepted: its REP came); no
  /// CompleteConnect yet, so no RTU.
  void request_client(Client& c, uint16_t nd_port = kPort) {
    send_request(c, nd_port);
    ASSERT_EQ(c.connected.status, STATUS_SUCCESS);
  }
  void connect_client(Client& c, uint16_t nd_port = kPort) {
    request_client(c, nd_port);
    if (HasFatalFailure()) return;
    ASSERT_EQ(c.conn->complete_connect_ex([](void* x, NTSTATUS s) { Req::cb(x, s); },
                                          &c.disconnected, &Req::cb, &c.completed),
              STATUS_PENDING);
    ASSERT_TRUE(pump_until([&] { return c.completed.done(); }));
    ASSERT_EQ(c.completed.status, STATUS_SUCCESS);
  }
  void close_client(Client& c) {
    close_connector(c.conn);
    std::vector<std::unique_ptr<Buffer>> bufs;
    bufs.push_back(std::move(c.buf));
    close_endpoint(c.ep, &bufs);
  }

  /// One SEND of `n` bytes through an echo connection: the same bytes come back.
  void expect_echo(Client& c, uint32_t n, uint8_t seed) {
    for (uint32_t i = 0; i < n; ++i) c.buf->data[i] = static_cast<uint8_t>(i * 7 + seed);
    NdkSge rs = c.buf->sge(2048, 256);
    ASSERT_EQ(c.ep.qp->receive(&c, &rs, 1), STATUS_SUCCESS);
    NdkSge ss = c.buf->sge(0, n);
    ASSERT_EQ(c.ep.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
    std::vector<NdkResultEx> got;
    ASSERT_TRUE(pump_until([&] {
      NdkResultEx r[4];
      for (uint32_t k; (k = c.ep.cq->get_results_ex(r, 4)) != 0;) got.insert(got.end(), r, r + k);
      return got.size() >= 2;
    }));
    for (const auto& r : got) EXPECT_EQ(r.status, STATUS_SUCCESS);
    const auto echo = std::find_if(got.begin(), got.end(), [](const NdkResultEx& r) {
      return r.type == NdkOperationType::kReceive;
    });
    ASSERT_NE(echo, got.end());
    EXPECT_EQ(echo->bytes_transferred, n);
    EXPECT_EQ(std::memcmp(c.buf->ptr() + 2048, c.buf->ptr(), n), 0);
  }
  /// The nd_ports of the rows the service reports (/rocedp/listeners' counts).
  std::vector<uint16_t> row_ports() const {
    std::vector<uint16_t> out;
    for (const auto& r : svc_->rows()) out.push_back(r.nd_port);
    return out;
  }
  /// A Connect to B's nd_port: its status once the CM answered (no Accept follows).
  NTSTATUS connect_status(uint16_t nd_port) {
    Client c;
    send_request(c, nd_port);
    const NTSTATUS st = c.connected.status;
    close_client(c);
    return st;
  }
  /// A client's Connect to B's nd_port, answered (c.connected holds its status).
  void send_request(Client& c, uint16_t nd_port) {
    c.ep.host = &a_;
    c.ep.pd = make_pd(a_);
    c.ep.cq = make_cq(a_, 256, 0, &c.ep.notes);
    c.ep.qp = make_qp(c.ep.pd, c.ep.cq, c.ep.cq, &c.ep, 16);
    c.buf = buffer(c.ep.pd, 4096);
    c.conn = connector(a_);
    EXPECT_EQ(c.conn->connect(c.ep.qp, addr_a(0), addr_b(nd_port), 4, 4, nullptr, 0, &Req::cb,
                              &c.connected),
              STATUS_PENDING);
    EXPECT_TRUE(pump_until([&] { return c.connected.done(); }));
  }

  std::unique_ptr<control::Services> svc_;
};

// The echo service answers a SEND with the same bytes; then it stops while the core that does not
// own the connection has a full request ring. The connection's buffer region cannot be closed
// (STATUS_INSUFFICIENT_RESOURCES, nothing changed): the service keeps the connection and asks
// again from poll(), and once the core runs, the region closes and stop finishes. The client sees
// the disconnect. (QP and CQ closes queue behind a full ring inside the NDK layer; a region's
// close is the one that reports it.)
TEST_F(ServicesTest, EchoCloseOnAFullCoreRingIsTriedAgainAndLeavesNothing) {
  start(config::ListenerConfig::Service::kEcho);
  Client c;
  connect_client(c);
  ASSERT_EQ(svc_->open_connections(), 1u);

  expect_echo(c, 200, 1);  // one echo, byte for byte
  // The connection's QP and CQ live on one core; the buffer region's close needs every core
  // (none may still touch the buffers). The other core stops running with a full ring: the QP and
  // CQ close, the region's close cannot start.
  const uint32_t other = 1 - b_qp_core();
  const uint32_t filled = fill_b_ring(other);
  svc_->stop();
  advance(3 * kSecond);
  EXPECT_FALSE(svc_->stopped()) << "stopped with core " << other << "'s ring full (" << filled
                                << " requests)";
  EXPECT_EQ(svc_->open_connections(), 1u) << "the connection was dropped before its region closed";

  b_.held_cores = 0;
  ASSERT_TRUE(pump_until([&] { return svc_->stopped(); }));
  EXPECT_EQ(svc_->open_connections(), 0u);
  EXPECT_EQ(b_qps(), 0u) << "the service's QP outlived the service";
  EXPECT_TRUE(c.disconnected.done()) << "the service's DREQ did not reach the client";
  svc_.reset();
  close_client(c);
}

// A stop while an Accept waits for the client's RTU cancels it: the connection counts as closed,
// neither accepted nor failed (a stop is no failure of the service's), and the client's
// establishment ends.
TEST_F(ServicesTest, AStopDuringAnAcceptCountsItClosedNotFailed) {
  start(config::ListenerConfig::Service::kEcho);
  Client c;
  request_client(c);  // the service's Accept waits for the RTU
  ASSERT_EQ(svc_->open_connections(), 1u);
  svc_->stop();
  ASSERT_TRUE(pump_until([&] { return svc_->stopped(); }));
  const auto rows = svc_->rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].accepted, 0u);
  EXPECT_EQ(rows[0].failed, 0u) << "the service's own stop counted as a failed connection";
  EXPECT_EQ(rows[0].closed, 1u);
  // The client's establishment ends: the service's REJ came before any CompleteConnect.
  EXPECT_EQ(c.conn->complete_connect_ex([](void* x, NTSTATUS s) { Req::cb(x, s); }, &c.disconnected,
                                        &Req::cb, &c.completed),
            STATUS_CONNECTION_ABORTED);
  svc_.reset();
  close_client(c);
}

// The memory service's region closes at stop, on every core (no core may still touch it). With
// the cores' rings full that close cannot start: stop waits and tries again, instead of calling
// itself stopped with the region still registered.
TEST_F(ServicesTest, MemoryRegionCloseOnAFullCoreRingIsTriedAgain) {
  start(config::ListenerConfig::Service::kMemory);
  fill_b_ring(1);
  svc_->stop();
  advance(kSecond);
  EXPECT_FALSE(svc_->stopped()) << "stopped while its region's close could not be asked for";
  b_.held_cores = 0;
  ASSERT_TRUE(pump_until([&] { return svc_->stopped(); }));
  svc_.reset();
  // TearDown: B's adapter closes only with nothing of the service left open (its PD included).
}

// A reload that drops a listener stops that one alone: its connection gets the service's DREQ,
// its nd_port refuses new clients, its row goes; the listener kept keeps its connection, which
// still echoes. What the dropped listener held (its region, its connection's QP) closes.
TEST_F(ServicesTest, AReloadStopsADroppedListenerAloneAndEndsItsConnections) {
  using S = config::ListenerConfig::Service;
  const config::ListenerConfig echo = entry(S::kEcho, kPort), memory = entry(S::kMemory, kPort + 1);
  start_all({echo, memory});
  Client e, m;
  connect_client(e, kPort);
  connect_client(m, kPort + 1);
  ASSERT_EQ(svc_->open_connections(), 2u);
  EXPECT_EQ(svc_->rows().at(1).connections, 1u);
  expect_echo(e, 100, 1);

  std::string error;
  EXPECT_EQ(svc_->update({echo}, &error), STATUS_SUCCESS) << error;
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(svc_->serving(), std::vector<config::ListenerConfig>{echo});
  EXPECT_EQ(row_ports(), std::vector<uint16_t>{kPort}) << "the dropped listener still has a row";
  ASSERT_TRUE(pump_until([&] { return m.disconnected.done(); }))
      << "the dropped listener's connection was not ended";
  ASSERT_TRUE(pump_until([&] { return svc_->open_connections() == 1; }));
  EXPECT_EQ(b_qps(), 1u) << "the dropped listener's QP outlived it";
  EXPECT_FALSE(e.disconnected.done()) << "the kept listener's connection was ended";
  expect_echo(e, 200, 3);
  EXPECT_NE(connect_status(kPort + 1), STATUS_SUCCESS) << "the dropped nd_port still accepts";
  EXPECT_EQ(svc_->rows().at(0).accepted, 1u);
  close_client(m);
  close_client(e);
}

// A reload that adds a listener starts it; an entry that changed (here its queue depth) is
// another listener: the old one ends its connection, the new one serves on the same nd_port.
TEST_F(ServicesTest, AReloadStartsNewListenersAndReplacesAChangedOne) {
  using S = config::ListenerConfig::Service;
  const config::ListenerConfig echo = entry(S::kEcho, kPort);
  start_all({echo});
  Client old_client;
  connect_client(old_client, kPort);
  expect_echo(old_client, 64, 5);

  config::ListenerConfig deeper = echo;
  deeper.queue_depth = 16;
  const config::ListenerConfig memory = entry(S::kMemory, kPort + 2);
  std::string error;
  EXPECT_EQ(svc_->update({deeper, memory}, &error), STATUS_SUCCESS) << error;
  EXPECT_EQ(svc_->serving(), (std::vector<config::ListenerConfig>{deeper, memory}));
  EXPECT_EQ(row_ports(), (std::vector<uint16_t>{kPort, static_cast<uint16_t>(kPort + 2)}));
  EXPECT_EQ(svc_->rows().at(0).connections, 0u)
      << "the replaced listener's connection counted as the new one's";
  ASSERT_TRUE(pump_until([&] { return old_client.disconnected.done(); }))
      << "the replaced listener's connection was not ended";
  Client again, mem;
  connect_client(again, kPort);
  expect_echo(again, 256, 9);
  connect_client(mem, kPort + 2);
  EXPECT_EQ(svc_->open_connections(), 2u);
  EXPECT_EQ(svc_->rows().at(0).connections, 1u);
  EXPECT_EQ(svc_->rows().at(1).connections, 1u);
  EXPECT_EQ(svc_->rows().at(0).accepted, 1u) << "the new listener's counts start at zero";
  close_client(mem);
  close_client(again);
  close_client(old_client);
}

// A listener a reload cannot start (its nd_port is taken by another listener of the adapter) is
// named in the error and left out; the reload's other entries apply, and the failed one leaves
// nothing registered (its region closes: B's adapter closes clean at the end).
TEST_F(ServicesTest, AReloadNamesAListenerThatCannotStartAndAppliesTheRest) {
  using S = config::ListenerConfig::Service;
  const config::ListenerConfig echo = entry(S::kEcho, kPort);
  start_all({echo});
  Events theirs;
  Listener* taken = listen_b(kPort + 5, &theirs);
  const config::ListenerConfig clash = entry(S::kMemory, kPort + 5),
                               fresh = entry(S::kEcho, kPort + 6);
  std::string error;
  EXPECT_NE(svc_->update({echo, clash, fresh}, &error), STATUS_SUCCESS);
  EXPECT_NE(error.find("memory listener on nd_port 7005"), std::string::npos) << error;
  EXPECT_EQ(svc_->serving(), (std::vector<config::ListenerConfig>{echo, fresh}));
  Client c;
  connect_client(c, kPort + 6);
  expect_echo(c, 32, 11);
  close_client(c);
  close_listener(taken);
  svc_->stop();
  ASSERT_TRUE(pump_until([&] { return svc_->stopped(); }));
  EXPECT_NE(svc_->update({echo}, &error), STATUS_SUCCESS) << "a stopped service took a reload";
}

}  // namespace
}  // namespace rocedp::test
