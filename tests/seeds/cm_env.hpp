#pragma once
// Two adapters with connection managers over a ring pair (tests/ndk/ndk_env.hpp), the test
// thread playing the control thread. The CM runs on a virtual clock the test advances, so CM
// and ARP timeouts are provoked without waiting; the RC engines keep their real clock.

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "control/connection_manager_setup.hpp"
#include "dataplane/wire/bth.hpp"
#include "dataplane/wire/cm_messages.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"
#include "rocedp/shared_endpoint.hpp"
#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {

/// A RequestCompletion / DisconnectEvent recorder that also checks the thread it runs on.
struct Req {
  int count = 0;
  NTSTATUS status = STATUS_PENDING;
  std::thread::id thread;
  static void cb(void* c, NTSTATUS s) {
    auto* r = static_cast<Req*>(c);
    ++r->count;
    // Every completion and disconnect event fires at most once (exactly once where a test
    // waits for it): a second call is a failure wherever it happens.
    EXPECT_EQ(r->count, 1) << "callback fired again, status 0x" << std::hex << s;
    r->status = s;
    r->thread = std::this_thread::get_id();
  }
  static void plain(void* c) { cb(c, STATUS_SUCCESS); }
  bool done() const { return count > 0; }
};

/// A listener's connect events.
struct Events {
  std::vector<Connector*> connectors;
  std::thread::id thread;
  static void cb(void* c, NdkConnector* conn) {
    auto* e = static_cast<Events*>(c);
    e->connectors.push_back(Connector::from(conn));
    e->thread = std::this_thread::get_id();
  }
};

struct CapturedFrame {
  std::vector<uint8_t> bytes;
};

/// Where the MAD starts in a CM frame (Ethernet, IP, UDP, BTH, DETH) of IPv4 or IPv6.
constexpr size_t cm_mad_at(bool ipv6) {
  return (ipv6 ? wire::kCmFrameLen6 : wire::kCmFrameLen) - wire::kMadLen - wire::kIcrcLen;
}

/// The first CM MAD of attribute `attr` (0x10 REQ, 0x13 REP, ...) among `tap`'s frames, decoded
/// into `out`; its frame, or null.
inline const CapturedFrame* find_cm(const std::vector<CapturedFrame>& tap, uint16_t attr,
                                    wire::CmMad* out) {
  constexpr size_t kMadAt = cm_mad_at(false);
  for (const auto& f : tap) {
    if (f.bytes.size() < kMadAt + wire::kMadLen) continue;
    if (wire::decode_cm_mad(wire::Bytes(f.bytes.data() + kMadAt, wire::kMadLen), *out) !=
        wire::CmDecodeStatus::kOk)
      continue;
    if (wire::cm_attr_id(out->body) == attr) return &f;
  }
  return nullptr;
}

class CmFixture : public NdkFixture {
 protected:
  static constexpr uint64_t kSecond = 1'000'000'000;

  config::LimitsConfig adapter_limits() const override {
    config::LimitsConfig l = limits();
    l.max_listeners = 4;
    l.max_shared_endpoints = 4;
    return l;
  }
  /// The CM's addresses are the ports' IPv6 ones (addr_a, addr_b); the peer's MAC is known.
  virtual bool cm_ipv6() const { return false; }
  virtual ConnectionManagerSetup cm_setup(Host& h) {
    ConnectionManagerSetup s;
    if (cm_ipv6()) {
      const Host* peer = &h == &a_ ? &b_ : &a_;
      s.resolve6 = [peer](const std::array<uint8_t, 16>& ip,
                          const ConnectionManagerSetup::ResolveDone& done) {
        const bool known = ip == peer->ip6.bytes;
        done(known, known ? peer->mac.bytes.data() : nullptr);
        return true;
      };
    }
    s.dispatch = h.dispatch.get();
    s.tx_core = 0;
    s.arp_retry_ms = 200;
    s.arp_retries = 3;
    s.cm_response_timeout = 16;  // 268 ms of virtual time per CM attempt
    s.max_cm_retries = 3;
    s.timewait_ns = kSecond;
    s.local_ack_timeout = 10;  // 4.2 ms (real time: the RC engine's clock)
    s.retry_count = 3;
    s.qp_probe_interval_ns = 0;
    s.clock = [](void* c) { return *static_cast<uint64_t*>(c); };
    s.clock_context = &clock_ns_;
    s.cm_tap = [](void* c, const uint8_t* f, size_t n, bool outgoing) {
      if (!outgoing) return;  // each frame once: as its sender built it
      static_cast<std::vector<CapturedFrame>*>(c)->push_back({std::vector<uint8_t>(f, f + n)});
    };
    s.cm_tap_context = &h == &a_ ? &tap_a_ : &tap_b_;
    return s;
  }

