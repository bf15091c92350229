// Fuzzes the connection manager as a whole (control/cm_agent.cpp: routing MADs to connections by
// comm ID and QPN, duplicates, stale requests, MADs for no connection; the NDK connector,
// listener and shared endpoint objects over it) with scripts: two adapters with connection
// managers over a ring pair (tests/seeds/cm_env.hpp, the CM on a virtual clock), IPv4 or IPv6,
// A's consumer connecting to B's listener, and the input deciding, step by step, which consumer
// call runs (connect, from a port of its own or through a shared endpoint, accept, reject,
// complete, disconnect, abortive disconnect, close, the listener paused, resumed, closed and
// opened again), when time jumps, when a side's CM stops reading, and which MADs a side receives
// besides its peer's own: a MAD its peer sent earlier, again (a duplicate or a stale copy), with
// bytes altered, or from another address.
// In services mode B is not a consumer of the test's but rocedpd's echo, memory and perftest
// services (control/services.cpp, perftest_service.cpp; at most 3 connections each, perftest 4),
// A's connections go to any of them, A sends on its echo connections, and on its perftest
// connections perftest's set-up messages (rocedp/perftest.hpp's kinds, in any order, or bytes
// perftest never sends): the daemon's own code under a hostile client.
// Properties: no memory error or undefined behaviour (ASan+UBSan); every consumer callback at
// most once (each request's completion, each connection's disconnect event, each close's
// completion); once the consumers close everything and time runs on, every request that pended
// has completed, both connection managers hold no connection and every mbuf is back in the pool;
// and the connection manager still works: a new connection through the same listener port
// connects and carries a SEND. In services mode the services hold no connection by then, a new
// client's SEND comes back from the echo byte for byte, and the services stop holding nothing
// (no connection, no perftest session).
//
// The first byte chooses IPv4 or IPv6 (bit 0) and services mode (bit 1); then each pair of
// bytes is an operation (% 14, below) and its argument, and some operations read more bytes.
// Seeds: tests/fuzz/seeds/cm_agent/, written by tests/fuzz/make_seeds.py.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "control/services.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/ipv6.hpp"
#include "dataplane/wire/mad.hpp"
#include "rocedp/perftest.hpp"
#include "tests/fuzz/fuzz_target.hpp"
#include "tests/seeds/cm_env.hpp"
#include "tests/wire/wire_test_util.hpp"

namespace {

using namespace rocedp;
using namespace rocedp::test;

constexpr uint16_t kPort = 6100;
constexpr size_t kMaxConns = 4;           // per side: connectors, each with its own QP
constexpr uint16_t kEndpointPort = 6200;  // A's shared endpoint
constexpr uint32_t kEchoBytes = 256;      // services mode: the echo's receive buffers

class World : public CmFixture {
 public:
  World(bool ipv6, bool services) : ipv6_(ipv6), mad_at_(cm_mad_at(ipv6)), services_(services) {}
  void TestBody() override {}
  bool cm_ipv6() const override { return ipv6_; }

  struct Conn {
    Connector* c = nullptr;  // null once closed
    Qp* qp = nullptr;
    Req* established = nullptr;  // the completion of Accept or CompleteConnect
    Req* disconnect_event = nullptr;
    uint16_t port = kPort;  // A's: the port it connected to
  };

  // Opens both adapters, endpoints' PD and CQ on each side, and B's listener; in services mode
  // rocedpd's echo (kPort), memory (kPort + 1) and perftest (kPort + 2, its SENDs echoed) services
  // on B instead, serving at most 3 connections each (perftest 4) and ending none on their own (no
  // idle timeout, no keepalive).
  bool open() {
    SetUp();
    if (HasFailure()) return false;
    for (Endpoint* e : {&x_, &y_}) {
      e->host = e == &x_ ? &a_ : &b_;
      e->pd = make_pd(*e->host);
      e->cq = make_cq(*e->host, 1024, e == &x_ ? 0 : 1);
    }
    a_buf_ = buffer(x_.pd, 2 * kEchoBytes);
    if (services_) {
      using S = config::ListenerConfig::Service;
      std::vector<config::ListenerConfig> ls(3);
      for (size_t i = 0; i < ls.size(); ++i) {
        ls[i].port = "b";
        ls[i].nd_port = static_cast<uint16_t>(kPort + i);
        ls[i].service = i == 0 ? S::kEcho : i == 1 ? S::kMemory : S::kPerftest;
        ls[i].sends = config::ListenerConfig::Sends::kEcho;
        ls[i].message_bytes = kEchoBytes;
        ls[i].queue_depth = 8;
        ls[i].memory_bytes = 65536;
        ls[i].max_connections = i == 2 ? 4 : 3;
        ls[i].idle_timeout_ms = 0;
        ls[i].keepalive_ms = 0;
      }
      std::string error;
      FUZZ_CHECK(control::Services::start(*b_.adapter, ls, &svc_, &error) == STATUS_SUCCESS);
      on_round_ = [this] {  // every pump round runs the services' poll(), as the daemon's loop does
        if (svc_) svc_->poll();
      };
    } else {
      listener_ = listen_b(kPort, &events_);
    }
    FUZZ_CHECK(create_shared_endpoint(*a_.adapter, addr_a(kEndpointPort), nullptr, nullptr,
                                      &endpoint_) == STATUS_SUCCESS);
    return !HasFailure();
  }

