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

  void start(config::ListenerConfig::Service service) {
    config::ListenerConfig l;
    l.port = "b";
    l.nd_port = kPort;
    l.service = service;
    l.message_bytes = 256;
    l.queue_depth = 8;
    l.memory_bytes = 65536;
    l.keepalive_ms = 0;
    std::string error;
    ASSERT_EQ(control::Services::start(*b_.adapter, {l}, &svc_, &error), STATUS_SUCCESS) << error;
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
  void request_client(Client& c) {
    c.ep.host = &a_;
    c.ep.pd = make_pd(a_);
    c.ep.cq = make_cq(a_, 256, 0, &c.ep.notes);
    c.ep.qp = make_qp(c.ep.pd, c.ep.cq, c.ep.cq, &c.ep, 16);
    c.buf = buffer(c.ep.pd, 4096);
    c.conn = connector(a_);
    ASSERT_EQ(c.conn->connect(c.ep.qp, addr_a(0), addr_b(kPort), 4, 4, nullptr, 0, &Req::cb,
                              &c.connected),
              STATUS_PENDING);
    ASSERT_TRUE(pump_until([&] { return c.connected.done(); }));
    ASSERT_EQ(c.connected.status, STATUS_SUCCESS);
  }
  void connect_client(Client& c) {
    request_client(c);
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

  // One echo, byte for byte.
  for (uint32_t i = 0; i < 200; ++i) c.buf->data[i] = static_cast<uint8_t>(i * 7 + 1);
  NdkSge rs = c.buf->sge(2048, 256);
  ASSERT_EQ(c.ep.qp->receive(&c, &rs, 1), STATUS_SUCCESS);
  NdkSge ss = c.buf->sge(0, 200);
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
  EXPECT_EQ(echo->bytes_transferred, 200u);
  EXPECT_EQ(std::memcmp(c.buf->ptr() + 2048, c.buf->ptr(), 200), 0);
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

}  // namespace
}  // namespace rocedp::test