  void SetUp() override {
    NdkFixture::SetUp();
    if (HasFatalFailure()) return;
    main_thread_ = std::this_thread::get_id();
    ASSERT_EQ(attach_connection_manager(*a_.adapter, cm_setup(a_)), STATUS_SUCCESS);
    ASSERT_EQ(attach_connection_manager(*b_.adapter, cm_setup(b_)), STATUS_SUCCESS);
  }

  void TearDown() override {
    for (Host* h : {&a_, &b_}) {
      if (h->adapter != nullptr) {
        EXPECT_EQ(detach_connection_manager(*h->adapter), STATUS_SUCCESS) << "objects left open";
      }
    }
    dead_b_ = false;
    NdkFixture::TearDown();
  }

  /// One round: cores (B's only while it lives), then the CM of each side (frames, timers),
  /// then the object layer's completions (QP moves).
  void pump(int rounds = 1) {
    for (int r = 0; r < rounds; ++r) {
      for (size_t c = 0; c < a_.cores.size(); ++c)
        if (!a_.held(c)) a_.cores[c]->poll_once();
      if (!dead_b_)
        for (size_t c = 0; c < b_.cores.size(); ++c)
          if (!b_.held(c)) b_.cores[c]->poll_once();
      if (!silent_a_) poll_connections(*a_.adapter);
      if (!silent_b_ && !dead_b_) poll_connections(*b_.adapter);
      a_.adapter->poll_control();
      if (!dead_b_) b_.adapter->poll_control();
      if (on_round_) on_round_();
    }
  }
  bool pump_until(const std::function<bool()>& pred, uint64_t max_rounds = 200'000) {
    for (uint64_t i = 0; i < max_rounds; ++i) {
      if (pred()) return true;
      pump(1);
    }
    return pred();
  }
  /// Advances the CM clock in steps (each step followed by a few rounds), for `total` ns.
  void advance(uint64_t total, uint64_t step = 50'000'000) {
    for (uint64_t t = 0; t < total; t += step) {
      clock_ns_ += step;
      pump(4);
    }
  }

  NdkSockAddr addr_a(uint16_t port) const { return addr_of(a_, port); }
  NdkSockAddr addr_b(uint16_t port) const { return addr_of(b_, port); }
  NdkSockAddr addr_of(const Host& h, uint16_t port) const {
    NdkSockAddr a{h.ip, port};
    if (cm_ipv6()) {
      a.ip = 0;
      a.ipv6 = true;
      a.ip6 = h.ip6.bytes;
    }
    return a;
  }

  Listener* listen_b(uint16_t port, Events* ev) {
    Listener* l = nullptr;
    EXPECT_EQ(create_listener(*b_.adapter, &Events::cb, ev, nullptr, nullptr, &l), STATUS_SUCCESS);
    EXPECT_EQ(l->listen(addr_b(port), nullptr, nullptr), STATUS_SUCCESS);
    return l;
  }
  Connector* connector(Host& h) {
    Connector* c = nullptr;
    EXPECT_EQ(create_connector(*h.adapter, nullptr, nullptr, &c), STATUS_SUCCESS);
    return c;
  }
  /// An endpoint (PD, CQ, QP) on each adapter, not connected.
  void make_endpoints(Endpoint& x, Endpoint& y, uint32_t core_a = 0, uint32_t core_b = 1) {
    x.host = &a_;
    y.host = &b_;
    for (Endpoint* e : {&x, &y}) {
      e->pd = make_pd(*e->host);
      e->cq = make_cq(*e->host, 1024, e == &x ? core_a : core_b, &e->notes);
      e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
    }
  }
  /// Closes `c`: inline SUCCESS when nothing was pending, else PENDING and the CloseCompletion
  /// (exactly once) after the pending requests completed.
  void close_connector(Connector*& c) {
    if (c != nullptr) {
      Closed cl;
      const NTSTATUS st = c->close(&Closed::cb, &cl);
      if (st == STATUS_PENDING) {
        EXPECT_EQ(cl.count, 0) << "the close completion never runs inside close()";
        EXPECT_TRUE(pump_until([&] { return cl.count != 0; }));
        pump(2);
        EXPECT_EQ(cl.count, 1);
      } else {
        EXPECT_EQ(st, STATUS_SUCCESS);
        pump(2);
        EXPECT_EQ(cl.count, 0) << "inline close: no callback";
      }
    }
    c = nullptr;
  }
  void close_listener(Listener*& l) {
    if (l != nullptr) {
      EXPECT_EQ(l->close(nullptr, nullptr), STATUS_SUCCESS);
    }
    l = nullptr;
  }