  // A callback recorder (Req: a second call fails the run, which every step checks).
  Req* once() { return &calls_.emplace_back(); }
  // The call that owes `o` returned PENDING: its callback must have run by the end.
  void pended(Req* o, NTSTATUS st) {
    if (st == STATUS_PENDING) pended_.push_back(o);
  }

  // B's consumer sees each connect event's connector as one of its connections.
  void adopt_events() {
    for (; adopted_ < events_.connectors.size(); ++adopted_)
      b_conns_.push_back(Conn{events_.connectors[adopted_], nullptr, nullptr});
  }
  Conn* pick(std::vector<Conn>& v, uint8_t arg) {
    if (v.empty()) return nullptr;
    Conn& k = v[arg % v.size()];
    return k.c != nullptr ? &k : nullptr;
  }
  Qp* new_qp(Endpoint& e) { return make_qp(e.pd, e.cq, e.cq, &e, 16); }

  // A frame `from` sent earlier, as `to` receives it: optionally from another address, with up to
  // three of its MAD's bytes changed, resealed (IPv4 checksum, ICRC) so that only the MAD's
  // content decides what the connection manager does with it.
  void inject(Script& s, bool a_to_b) {
    const auto& tap = a_to_b ? tap_a_ : tap_b_;
    const uint8_t pick = s.next();
    const uint8_t how = s.next();
    if (tap.empty()) return;
    // The most recent frame of the kind `pick` names (0x10 + pick % 7: REQ, MRA, REJ, REP, RTU,
    // DREQ, DREP), else the most recent.
    size_t chosen = tap.size() - 1;
    for (size_t j = tap.size(); j-- > 0;) {
      const auto& f = tap[j].bytes;
      if (f.size() >= mad_at_ + wire::kMadLen &&
          wire::load_be16(f.data() + mad_at_ + wire::mad_off::kAttrId) ==
              wire::cm_attr::kReq + pick % 7) {
        chosen = j;
        break;
      }
    }
    std::vector<uint8_t> fr = tap[chosen].bytes;
    if (fr.size() < mad_at_ + wire::kMadLen) return;
    if ((how & 0x83) != 0) disturbed_ = true;
    // The source address's last byte: 198.18.0.x or fd52::x -> another host's.
    if (how & 0x80)
      fr[wire::kEthHdrLen + (ipv6_ ? wire::ipv6_off::kSrc + 15 : wire::ipv4_off::kSrc + 3)] ^= 0x40;
    for (int i = 0; i < (how & 3); ++i) {
      const uint8_t at = s.next();
      fr[mad_at_ + at] = s.next();
    }
    wire::test::reseal(fr);
    cm_receive_frame(*(a_to_b ? b_ : a_).adapter, fr.data(), fr.size());
  }

