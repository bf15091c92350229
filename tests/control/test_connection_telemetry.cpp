// The rows behind /rocedp/connections and /rocedp/qps (control/connection_telemetry.cpp): two
// adapters with connection managers over a ring pair (tests/seeds/cm_env.hpp), every core
// driven by the test, so one core can be held back while the other answers, as a descheduled
// lcore on a loaded machine would be.

#include "control/connection_telemetry.hpp"

#include <gtest/gtest.h>

#include <ostream>

#include "tests/seeds/cm_env.hpp"

namespace rocedp::test {
namespace {

class ConnectionTelemetry : public CmFixture {
 protected:
  struct Got {
    bool done = false;
    bool ok = false;
    control::ConnectionSnapshot snap;
  };
  void start(Got& g) {
    control::collect_connection_snapshot(*a_.adapter, {},
                                         [&g](bool ok, control::ConnectionSnapshot s) {
                                           g.done = true;
                                           g.ok = ok;
                                           g.snap = std::move(s);
                                         });
  }
  // What qps_watch.py checks on the daemon: every established connection's QP is listed, on
  // the connection's core, in RTS. Returns the number of established connections.
  static size_t expect_consistent(const control::ConnectionSnapshot& s) {
    size_t established = 0;
    for (const auto& c : s.connections) {
      if (c.state != "established") continue;
      ++established;
      const control::QpRow* row = nullptr;
      for (const auto& q : s.qps)
        if (q.qpn == c.qpn) row = &q;
      EXPECT_NE(row, nullptr) << "established connection with QPN " << c.qpn
                              << " but no such QP among " << s.qps.size() << " rows";
      if (row == nullptr) continue;
      EXPECT_EQ(row->core, c.core);
      EXPECT_EQ(row->state, "RTS");
    }
    return established;
  }
};

// Core 0 answers at once, core 1 is held: meanwhile a QP is created on core 0 and its connection
// established. The round ends when core 1 answers; the connection rows must be as old as core
// 0's QP rows, or the snapshot shows an established connection without its QP (/rocedp/qps
// count 0 while connections are up).
TEST_F(ConnectionTelemetry, ConnectionEstablishedWhileAnotherCoreLagsComesWithItsQp) {
  a_.held_cores = 1u << 1;
  Got g;
  start(g);
  pump(2);
  EXPECT_FALSE(g.done) << "core 1 has not answered yet";

  Endpoint x, y;
  make_endpoints(x, y, /*core_a=*/0, /*core_b=*/0);
  Link k;
  establish(k, x, y, 7000);
  ASSERT_FALSE(g.done) << "the round is still waiting for core 1";

  a_.held_cores = 0;
  ASSERT_TRUE(pump_until([&] { return g.done; }));
  EXPECT_TRUE(g.ok);
  expect_consistent(g.snap);

  // The next round shows the connection with its QP.
  Got next;
  start(next);
  ASSERT_TRUE(pump_until([&] { return next.done; }));
  EXPECT_TRUE(next.ok);
  EXPECT_EQ(expect_consistent(next.snap), 1u);
  // Each core's engine counters ride in the same round, one row per core in core order.
  ASSERT_EQ(next.snap.engines.size(), a_.adapter->core_count());
  for (uint32_t c = 0; c < next.snap.engines.size(); ++c) {
    EXPECT_EQ(next.snap.engines[c].core, c);
    EXPECT_EQ(next.snap.engines[c].counters[static_cast<size_t>(rc::RcCounter::kQpErrors)], 0u);
  }

  release(k);
  close_endpoint(x);
  close_endpoint(y);
}

// A core whose ring is full cannot be asked: the round says so instead of handing over rows
// with that core's QPs missing.
TEST_F(ConnectionTelemetry, FullRingMakesTheRoundIncomplete) {
  Endpoint x, y;
  make_endpoints(x, y, /*core_a=*/1, /*core_b=*/0);
  dataplane::CoreChannel& ch = *a_.channels[1];
  const uint32_t filled = fill_request_ring(ch);
  EXPECT_GT(filled, 0u);
  EXPECT_EQ(ch.in_flight(), ch.capacity());

  Got g;
  start(g);
  ASSERT_TRUE(pump_until([&] { return g.done; }));
  EXPECT_FALSE(g.ok) << "core 1 was not asked";
  EXPECT_TRUE(g.snap.qps.empty()) << "core 1 owns the only QP";

  Got again;
  start(again);
  ASSERT_TRUE(pump_until([&] { return again.done; }));
  EXPECT_TRUE(again.ok);
  ASSERT_EQ(again.snap.qps.size(), 1u);
  EXPECT_EQ(again.snap.qps[0].qpn, x.qp->qpn());

  close_endpoint(x);
  close_endpoint(y);
}

// ports[].dscp. `tos_of` reads a QP's ToS from its adapter's /rocedp/qps rows.
class TrafficClass : public ConnectionTelemetry {
 protected:
  uint32_t tos_of(Host& h, uint32_t qpn) {
    Got g;
    control::collect_connection_snapshot(*h.adapter, {},
                                         [&g](bool ok, control::ConnectionSnapshot s) {
                                           g.done = true;
                                           g.ok = ok;
                                           g.snap = std::move(s);
                                         });
    EXPECT_TRUE(pump_until([&] { return g.done; }));
    for (const auto& q : g.snap.qps)
      if (q.qpn == qpn) return q.tos;
    ADD_FAILURE() << "no QP " << qpn;
    return 0xFFFF;
  }
  // Establishes a connection A -> B and returns the ToS of A's REQ and B's REP frames (byte 15:
  // the IPv4 header's second byte) and the REQ's Traffic Class, with the two QPs' ToS.
  struct Marks {
    uint32_t req_frame, req_class, rep_frame, qp_a, qp_b;
    friend bool operator==(const Marks&, const Marks&) = default;
    friend std::ostream& operator<<(std::ostream& o, const Marks& m) {
      return o << "REQ frame " << m.req_frame << ", REQ class " << m.req_class << ", REP frame "
               << m.rep_frame << ", QP A " << m.qp_a << ", QP B " << m.qp_b;
    }
  };
  Marks connect_and_read() {
    Endpoint x, y;
    make_endpoints(x, y, 0, 0);
    Link k;
    establish(k, x, y, 7100);
    Marks m{};
    wire::CmMad req, rep;
    const CapturedFrame* fq = find_cm(tap_a_, 0x10, &req);
    const CapturedFrame* fp = find_cm(tap_b_, 0x13, &rep);
    EXPECT_TRUE(fq != nullptr && fp != nullptr);
    if (fq != nullptr && fp != nullptr) {
      m.req_frame = fq->bytes[15];
      m.req_class = std::get<wire::CmReq>(req.body).primary.traffic_class;
      m.rep_frame = fp->bytes[15];
    }
    m.qp_a = tos_of(a_, x.qp->qpn());
    m.qp_b = tos_of(b_, y.qp->qpn());
    release(k);
    close_endpoint(x);
    close_endpoint(y);
    return m;
  }
};

// A marked active side (DSCP 26: ToS 104) marks its REQ, in the frame and as the path's Traffic
// Class, and its QP; the unmarked passive side programs its QP with the REQ's traffic class, as
// Linux's CM does, and answers with it too (its REP on the REQ's path, as Linux's MADs go).
class TrafficClassActiveMarked : public TrafficClass {
 protected:
  uint8_t dscp_a() const override { return 26; }
};
TEST_F(TrafficClassActiveMarked, TheUnmarkedPassiveSideFollowsTheRequest) {
  EXPECT_EQ(connect_and_read(), (Marks{104, 104, 104, 104, 104}));
}

// Both marked, differently: each side's own port decides for its QP and its MADs.
class TrafficClassBothMarked : public TrafficClass {
 protected:
  uint8_t dscp_a() const override { return 26; }
  uint8_t dscp_b() const override { return 10; }
};
TEST_F(TrafficClassBothMarked, EachPortMarksItsOwnFrames) {
  EXPECT_EQ(connect_and_read(), (Marks{104, 104, 40, 104, 40}));
}

// Neither marked: ToS 0 everywhere (what rdma_rxe sends by default).
TEST_F(TrafficClass, UnmarkedPortsSendToSZero) {
  EXPECT_EQ(connect_and_read(), (Marks{0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace rocedp::test