  /// Connect A -> B's listener and let B's consumer see the request; returns B's connector.
  Connector* request(Connector* ca, Qp* qp, uint16_t port, Events& ev, Req& connected,
                     const void* pd = nullptr, uint32_t pd_len = 0) {
    const size_t before = ev.connectors.size();
    EXPECT_EQ(ca->connect(qp, addr_a(0), addr_b(port), 4, 4, pd, pd_len, &Req::cb, &connected),
              STATUS_PENDING);
    EXPECT_TRUE(pump_until([&] { return ev.connectors.size() > before || connected.done(); }));
    return ev.connectors.size() > before ? ev.connectors.back() : nullptr;
  }

  /// A fully established connection x(A) -> y(B) through the CM.
  struct Link {
    Listener* listener = nullptr;
    Connector* ca = nullptr;
    Connector* cb = nullptr;
    Events events;
    Req connected, accepted, completed, disc_a, disc_b;
  };
  void establish(Link& k, Endpoint& x, Endpoint& y, uint16_t port, const void* accept_pd = nullptr,
                 uint32_t accept_pd_len = 0) {
    k.listener = listen_b(port, &k.events);
    k.ca = connector(a_);
    k.cb = request(k.ca, x.qp, port, k.events, k.connected);
    ASSERT_NE(k.cb, nullptr);
    ASSERT_EQ(k.cb->accept_ex(
                  y.qp, 4, 4, accept_pd, accept_pd_len, [](void* c, NTSTATUS s) { Req::cb(c, s); },
                  &k.disc_b, &Req::cb, &k.accepted),
              STATUS_PENDING);
    ASSERT_TRUE(pump_until([&] { return k.connected.done(); }));
    ASSERT_EQ(k.connected.status, STATUS_SUCCESS);
    ASSERT_EQ(k.ca->complete_connect_ex([](void* c, NTSTATUS s) { Req::cb(c, s); }, &k.disc_a,
                                        &Req::cb, &k.completed),
              STATUS_PENDING);
    ASSERT_TRUE(pump_until([&] { return k.completed.done() && k.accepted.done(); }));
    ASSERT_EQ(k.completed.status, STATUS_SUCCESS);
    ASSERT_EQ(k.accepted.status, STATUS_SUCCESS);
  }
  void release(Link& k) {
    close_connector(k.ca);
    close_connector(k.cb);
    close_listener(k.listener);
  }

  /// Over a connection x(A) -> y(B): a SEND of 13 bytes into yb at 1024, a WRITE of xb's first 512
  /// bytes to B's region (va, token: yb's start), then a READ of it back into xb at 2048; each
  /// completes once, byte-exact.
  void send_write_read(Endpoint& x, Endpoint& y, Buffer& xb, Buffer& yb, uint64_t va,
                       uint32_t token) {
    std::memcpy(xb.ptr(), "payload-bytes", 13);
    NdkSge rs = yb.sge(1024, 64);
    ASSERT_EQ(y.qp->receive(&y, &rs, 1), STATUS_SUCCESS);
    NdkSge ss = xb.sge(0, 13);
    ASSERT_EQ(x.qp->send(&x, &ss, 1, 0), STATUS_SUCCESS);
    auto rb = wait_results(y.cq, 1);
    ASSERT_EQ(rb.size(), 1u);
    EXPECT_EQ(rb[0].status, STATUS_SUCCESS);
    EXPECT_EQ(rb[0].bytes_transferred, 13u);
    EXPECT_EQ(std::memcmp(yb.ptr() + 1024, "payload-bytes", 13), 0);
    NdkSge ws = xb.sge(0, 512);
    ASSERT_EQ(x.qp->write(&x, &ws, 1, va, token, 0), STATUS_SUCCESS);
    NdkSge rd = xb.sge(2048, 512);
    ASSERT_EQ(x.qp->read(&x, &rd, 1, va, token, 0), STATUS_SUCCESS);
    auto ra = wait_results(x.cq, 3);
    ASSERT_EQ(ra.size(), 3u);
    for (auto& r : ra) EXPECT_EQ(r.status, STATUS_SUCCESS);
    EXPECT_EQ(std::memcmp(yb.ptr(), xb.ptr(), 512), 0);
    EXPECT_EQ(std::memcmp(xb.ptr() + 2048, xb.ptr(), 512), 0);
  }

  uint64_t clock_ns_ = kSecond;
  /// Runs at the end of every pump() round: more of the daemon's control loop (the services'
  /// poll()) for the tests that have it.
  std::function<void()> on_round_;
  bool dead_b_ = false;
  bool silent_a_ = false;
  bool silent_b_ = false;
  std::thread::id main_thread_;
  std::vector<CapturedFrame> tap_a_, tap_b_;
};

}  // namespace rocedp::test
