// Connections established and torn down per second on one control thread (issue 4 §6).
//
// Two adapters ("A" connects, "B" listens) in one process over a pmd ring pair, each with two
// polling cores; the benchmark thread plays every role: it polls the four cores, both connection
// managers and both adapters' control completions explicitly (tests/seeds/cm_env.hpp's pump), so
// one CPU carries the control-thread work of BOTH ends plus the cores' QP moves and frame I/O.
//
// One connection = the whole NDK exchange over IB CM MADs on the ring pair:
//   A Connect (REQ) -> B ConnectEvent -> B Accept (QP RTR/RTS on its core, REP) -> A Connect
//   completes -> A CompleteConnect (QP RTR/RTS, RTU) -> B Accept completes -> A Disconnect
//   (DREQ, QP flushed) -> B DisconnectEvent, B Disconnect (inline, peer already gone) -> A
//   Disconnect completes (DREP) -> both connectors closed.
// QPs are created AHEAD of time (outside the timed region) and closed afterwards: an NDK QP is
// not reusable after Disconnect, so each connection takes a fresh pair from a batch prepared with
// the timer paused. BM_CmConnect/<window>: `window` connections in flight at once (1: strictly
// one after the other; a server sees many at once). items_per_second = connections per second.
//
// TimeWait: the CM keeps every 4-tuple and QPN in TimeWait after a connection. With the default
// 1 s, 16,384 ephemeral ports to one listener cap any client at 16,384 connections per second, so
// the benchmark runs with a 10 ms TimeWait: the machinery runs for every connection, the port
// space is not what is measured.
//
// Counters: kconn_per_s, frames_per_conn (CM MADs both ways per connection), rounds_per_conn
// (pump rounds in the timed region per connection).

#include <benchmark/benchmark.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "control/adapter_setup.hpp"
#include "control/connection_manager_setup.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/polling_core.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/ring_pair.hpp"
#include "pmd/rx_dispatch.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"

namespace {

using namespace rocedp;

constexpr uint16_t kCores = 2;
constexpr uint16_t kPort = 7000;

struct Host {
  pmd::Port* port = nullptr;
  std::unique_ptr<pmd::RxDispatch> dispatch;
  std::vector<std::unique_ptr<dataplane::CoreChannel>> channels;
  std::vector<std::unique_ptr<dataplane::PollingCore>> cores;
  Adapter* adapter = nullptr;
  uint32_t ip = 0;
  Pd* pd = nullptr;
  Cq* cq[kCores] = {};
};

/// One EAL, one ring pair, two adapters with connection managers; built once per process.
class World {
 public:
  static World& get() {
    static World w;
    return w;
  }
  bool ok() const { return ok_; }

  void pump() {
    ++rounds_;
    for (Host* h : {&a_, &b_})
      for (auto& c : h->cores) c->poll_once();
    for (Host* h : {&a_, &b_}) {
      if (h->adapter == nullptr) continue;  // during set-up
      poll_connections(*h->adapter);
      h->adapter->poll_control();
    }
  }
  template <typename Pred>
  bool pump_until(Pred pred, uint64_t max_rounds = 10'000'000) {
    for (uint64_t i = 0; i < max_rounds; ++i) {
      if (pred()) return true;
      pump();
    }
    return pred();
  }

  Host a_, b_;
  uint64_t rounds_ = 0;

  /// `n` QPs on `h`, spread over its cores (each on the CQ of its core).
  bool make_qps(Host& h, size_t n, std::vector<Qp*>* out) {
    size_t done = 0;
    bool failed = false;
    struct Slot {
      Qp** dst;
      size_t* done;
      bool* failed;
    };
    out->assign(n, nullptr);
    std::vector<Slot> slots(n);
    for (size_t i = 0; i < n; ++i) {
      slots[i] = Slot{&(*out)[i], &done, &failed};
      Cq* cq = h.cq[i % kCores];
      Qp* ignored = nullptr;
      const NTSTATUS st = h.pd->create_qp(
          cq, cq, nullptr, 4, 4, 1, 1, 0,
          [](void* c, NTSTATUS s, NdkObjectHeader* o) {
            auto* x = static_cast<Slot*>(c);
            ++*x->done;
            *x->dst = ndk_object_cast<Qp>(o);
            if (s != STATUS_SUCCESS) *x->failed = true;
          },
          &slots[i], &ignored);
      if (st != STATUS_PENDING) return false;
    }
    return pump_until([&] { return done == n; }) && !failed;
  }
  bool close_qps(std::vector<Qp*>& qps) {
    size_t closed = 0;
    for (Qp* qp : qps) {
      if (qp->close([](void* c) { ++*static_cast<size_t*>(c); }, &closed) != STATUS_PENDING)
        return false;
    }
    const bool ok = pump_until([&] { return closed == qps.size(); });
    qps.clear();
    return ok;
  }