  void step(Script& s) {
    adopt_events();
    const uint8_t op = s.next();
    const uint8_t arg = s.next();
    drain(x_.cq);
    switch (op % 14) {
      case 0: {  // A connects to B's port, from a port of its own or (odd) its shared endpoint's
        if (a_conns_.size() >= kMaxConns) break;
        Conn k{connector(a_), new_qp(x_), nullptr};
        if (k.c == nullptr || k.qp == nullptr) break;
        if (services_)
          k.port = static_cast<uint16_t>(kPort + (arg >> 1) % 3);  // echo, memory, perftest
        Req* o = once();
        pended(o, arg & 1
                      ? k.c->connect_with_shared_endpoint(k.qp, endpoint_, addr_b(k.port), 4, 4,
                                                          "fz", 2, &Req::cb, o)
                      : k.c->connect(k.qp, addr_a(0), addr_b(k.port), 4, 4, "fz", 2, &Req::cb, o));
        a_conns_.push_back(k);
        break;
      }
      case 1: {  // B accepts
        Conn* k = pick(b_conns_, arg);
        if (k == nullptr || k->qp != nullptr) break;
        k->qp = new_qp(y_);
        k->disconnect_event = once();
        k->established = once();
        pended(k->established, k->c->accept_ex(k->qp, 4, 4, nullptr, 0, &Req::cb,
                                               k->disconnect_event, &Req::cb, k->established));
        break;
      }
      case 2:  // B rejects
        if (Conn* k = pick(b_conns_, arg)) {
          (void)k->c->reject("no", 2);
          disturbed_ = true;
        }
        break;
      case 3: {  // A completes the connection
        Conn* k = pick(a_conns_, arg);
        if (k == nullptr || k->disconnect_event != nullptr) break;
        k->disconnect_event = once();
        k->established = once();
        pended(k->established,
               k->c->complete_connect_ex(&Req::cb, k->disconnect_event, &Req::cb, k->established));
        break;
      }
      case 4:
      case 5: {  // a side disconnects, gracefully or abortively
        Conn* k = pick(arg & 1 ? b_conns_ : a_conns_, arg >> 1);
        if (k == nullptr) break;
        Req* o = once();
        pended(o, k->c->disconnect_ex(op % 14 == 5, &Req::cb, o));
        disturbed_ = true;
        break;
      }
      case 6:  // a side's consumer closes a connector
        if (Conn* k = pick(arg & 1 ? b_conns_ : a_conns_, arg >> 1)) {
          close_conn(*k);
          disturbed_ = true;
        }
        break;
      case 7:
        inject(s, true);
        break;
      case 8:
        inject(s, false);
        break;
      case 9:  // time runs on, up to 2.5 s
        advance(static_cast<uint64_t>(arg % 51) * 50'000'000);
        break;
      case 10:
        pump(arg % 16 + 1);
        break;
      case 11:  // B's listener pauses its connect events or resumes them (odd), closes, or
                // listens again (the services keep theirs)
        if (services_) break;
        if (arg & 1) {
          paused_ = !paused_;
          if (listener_ != nullptr) listener_->control_connect_events(paused_);
        } else if (listener_ != nullptr) {
          close_listener(listener_);  // abandons the Accepts still waiting for their RTU
          disturbed_ = true;
        } else if (create_listener(*b_.adapter, &Events::cb, &events_, nullptr, nullptr,
                                   &listener_) == STATUS_SUCCESS &&
                   listener_->listen(addr_b(kPort), nullptr, nullptr) != STATUS_SUCCESS) {
          close_listener(listener_);  // the port may still be taken: not a failure here
        } else if (listener_ != nullptr) {
          listener_->control_connect_events(paused_);
        }
        break;
      case 12:  // a side's connection manager stops reading frames for a while, or reads again
        (arg & 1 ? silent_b_ : silent_a_) = !(arg & 1 ? silent_b_ : silent_a_);
        disturbed_ = true;
        break;
      case 13:  // A sends on an echo or perftest connection it completed, its receive for the
                // answer posted: on an echo one arg % 256 + 1 bytes, on a perftest one a message
                // of the kind arg >> 4 (perftest_message)
        if (Conn* k = pick(a_conns_, arg); k != nullptr && services_ && k->port != kPort + 1 &&
                                           k->established != nullptr &&
                                           k->established->status == STATUS_SUCCESS) {
          NdkSge r = a_buf_->sge(kEchoBytes, kEchoBytes);
          const bool echo = k->port == kPort;
          const uint32_t len = echo ? arg % kEchoBytes + 1 : perftest_message(arg >> 4);
          disturbed_ |= !echo;  // the perftest service ends a session that breaks its exchange
          NdkSge t = a_buf_->sge(0, len);
          if (k->qp->receive(nullptr, &r, 1) == STATUS_SUCCESS)
            (void)k->qp->send(nullptr, &t, 1, 0);
        }
        break;
    }
  }