 private:
  World() { ok_ = init(); }

  bool init() {
    config::Config cfg;
    cfg.eal.lcores = {0};
    cfg.eal.main_lcore = 0;
    cfg.eal.memory_mb = 512;
    cfg.eal.hugepages = false;
    cfg.eal.file_prefix = "rdp-bench-cm-" + std::to_string(getpid());
    cfg.eal.extra_args = {"--no-telemetry", "--no-pci"};
    pmd::log_configure(pmd::LogLevel::kError, "");
    std::string error;
    if (!pmd::eal_init(cfg, "bench_cm", &error)) {
      std::fprintf(stderr, "eal: %s\n", error.c_str());
      return false;
    }
    // EAL leaves its runtime folder (/var/run/dpdk/PREFIX) behind; this process made it. The
    // path lives in a function-local static of its own: the handler runs after World is gone.
    runtime_dir_ = rte_eal_get_runtime_dir();
    static std::string dir;
    dir = runtime_dir_;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
    pool_ = pmd::PacketPool::create(
        "bench_cm_pool", 16383, 0, pmd::PacketPool::data_room_for_mtu(1500), SOCKET_ID_ANY, &error);
    if (!pool_) return false;
    a_.ip = 0xC6120001;
    b_.ip = 0xC6120002;
    auto port_cfg = [](const char* name, uint8_t last, uint32_t ip) {
      config::PortConfig p;
      p.name = name;
      p.mac = config::MacAddress{{0x02, 0, 0, 0, last, 0x01}};
      p.address.value = ip;
      p.prefix_len = 24;
      return p;
    };
    config::DataplaneConfig dp;
    if (!pmd::open_ring_pair("benchcm", port_cfg("a", 0x0A, a_.ip), port_cfg("b", 0x0B, b_.ip),
                             kCores, *pool_, dp, &pair_, &error))
      return false;
    a_.port = pair_.a.get();
    b_.port = pair_.b.get();
    for (Host* h : {&a_, &b_}) {
      if (!h->port->start(&error)) return false;
      h->dispatch = std::make_unique<pmd::RxDispatch>(kCores, 1024);
      AdapterSetup setup;
      setup.limits.max_cq_depth = 1u << 16;
      setup.port = h->port;
      setup.pool = pool_.get();
      for (uint16_t i = 0; i < kCores; ++i) {
        h->channels.push_back(dataplane::CoreChannel::create(i, 1024, &error));
        if (!h->channels.back()) return false;
        h->cores.push_back(std::make_unique<dataplane::PollingCore>(
            i, rte_lcore_id(), 32, *h->dispatch, *h->channels.back()));
        if (!dataplane::core_requests::attach_port(*h->channels[i], h->port, i, nullptr, nullptr))
          return false;
        h->cores[i]->poll_once();
        h->channels[i]->poll_completions(8);
        setup.cores.push_back(h->cores[i].get());
        setup.channels.push_back(h->channels[i].get());
      }
      if (open_adapter_on(setup, &h->adapter) != STATUS_SUCCESS) return false;
      ConnectionManagerSetup cm;
      cm.dispatch = h->dispatch.get();
      cm.tx_core = 0;
      cm.timewait_ns = 10'000'000;  // see the file comment
      cm.neighbours.push_back(
          {config::Ipv4Address{h == &a_ ? b_.ip : a_.ip},
           config::MacAddress{
               {0x02, 0, 0, 0, static_cast<uint8_t>(h == &a_ ? 0x0B : 0x0A), 0x01}}});
      if (attach_connection_manager(*h->adapter, cm) != STATUS_SUCCESS) return false;
      if (h->adapter->create_pd(nullptr, nullptr, &h->pd) != STATUS_SUCCESS) return false;
      for (uint32_t c = 0; c < kCores; ++c) {
        bool done = false;
        if (h->adapter->create_cq(
                4096, nullptr, nullptr, c,
                [](void* x, NTSTATUS, NdkObjectHeader* o) {
                  auto* p = static_cast<std::pair<bool*, Cq**>*>(x);
                  *p->first = true;
                  *p->second = ndk_object_cast<Cq>(o);
                },
                new std::pair<bool*, Cq**>(&done, &h->cq[c]), &h->cq[c]) != STATUS_PENDING)
          return false;
        if (!pump_until([&] { return done; }) || h->cq[c] == nullptr) return false;
      }
    }
    return true;
  }