  // Writes one of perftest's set-up messages (rocedp/perftest.hpp) of kind `kind` at the start of
  // A's buffer and returns its length: 0 version 6.06, 1 version 5.00 (too old), 2 system data,
  // 3 MTU, 4 the zero message, 5 a key, 6 a report field, 7 .. 15 bytes perftest never sends
  // (lengths no message has, some longer than the service's receive).
  uint32_t perftest_message(uint8_t kind) {
    uint8_t* m = a_buf_->ptr();
    std::memset(m, 0, perf::kKeyStructSize);
    switch (kind) {
      case 0:
      case 1:
        perf::encode_version(m);
        if (kind == 1) std::copy_n("5.00", 4, m);  // the version text, its NUL kept
        return perf::kVersionSize;
      case 2:
        perf::put_be32(m, 4096);
        return 4;
      case 3:
        perf::encode_mtu(1024, m);
        return 2;
      case 4:
        return perf::kKeyStructSize;
      case 5: {
        perf::PerftestKey key;
        key.qpn = 0x1234;
        key.rkey = 0x5678;
        key.vaddr = 0x1000;
        key.set_ipv4(0xC6120002);
        perf::encode_key_struct(key, m);
        return perf::kKeyStructSize;
      }
      case 6:
        perf::put_be64(m, 65536);
        return perf::kReportFieldSize;
      default:
        std::memset(m, 0x5A, kEchoBytes);
        return kind == 7 ? 1 : kind == 8 ? 40 : kind == 9 ? 64 : kind == 10 ? 65 : kind * 9u;
    }
  }

  static void drain(Cq* cq) {
    NdkResultEx r[16];
    while (cq->get_results_ex(r, 16) != 0) {
    }
  }

  void close_conn(Conn& k) {
    Req* o = once();
    pended(o, k.c->close(&Req::plain, o));
    k.c = nullptr;
  }

  // The consumers close everything and time runs on: every pending request completed, no
  // connection left on either side. Then a new connection through the same port must work.
  void finish() {
    // Messages received again unchanged (the network's duplicates, a peer's retries) end no
    // connection: with no consumer ending one, no listener closed, no other MAD and no side deaf
    // for a while, every connection established is still up.
    adopt_events();
    if (!disturbed_) {
      for (auto* v : {&a_conns_, &b_conns_}) {
        for (const Conn& k : *v) {
          if (k.established != nullptr && k.established->status == STATUS_SUCCESS)
            FUZZ_CHECK(k.disconnect_event->count == 0);
        }
      }
    }
    silent_a_ = silent_b_ = false;
    for (auto* v : {&a_conns_, &b_conns_}) {
      for (Conn& k : *v) {
        if (k.c != nullptr) close_conn(k);
      }
    }
    close_listener(listener_);
    FUZZ_CHECK(endpoint_->close(nullptr, nullptr) == STATUS_SUCCESS);
    pump(8);
    advance(30'000'000'000ull, 500'000'000);
    pump(8);
    FUZZ_CHECK(events_.connectors.size() == adopted_);  // no connect event after the close
    for (const Req* o : pended_) FUZZ_CHECK(o->count == 1);
    FUZZ_CHECK(connection_manager_counters(*a_.adapter).connections == 0);
    FUZZ_CHECK(connection_manager_counters(*b_.adapter).connections == 0);
    if (services_) {
      FUZZ_CHECK(svc_->open_connections() == 0 && svc_->open_sessions() == 0);
      echo_then_stop();
      return;
    }

    Endpoint x, y;
    make_endpoints(x, y);
    auto xb = buffer(x.pd, 64, kMrAll, 0xA5);
    auto yb = buffer(y.pd, 64, kMrAll, 0x00);
    Link k;
    establish(k, x, y, kPort);
    FUZZ_CHECK(!HasFailure());
    NdkSge rs = yb->sge(0, 64);
    FUZZ_CHECK(y.qp->receive(&y, &rs, 1) == STATUS_SUCCESS);
    NdkSge ss = xb->sge(0, 13);
    FUZZ_CHECK(x.qp->send(&x, &ss, 1, 0) == STATUS_SUCCESS);
    const auto got = wait_results(y.cq, 1);
    FUZZ_CHECK(got.size() == 1 && got[0].status == STATUS_SUCCESS &&
               got[0].bytes_transferred == 13 && yb->ptr()[12] == 0xA5);
    (void)wait_results(x.cq, 1);
    release(k);
    std::vector<std::unique_ptr<Buffer>> bx, by;
    bx.push_back(std::move(xb));
    by.push_back(std::move(yb));
    close_endpoint(x, &bx);
    close_endpoint(y, &by);
  }

  // Services mode: a new client of the echo service gets its SEND back byte for byte; then the
  // services stop and hold nothing.
  void echo_then_stop() {
    Conn k{connector(a_), new_qp(x_), once(), once()};
    a_conns_.push_back(k);
    Req connected;
    FUZZ_CHECK(k.c->connect(k.qp, addr_a(0), addr_b(kPort), 4, 4, nullptr, 0, &Req::cb,
                            &connected) == STATUS_PENDING);
    FUZZ_CHECK(pump_until([&] { return connected.count != 0; }));
    FUZZ_CHECK(connected.status == STATUS_SUCCESS);
    FUZZ_CHECK(k.c->complete_connect_ex(&Req::cb, k.disconnect_event, &Req::cb, k.established) ==
               STATUS_PENDING);
    FUZZ_CHECK(pump_until([&] { return k.established->count != 0; }));
    FUZZ_CHECK(k.established->status == STATUS_SUCCESS);
    drain(x_.cq);
    for (uint32_t i = 0; i < kEchoBytes; ++i) {
      a_buf_->data[i] = static_cast<uint8_t>(i * 3 + 1);
      a_buf_->data[kEchoBytes + i] = 0;
    }
    NdkSge r = a_buf_->sge(kEchoBytes, kEchoBytes);
    NdkSge t = a_buf_->sge(0, 100);
    FUZZ_CHECK(k.qp->receive(nullptr, &r, 1) == STATUS_SUCCESS);
    FUZZ_CHECK(k.qp->send(nullptr, &t, 1, 0) == STATUS_SUCCESS);
    uint32_t echoed = 0;
    FUZZ_CHECK(pump_until([&] {
      NdkResultEx res[4];
      for (uint32_t n; (n = x_.cq->get_results_ex(res, 4)) != 0;) {
        for (uint32_t i = 0; i < n; ++i) {
          FUZZ_CHECK(res[i].status == STATUS_SUCCESS);
          if (res[i].type == NdkOperationType::kReceive) echoed = res[i].bytes_transferred;
        }
      }
      return echoed != 0;
    }));
    FUZZ_CHECK(echoed == 100 &&
               std::memcmp(a_buf_->ptr() + kEchoBytes, a_buf_->ptr(), echoed) == 0);
    svc_->stop();
    FUZZ_CHECK(pump_until([&] { return svc_->stopped(); }));
    FUZZ_CHECK(svc_->open_connections() == 0);
    FUZZ_CHECK(pump_until([&] { return k.disconnect_event->count != 0; }));  // the service's DREQ
    close_conn(a_conns_.back());
    pump(8);
    svc_.reset();
  }

  // Every QP, CQ and PD, then the adapters (TearDown checks that the adapters close).
  void close_all() {
    for (auto* v : {&a_conns_, &b_conns_}) {
      for (Conn& k : *v) {
        if (k.qp != nullptr) close_qp(k.qp);
      }
    }
    std::vector<std::unique_ptr<Buffer>> bufs;
    bufs.push_back(std::move(a_buf_));
    close_endpoint(x_, &bufs);
    close_endpoint(y_);
    TearDown();
    FUZZ_CHECK(!HasFailure());
  }

 private:
  Endpoint x_, y_;  // their PD and CQ serve every connection's QP
  const bool ipv6_;
  const size_t mad_at_;  // where a CM frame's MAD starts
  const bool services_;  // B is rocedpd's echo and memory services
  std::unique_ptr<control::Services> svc_;
  std::unique_ptr<Buffer> a_buf_;  // A's sends and echoes (services mode)
  Listener* listener_ = nullptr;
  SharedEndpoint* endpoint_ = nullptr;
  bool paused_ = false;  // B's consumer paused its listener's connect events
  Events events_;
  size_t adopted_ = 0;
  std::vector<Conn> a_conns_, b_conns_;
  // A consumer ended a connection, the listener closed, a side went deaf or a MAD was altered.
  bool disturbed_ = false;
  std::deque<Req> calls_;  // stable addresses: callbacks hold them
  std::vector<const Req*> pended_;
};

constexpr uint32_t kMbufs = 4095;

void start_eal() {
  static EalSession* eal = [] {
    auto* s = new EalSession({.tag = "fuzz-cm-agent", .memory_mb = 256, .mbufs = kMbufs});
    s->SetUp();
    FUZZ_CHECK(!::testing::Test::HasFailure());
    std::atexit([] { eal->TearDown(); });
    return s;
  }();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  start_eal();
  {
    // The first byte: bit 0 makes the ports' CM speak IPv6 (fd52::1, fd52::2); bit 1 puts
    // rocedpd's echo and memory services on B in place of its consumer.
    World w(size > 0 && (data[0] & 1) != 0, size > 0 && (data[0] & 2) != 0);
    FUZZ_CHECK(w.open());
    Script s{data + (size > 0 ? 1 : 0), size > 0 ? size - 1 : 0};
    for (int steps = 0; s.more() && steps < 64; ++steps) {
      w.step(s);
      FUZZ_CHECK(!::testing::Test::HasFailure());  // e.g. a callback that ran twice
    }
    w.finish();
    w.close_all();
  }
  FUZZ_CHECK(session_pool()->available() == kMbufs);  // every mbuf back
  return 0;
}