  bool ok_ = false;
  std::string runtime_dir_;
  std::unique_ptr<pmd::PacketPool> pool_;
  pmd::RingPair pair_;
};

/// One connection's NDK objects and progress.
struct Conn {
  Connector* ca = nullptr;
  Connector* cb = nullptr;
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  int stage = 0;  // 0 connecting, 1 accepted, 2 completing, 3 established, 4 disconnecting, 5 done
  bool connected = false, completed = false, accepted = false, disc_done = false, peer_disc = false;
  NTSTATUS status = STATUS_SUCCESS;
};

struct Accepts {
  std::vector<Connector*> pending;
  static void event(void* c, NdkConnector* k) {
    static_cast<Accepts*>(c)->pending.push_back(Connector::from(k));
  }
};

void BM_CmConnect(benchmark::State& state) {
  World& w = World::get();
  if (!w.ok()) {
    state.SkipWithError("EAL / adapters could not be set up (root needed?)");
    return;
  }
  const size_t window = static_cast<size_t>(state.range(0));
  constexpr size_t kBatch = 256;  // connections per timed batch (QPs prepared for them)
  Accepts accepts;
  Listener* listener = nullptr;
  if (create_listener(*w.b_.adapter, &Accepts::event, &accepts, nullptr, nullptr, &listener) !=
          STATUS_SUCCESS ||
      listener->listen(NdkSockAddr{0, kPort}, nullptr, nullptr) != STATUS_SUCCESS) {
    state.SkipWithError("listen failed");
    return;
  }
  const ConnectionManagerCounters before_a = connection_manager_counters(*w.a_.adapter);
  const ConnectionManagerCounters before_b = connection_manager_counters(*w.b_.adapter);
  uint64_t timed_rounds = 0;
  uint64_t connections = 0;
  std::vector<Qp*> qa, qb;
  std::vector<Conn> conns(kBatch);
  bool failed = false;

  for (auto _ : state) {
    state.PauseTiming();
    if (!w.make_qps(w.a_, kBatch, &qa) || !w.make_qps(w.b_, kBatch, &qb)) {
      state.SkipWithError("QP creation failed");
      failed = true;
      break;
    }
    for (size_t i = 0; i < kBatch; ++i) conns[i] = Conn{nullptr, nullptr, qa[i], qb[i]};
    state.ResumeTiming();
    const uint64_t rounds_start = w.rounds_;

    size_t next = 0, live = 0, finished = 0;
    std::vector<Conn*> awaiting_accept;
    while (finished < kBatch && !failed) {
      while (live < window && next < kBatch) {
        Conn& c = conns[next++];
        NTSTATUS st = create_connector(*w.a_.adapter, nullptr, nullptr, &c.ca);
        if (st != STATUS_SUCCESS ||
            (st = c.ca->connect(
                 c.qa, NdkSockAddr{w.a_.ip, 0}, NdkSockAddr{w.b_.ip, kPort}, 1, 1, nullptr, 0,
                 [](void* x, NTSTATUS s) {
                   auto* k = static_cast<Conn*>(x);
                   k->connected = true;
                   k->status = s;
                 },
                 &c)) != STATUS_PENDING) {
          std::fprintf(stderr, "create_connector/connect: %s\n",
                       std::string(status_name(st)).c_str());
          failed = true;
          break;
        }
        awaiting_accept.push_back(&c);
        ++live;
      }
      w.pump();
      // B: accept every request that arrived.
      for (Connector* k : accepts.pending) {
        // Which of ours is it: the peer's port is our connector's ephemeral port.
        NdkSockAddr peer{}, local{};
        uint32_t size = sizeof(NdkSockAddr);
        k->get_peer_address(&peer, &size);
        auto it = std::find_if(awaiting_accept.begin(), awaiting_accept.end(), [&](Conn* x) {
          uint32_t sz = sizeof(NdkSockAddr);
          return x->ca->get_local_address(&local, &sz) == STATUS_SUCCESS && local.port == peer.port;
        });
        if (it == awaiting_accept.end()) {
          failed = true;
          break;
        }
        Conn* c = *it;
        awaiting_accept.erase(it);
        c->cb = k;
        if (k->accept_ex(
                c->qb, 1, 1, nullptr, 0,
                [](void* x, NTSTATUS) { static_cast<Conn*>(x)->peer_disc = true; }, c,
                [](void* x, NTSTATUS s) {
                  auto* q = static_cast<Conn*>(x);
                  q->accepted = true;
                  if (s != STATUS_SUCCESS) q->status = s;
                },
                c) != STATUS_PENDING)
          failed = true;
      }
      accepts.pending.clear();
      // A: complete, then disconnect; both: close when done.
      for (size_t i = 0; i < next; ++i) {
        Conn& c = conns[i];
        if (c.stage == 5) continue;
        if (c.status != STATUS_SUCCESS) {
          failed = true;
          break;
        }
        if (c.stage == 0 && c.connected) {
          c.stage = 2;
          if (c.ca->complete_connect_ex(
                  nullptr, nullptr,
                  [](void* x, NTSTATUS s) {
                    auto* q = static_cast<Conn*>(x);
                    q->completed = true;
                    if (s != STATUS_SUCCESS) q->status = s;
                  },
                  &c) != STATUS_PENDING)
            failed = true;
        }
        if (c.stage == 2 && c.completed && c.accepted) {
          c.stage = 4;
          if (c.ca->disconnect(
                  [](void* x, NTSTATUS s) {
                    auto* q = static_cast<Conn*>(x);
                    q->disc_done = true;
                    if (s != STATUS_SUCCESS) q->status = s;
                  },
                  &c) != STATUS_PENDING)
            failed = true;
        }
        if (c.stage == 4 && c.disc_done && c.peer_disc) {
          // B disconnects too: inline SUCCESS, the peer already did.
          if (c.cb->disconnect([](void*, NTSTATUS) {}, nullptr) != STATUS_SUCCESS) failed = true;
          c.ca->close(nullptr, nullptr);
          c.cb->close(nullptr, nullptr);
          c.stage = 5;
          ++finished;
          --live;
          ++connections;
        }
      }
    }
    if (failed) {
      for (size_t i = 0; i < next; ++i)
        if (conns[i].status != STATUS_SUCCESS)
          std::fprintf(stderr, "connection %zu: stage %d status %s\n", i, conns[i].stage,
                       std::string(status_name(conns[i].status)).c_str());
      const auto ca = connection_manager_counters(*w.a_.adapter),
                 cb = connection_manager_counters(*w.b_.adapter);
      std::fprintf(stderr,
                   "failed at %zu of %zu (live %zu); A tx %lu rx %lu drop %lu; B tx %lu rx %lu "
                   "drop %lu nolistener %lu stale %lu\n",
                   finished, kBatch, live, ca.cm_tx, ca.cm_rx, ca.cm_rx_dropped, cb.cm_tx, cb.cm_rx,
                   cb.cm_rx_dropped, cb.rej_sent_no_listener, cb.stale_rejected);
      state.SkipWithError("a connection failed");
      break;
    }

    timed_rounds += w.rounds_ - rounds_start;
    state.PauseTiming();
    if (!w.close_qps(qa) || !w.close_qps(qb)) {
      state.SkipWithError("QP close failed");
      failed = true;
      break;
    }
    // The next batch's QPs get the same QPNs (the engine reuses the lowest free numbers at
    // once): wait out TimeWait so the peer does not reject them as stale (IBTA 12.9.8.3.1).
    w.pump_until([&] {
      return connection_manager_counters(*w.a_.adapter).connections == 0 &&
             connection_manager_counters(*w.b_.adapter).connections == 0;
    });
    state.ResumeTiming();
  }
  listener->close(nullptr, nullptr);
  // Let TimeWait entries expire before the next run (they hold no consumer object).
  if (!failed) {
    const ConnectionManagerCounters a = connection_manager_counters(*w.a_.adapter);
    const ConnectionManagerCounters b = connection_manager_counters(*w.b_.adapter);
    const double n = static_cast<double>(connections);
    state.counters["frames_per_conn"] =
        n > 0 ? static_cast<double>(a.cm_tx - before_a.cm_tx + b.cm_tx - before_b.cm_tx) / n : 0;
    state.counters["rounds_per_conn"] = n > 0 ? static_cast<double>(timed_rounds) / n : 0;
  }
  state.SetItemsProcessed(static_cast<int64_t>(connections));
  // The same rate in thousands per second, for the report table.
  state.counters["kconn_per_s"] =
      benchmark::Counter(static_cast<double>(connections) / 1000.0, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CmConnect)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
