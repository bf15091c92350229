// What the client needs to know about the target comes in the Accept private data:
//   * rocedpd's memory service: MemoryServiceInfo ("RMEM": region address, length, token,
//     rocedp/memory_service.hpp), the target of write|read; nobody writes back, so WRITE latency
//     is the completion time of one WRITE (a full round trip, reported whole);
//   * rocedpd's echo service: no private data; every SEND comes back as a SEND of the same bytes
//     (bw keeps receives posted for the echoes; lat is a ping-pong);
//   * a rocedp-perf --listen: the same 32-byte layout with magic "RDPF" and flags saying whether
//     it sinks SENDs (bw), echoes them (lat) or writes back (WRITE latency ping-pong).
// The client's REQ private data (CmHello) tells a --listen peer the test; rocedpd's services
// ignore it. The client learns everything from its own completions: an RC SEND, WRITE or READ
// completes successfully only after the peer acknowledged it (IBTA 9.7.5.1.1).

#include "apps/perf/cm_mode.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/loops.hpp"
#include "apps/perf/oob.hpp"
#include "apps/perf/perf_util.hpp"
#include "apps/perf/report.hpp"
#include "apps/perf/verify.hpp"
#include "apps/perf/watchdog.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"
#include "rocedp/memory_service.hpp"

namespace rocedp::perf {
namespace {

constexpr uint16_t kPerfEchoes = 4, kPerfWritesBack = 8;  // --listen's flags beyond the service's
constexpr uint8_t kPerfMagic[4] = {'R', 'D', 'P', 'F'};
constexpr uint32_t kMaxCmConnections = 1024;
constexpr uint64_t kEchoMaxSize = 4096;  // rocedpd's echo service default message_bytes (-a)

bool past_deadline() {
  return clock::deadline().passed();
}
int failed() {
  return clock::deadline().timed_out() ? 3 : 1;
}

// REQ private data of --connect: 52 of the 56 bytes an rdma_cm REQ carries (MaxCallerData). Host
// byte order: only another rocedp-perf on this machine reads it.
struct __attribute__((packed)) CmHello {
  uint32_t magic = kMagic;
  uint8_t version = 1, op = 0, kind = 0, flags = 0;  // flags bit 0: --verify
  uint32_t qps = 1, tx_depth = 0, duration_s = 0, index = 0;
  uint64_t size = 0, iters = 0;
  uint64_t addr = 0;  // the client's buffer (the listener writes back into it: WRITE latency)
  uint32_t rkey = 0;
};
static_assert(sizeof(CmHello) == 52, "CmHello must fit the 56-byte REQ private data");

struct TargetInfo {
  enum class Kind { kEchoService, kMemoryService, kPerf } kind = Kind::kEchoService;
  uint16_t flags = 0;
  uint64_t address = 0, length = 0;
  uint32_t token = 0;
  const char* name() const {
    return kind == Kind::kMemoryService ? "rocedpd memory service"
           : kind == Kind::kEchoService ? "rocedpd echo service"
                                        : "rocedp-perf --listen";
  }
};

// The Accept private data: MemoryServiceInfo, or the same layout with magic "RDPF".
TargetInfo decode_target(const std::vector<uint8_t>& pd) {
  TargetInfo t;
  MemoryServiceInfo m;
  if (pd.size() >= m.kWireSize && std::memcmp(pd.data(), kPerfMagic, 4) == 0) {
    std::vector<uint8_t> copy(pd.begin(), pd.begin() + m.kWireSize);
    for (int k = 0; k < 4; ++k)
      copy[k] = static_cast<uint8_t>(MemoryServiceInfo::kMagic >> (24 - 8 * k));
    if (MemoryServiceInfo::decode(copy.data(), copy.size(), &m)) t.kind = TargetInfo::Kind::kPerf;
  } else if (MemoryServiceInfo::decode(pd.data(), pd.size(), &m)) {
    t.kind = TargetInfo::Kind::kMemoryService;
  }
  if (t.kind != TargetInfo::Kind::kEchoService) {
    t.flags = m.flags;
    t.address = m.address;
    t.length = m.length;
    t.token = m.token;
  }
  return t;
}

void encode_perf_accept(const TargetInfo& t, uint8_t out[MemoryServiceInfo::kWireSize]) {
  MemoryServiceInfo m;
  m.flags = t.flags;
  m.address = t.address;
  m.length = t.length;
  m.token = t.token;
  m.encode(out);
  std::memcpy(out, kPerfMagic, 4);
}

// One CM connection's state, shared with the control thread's callbacks.
struct CmLink {
  Connector* conn = nullptr;
  std::atomic<int> disconnected{0};  // the peer disconnected (or died)
  std::atomic<NTSTATUS> reason{STATUS_SUCCESS};
  std::atomic<int>* gone = nullptr;   // client: the run's count of links the peer ended (Run)
  std::vector<uint8_t> private_data;  // the peer's (REQ or REP)
  CmHello hello;                      // listener: this connection's REQ
};
using Links = std::vector<std::unique_ptr<CmLink>>;

void on_cm_disconnect(void* ctx, NTSTATUS reason) {
  auto* l = static_cast<CmLink*>(ctx);
  l->reason.store(reason);
  l->disconnected.store(1, std::memory_order_release);
  if (l->gone != nullptr) l->gone->fetch_add(1, std::memory_order_release);
}

bool all_disconnected(const Links& links) {
  for (const auto& l : links)
    if (l->disconnected.load(std::memory_order_acquire) == 0) return false;
  return true;
}

// Control thread: the peer's private data of `conn` (REQ on the listener, REP on the client).
std::vector<uint8_t> connection_data(Connector* conn) {
  uint32_t len = 0;
  conn->get_connection_data(nullptr, nullptr, nullptr, &len);
  std::vector<uint8_t> out(len);
  if (len != 0 && conn->get_connection_data(nullptr, nullptr, out.data(), &len) != STATUS_SUCCESS)
    out.clear();
  return out;
}

// Disconnects (DREQ) every link still connected, waits for the DREPs (bounded), closes the
// connectors. Returns false if a disconnect failed.
bool disconnect_all(AdapterRuntime& rt, Links& links) {
  watchdog::phase("disconnecting");
  std::vector<Connector*> conns;
  std::vector<bool> asked;
  std::vector<size_t> index;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i]->conn == nullptr) continue;
    conns.push_back(links[i]->conn);
    asked.push_back(links[i]->disconnected.load() == 0);
    index.push_back(i);
  }
  const std::vector<NTSTATUS> st = disconnect_and_close(rt, conns, asked);
  bool ok = true;
  for (size_t k = 0; k < conns.size(); ++k) {
    links[index[k]]->conn = nullptr;
    if (st[k] != STATUS_SUCCESS &&
        st[k] != STATUS_CONNECTION_INVALID) {  // INVALID: never connected
      std::fprintf(stderr, "rocedp-perf: disconnect %zu: %s\n", index[k],
                   std::string(status_name(st[k])).c_str());
      ok = false;
    }
  }
  return ok;
}

std::vector<uint64_t> cm_size_list(const Options& o) {
  if (!o.all_sizes) return {o.size};
  const uint64_t max = o.test.op == Op::kSend ? kEchoMaxSize : (1ull << 20);
  std::vector<uint64_t> out;
  for (uint64_t s = 2; s <= max; s *= 2) out.push_back(s);
  return out;
}

// Connects QP i through links[i] (REQ with `hello`, index i). A REFUSED connection is tried
// again, a few times over ~2 s: a target that still holds our previous run's connection in
// TimeWait answers a REQ from the same QPN with a stale-connection REJ (IBTA 12.9.8.3.1), and
// this process's QPNs are the same on every run.
bool connect_links(AdapterRuntime& rt, Endpoint& ep, Links& links, const CmHello& hello,
                   const NdkSockAddr& dst, uint32_t limit, std::string* err) {
  constexpr int kAttempts = 5;
  std::vector<size_t> todo(links.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<Pending[]> pend(new Pending[links.size()]);
    std::vector<NTSTATUS> inline_status(links.size(), STATUS_PENDING);
    for (size_t base = 0; base < todo.size(); base += kBatch) {
      const size_t end = std::min(todo.size(), base + kBatch);
      rt.run_on_control([&] {
        for (size_t k = base; k < end; ++k) {
          const size_t i = todo[k];
          NTSTATUS st = create_connector(rt.adapter(), nullptr, nullptr, &links[i]->conn);
          if (st == STATUS_SUCCESS) {
            CmHello h = hello;
            h.index = static_cast<uint32_t>(i);
            st = links[i]->conn->connect(ep.qps[i], NdkSockAddr{0, 0}, dst, limit, limit, &h,
                                         sizeof(h), &on_request, &pend[i]);
          }
          inline_status[i] = st;
        }
      });
      // Up to kEstablishWait for the answers, and not past the run's time limit.
      rt.wait_until(
          [&] {
            if (past_deadline()) return true;
            for (size_t k = base; k < end; ++k)
              if (inline_status[todo[k]] == STATUS_PENDING &&
                  pend[todo[k]].done.load(std::memory_order_acquire) == 0)
                return false;
            return true;
          },
          kEstablishWait);
    }
    std::vector<size_t> refused;
    for (size_t i : todo) {
      const NTSTATUS st = inline_status[i] != STATUS_PENDING ? inline_status[i]
                          : pend[i].done.load()              ? pend[i].status.load()
                                                             : STATUS_IO_TIMEOUT;
      if (st == STATUS_SUCCESS) continue;
      if (st == STATUS_CONNECTION_REFUSED && attempt < kAttempts) {
        refused.push_back(i);
        continue;
      }
      *err = "connect " + std::to_string(i) + ": " + std::string(status_name(st));
      if (st == STATUS_CONNECTION_REFUSED)
        *err += " (" + std::to_string(kAttempts) + " attempts in 2 s)";
      // Connects still pending (no answer in time) complete CANCELLED once their connectors
      // close: `pend` must outlive those completions.
      for (size_t k : todo) {
        pend[k].owed = inline_status[k] == STATUS_PENDING;
        if (pend[k].owed && pend[k].done.load() == 0) {
          close_connector_settled(rt, links[k]->conn, {&pend[k]});
          links[k]->conn = nullptr;
        }
      }
      return false;
    }
    if (refused.empty()) return true;
    rt.run_on_control([&] {
      for (size_t i : refused) links[i]->conn->close(nullptr, nullptr), links[i]->conn = nullptr;
    });
    rt.wait_until([] { return false; }, std::chrono::milliseconds(400));
    todo = refused;
  }
}

// --verify around the timed run of one size against a region. Before: WRITE and SEND fill their
// message slots; READ first stores the pattern in the target's region (WRITE from the upper
// half), then reads it back into the lower half. After: WRITE reads the region back into the
// upper half and checks every slot (passive WRITE latency: the region holds the last message);
// READ checks what arrived.
struct RegionCheck {
  Run& run;
  const Options& o;
  uint64_t half, size, iters, used;
  Slots slots() const { return Slots{o.test.verify, iters, size}; }
  uint32_t qps() const { return o.test.bw() ? o.test.qps : 1; }
  uint64_t per_qp() const { return o.test.bw() ? iters : 1; }
  uint8_t* buf() const { return run.ep.buf.data(); }

  bool before(std::string* err) const {
    const Slots s = slots();
    const Op op = o.test.op;
    if (op == Op::kSend) {
      // A sink (--listen) checks message i of QP q against slot q x iters + i.
      for (uint32_t q = 0; q < o.test.qps; ++q)
        for (uint64_t i = 0; i < iters; ++i) fill_slot(buf() + s.offset(q, i), s.slot(q, i), size);
      return true;
    }
    for (uint32_t q = 0; q < qps(); ++q)
      for (uint64_t i = 0; i < per_qp(); ++i)
        fill_slot(buf() + (op == Op::kRead ? half : 0) + s.offset(q, i), s.slot(q, i), size);
    if (op != Op::kRead) return true;
    if (!transfer(run, Op::kWrite, half, 0, used, err)) return false;
    std::memset(buf(), 0, used);
    return true;
  }

  bool after(std::string* err) const {
    const Slots s = slots();
    const bool bw = o.test.bw();
    uint64_t bad = 0;
    if (o.test.op == Op::kWrite && (bw || run.passive)) {
      if (!transfer(run, Op::kRead, half, 0, used, err)) return false;
      for (uint32_t q = 0; q < qps(); ++q)
        for (uint64_t i = 0; i < per_qp(); ++i)
          bad += bw ? check_slot(buf() + half + s.offset(q, i), s.slot(q, i), size)
                    : static_cast<uint64_t>(std::memcmp(buf() + half, buf(), size) != 0);
    } else if (o.test.op == Op::kRead && bw) {
      for (uint32_t q = 0; q < o.test.qps; ++q)
        for (uint64_t i = 0; i < iters; ++i)
          bad += check_slot(buf() + s.offset(q, i), s.slot(q, i), size);
    }
    if (bad == 0) return true;
    *err = "verify: " + std::to_string(bad) + " bytes differ in the target's region";
    return false;
  }
};

// --connect: the client. Returns the exit status.
int run_client(AdapterRuntime& rt, const Options& o) {
  std::string err;
  const Test& t = o.test;
  const auto sizes = cm_size_list(o);
  const uint64_t max_size = sizes.back();
  const bool bw = t.bw();
  const uint32_t nq = t.qps;
  if (nq > kMaxCmConnections)
    return std::fprintf(stderr, "rocedp-perf: at most %u connections\n", kMaxCmConnections), 2;
  // Our buffer: message slots in the lower half, the other direction (echoes, read-back) in the
  // upper half.
  const uint32_t depth = std::min(t.tx_depth, rt.config().limits.max_qp_depth);
  uint64_t half = max_size;
  if (bw && t.verify) half = static_cast<uint64_t>(nq) * t.iters * max_size;  // slot per message
  if (bw && t.op == Op::kSend)
    half = std::max<uint64_t>(half, static_cast<uint64_t>(nq) * depth * max_size);
  if (half > (1ull << 29))
    return std::fprintf(stderr, "rocedp-perf: qps x depth (or iters) x size above 512 MiB\n"), 2;
  Run run;
  run.rt = &rt;
  run.test = t;
  run.recv_delay_ms = o.recv_delay_ms;
  if (!create_endpoint(rt, t, 2 * half, &run.ep, &err)) {
    std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
    return 1;
  }

  // Connect every QP (REQ carries the test), then complete each connection (RTU).
  Links links;
  std::atomic<int> peer_gone{0};  // the loops stop waiting once the target ends a connection
  run.peer_gone = &peer_gone;
  for (uint32_t i = 0; i < nq; ++i) {
    links.push_back(std::make_unique<CmLink>());
    links.back()->gone = &peer_gone;
  }
  CmHello hello;
  hello.op = static_cast<uint8_t>(t.op);
  hello.kind = static_cast<uint8_t>(t.kind);
  hello.flags = t.verify ? 1 : 0;
  hello.qps = nq;
  hello.tx_depth = depth;
  hello.duration_s = t.duration_s;
  hello.size = t.size;
  hello.iters = t.iters;
  hello.addr = reinterpret_cast<uint64_t>(run.ep.buf.data());
  hello.rkey = run.ep.mr->get_remote_token();
  const uint32_t limit = rt.config().limits.max_read_limit;
  const NdkSockAddr dst = o.connect_to;
  const std::string target = format_sockaddr(dst);
  std::vector<Pending> completed(nq);
  std::unique_ptr<EchoState> es;
  bool ok = connect_links(rt, run.ep, links, hello, dst, limit, &err);
  TargetInfo tg;
  if (ok) {
    rt.run_on_control([&] {
      for (auto& l : links) l->private_data = connection_data(l->conn);
    });
    tg = decode_target(links[0]->private_data);
    for (uint32_t i = 1; i < nq && ok; ++i) {
      const TargetInfo u = decode_target(links[i]->private_data);
      if (u.kind != tg.kind || u.address != tg.address)
        ok = false, err = "the connections reached different targets";
    }
  }
  auto recv_sge = [&](uint64_t off, uint64_t len) {
    return NdkSge{run.ep.buf.data() + off, static_cast<uint32_t>(len),
                  run.ep.mr->get_local_token()};
  };
  const bool echoing =
      o.peer_echoes || tg.kind == TargetInfo::Kind::kEchoService || (tg.flags & kPerfEchoes) != 0;
  if (ok && t.op == Op::kSend && bw && echoing) {
    es = std::make_unique<EchoState>();
    es->sent.assign(nq, 0);
    es->send_done.assign(nq, 0);
    es->echoed.assign(nq, 0);
    es->max_size = max_size;
    es->window = depth;
    es->recv_base = half;
    for (uint32_t q = 0; q < nq; ++q)
      for (uint64_t k = 0; k < depth; ++k) {
        const NdkSge sge = recv_sge(half + (q * depth + k) * max_size, max_size);
        run.ep.qps[q]->receive(nullptr, &sge, 1);
      }
  }
  if (ok && t.op == Op::kSend && !bw) {
    if (!echoing)
      ok = false,
      err = "SEND latency needs an echoing target (rocedpd's echo service or a --listen peer)";
    if (tg.kind == TargetInfo::Kind::kMemoryService)
      ok = false, err = "a memory service (no receives): use write or read";
    run.recv_len = max_size;
    const NdkSge sge = recv_sge(max_size, max_size);
    if (o.recv_delay_ms == 0) run.ep.qps[0]->receive(nullptr, &sge, 1);
  }
  if (ok)
    ok = batched(
        rt, nq, completed,
        [&](size_t i) {
          return links[i]->conn->complete_connect_ex(&on_cm_disconnect, links[i].get(), &on_request,
                                                     &completed[i]);
        },
        "complete_connect", &err);
  if (ok && t.op != Op::kSend && tg.kind == TargetInfo::Kind::kEchoService)
    ok = false, err = "an echo service (no memory region): use send";
  if (ok && t.op == Op::kSend && tg.kind == TargetInfo::Kind::kMemoryService)
    ok = false, err = "a memory service (no receives): use write or read";
  if (ok && t.op == Op::kWrite && (tg.flags & MemoryServiceInfo::kFlagWrite) == 0)
    ok = false, err = "the target's region takes no remote WRITE";
  if (ok && t.op == Op::kRead && (tg.flags & MemoryServiceInfo::kFlagRead) == 0)
    ok = false, err = "the target's region takes no remote READ";
  if (!ok) {
    std::fprintf(stderr, "rocedp-perf: %s: %s\n", target.c_str(), err.c_str());
    disconnect_all(rt, links);
    close_endpoint(rt, run.ep);
    return failed();
  }
  run.peer.assign(nq, QpInfo{});
  for (uint32_t q = 0; q < nq; ++q) {
    run.peer[q].addr = tg.address;
    run.peer[q].rkey = tg.token;
  }
  run.passive = t.op == Op::kWrite && (tg.flags & kPerfWritesBack) == 0;
  // A region that outlives runs (rocedpd's) may still hold a previous run's pattern: a fresh seed
  // per run makes a lost WRITE show.
  if (tg.kind == TargetInfo::Kind::kMemoryService && t.verify && o.verify_seed == 0)
    g_pattern_seed = (clock::now() ^ static_cast<uint64_t>(getpid())) | 1;

  Report report;
  report.test = t;
  report.json = o.json;
  report.report_gbits = o.report_gbits;
  report.full_rtt = !bw && run.passive;
  report.notes.push_back(
      "Connections     : " + std::to_string(nq) + " through the IB CM to " + target + " (" +
      (o.peer_echoes ? std::string("a peer that answers each SEND") : tg.name()) + ")");
  if (run.passive && !bw)
    report.notes.push_back(
        "WRITE latency   : completion of each WRITE (nobody writes back): full round trip");
  if (es)
    report.notes.push_back(
        "SEND            : every message comes back (echo); BW counts one direction");
  print_header(report);
  const uint32_t pmtu = path_mtu_for(rt.port().mtu);
  int status = 0;
  for (uint64_t size : sizes) {
    const uint64_t iters = bw ? iters_for(t, size) : t.iters;
    const uint64_t used = t.verify && bw ? static_cast<uint64_t>(nq) * iters * size : size;
    if (t.op != Op::kSend && used > tg.length) {
      if (o.all_sizes) break;  // -a: the region ends here
      std::fprintf(stderr, "rocedp-perf: %s bytes needed, the target's region has %lu%s\n",
                   std::to_string(used).c_str(), static_cast<unsigned long>(tg.length),
                   t.verify ? " (--verify: qps x iters x size)" : "");
      status = 2;
      break;
    }
    const RegionCheck check{run, o, half, size, iters, used};
    const bool checks_region = t.verify && (t.op != Op::kSend || (bw && !es));
    Row r;
    if (checks_region && !check.before(&err)) r.ok = false, r.error = err;
    if (r.ok) {
      if (!bw)
        r = client_lat(run, size, iters);
      else if (es)
        r = send_bw_echo(run, *es, size, iters);
      else
        r = client_bw(run, size, iters);
    }
    if (r.ok && t.verify && t.op != Op::kSend && !check.after(&err)) r.ok = false, r.error = err;
    r.frames_per_msg = static_cast<uint32_t>(frame_sizes(t.op, size, pmtu).size());
    if (!r.ok) {
      std::fprintf(stderr, "rocedp-perf: size %lu: %s\n", static_cast<unsigned long>(size),
                   r.error.c_str());
      status = failed();
      break;
    }
    print_row(report, r);
    if (t.verify) print_verified(report, r.iterations, size);
  }
  if (o.peer_echoes && status == 0) {
    // rdma_server-style peers end the connection after their last answer: let them (2 s at most),
    // so the disconnect is theirs whatever the timing.
    rt.wait_until([&] { return all_disconnected(links); }, std::chrono::milliseconds(2000));
  }
  for (uint32_t q = 0; q < nq; ++q) {
    if (links[q]->disconnected.load() == 0 || status != 0) continue;
    const std::string why(status_name(links[q]->reason.load()));
    if (o.peer_echoes) {
      std::fprintf(stderr, "rocedp-perf: connection %u: the peer disconnected after the run (%s)\n",
                   q, why.c_str());
    } else {
      std::fprintf(stderr, "rocedp-perf: connection %u: the peer disconnected (%s)\n", q,
                   why.c_str());
      status = 1;
    }
  }
  if (!disconnect_all(rt, links) && status == 0) status = 1;
  close_endpoint(rt, run.ep);
  return status;
}

// --listen's connect events: the control thread appends, the main thread reads up to `count`.
struct Incoming {
  std::array<NdkConnector*, kMaxCmConnections> slots{};
  std::atomic<uint32_t> count{0};
};

void on_connect_event(void* ctx, NdkConnector* nc) {
  auto* in = static_cast<Incoming*>(ctx);
  Connector* conn = Connector::from(nc);
  const uint32_t n = in->count.load(std::memory_order_relaxed);
  if (n >= kMaxCmConnections) {
    conn->reject(nullptr, 0);
    conn->close(nullptr, nullptr);
    return;
  }
  in->slots[n] = nc;
  in->count.store(n + 1, std::memory_order_release);
}

bool valid_first(const CmHello& h) {
  return h.magic == kMagic && h.version == 1 && h.qps != 0 && h.qps <= kMaxCmConnections &&
         h.op <= 2 && h.kind <= 1 && h.tx_depth != 0;
}

// --listen: accepts one test's -q connections (the first REQ says the test), serves it like
// --server until the client disconnects, prints a summary. Returns the exit status.
int run_listener(AdapterRuntime& rt, const Options& o) {
  std::string err;
  Incoming in;
  Listener* listener = nullptr;
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] {
    st = create_listener(rt.adapter(), &on_connect_event, &in, nullptr, nullptr, &listener);
    if (st == STATUS_SUCCESS)
      st = listener->listen(NdkSockAddr{0, o.listen_port}, nullptr, nullptr);
  });
  const std::string where = format_ipv4(rt.port().ip) + ":" + std::to_string(o.listen_port);
  auto close_listener = [&] {
    rt.run_on_control([&] {
      if (listener != nullptr) listener->close(nullptr, nullptr), listener = nullptr;
    });
  };
  if (st != STATUS_SUCCESS) {
    std::fprintf(stderr, "rocedp-perf: listen on %s: %s\n", where.c_str(),
                 std::string(status_name(st)).c_str());
    close_listener();
    return 1;
  }
  std::printf("rocedp-perf: listening on %s (IB CM)\n", where.c_str());
  std::fflush(stdout);
  Run run;
  run.rt = &rt;
  Links links;
  // Requests that are not part of the test (a second client, or left after a failure): REJ.
  std::vector<bool> handled(kMaxCmConnections, false);  // slot accepted, or rejected and closed
  auto reject_strays = [&] {
    rt.run_on_control([&] {
      const uint32_t n = in.count.load(std::memory_order_acquire);
      for (uint32_t k = 0; k < n; ++k) {
        if (handled[k]) continue;
        handled[k] = true;
        Connector* conn = Connector::from(in.slots[k]);
        conn->reject(nullptr, 0);
        conn->close(nullptr, nullptr);
      }
    });
  };
  auto fail = [&](const std::string& why, int code) {
    std::fprintf(stderr, "rocedp-perf: %s\n", why.c_str());
    reject_strays();
    disconnect_all(rt, links);
    if (!run.ep.qps.empty() || run.ep.pd != nullptr) close_endpoint(rt, run.ep);
    close_listener();
    return code;
  };
  auto requests_came = [&](uint32_t k) {
    return rt.wait_until(
               [&] { return in.count.load(std::memory_order_acquire) > k || past_deadline(); },
               std::chrono::seconds(o.timeout_s)) &&
           in.count.load() > k;
  };
  // The first connection request says the test.
  if (!requests_came(0)) return fail("no connection request in time", 3);
  CmHello first;
  {
    std::vector<uint8_t> pd;
    rt.run_on_control([&] { pd = connection_data(Connector::from(in.slots[0])); });
    if (pd.size() >= sizeof(CmHello)) std::memcpy(&first, pd.data(), sizeof(first));
    if (pd.size() < sizeof(CmHello) || !valid_first(first))
      return fail("the first request is not from rocedp-perf --connect", 1);
  }
  Test& h = run.test;
  h.op = static_cast<Op>(first.op);
  h.kind = static_cast<Kind>(first.kind);
  h.verify = (first.flags & 1) != 0;
  h.qps = first.qps;
  h.tx_depth = first.tx_depth;
  h.duration_s = first.duration_s;
  h.size = first.size;
  h.iters = first.iters;
  const Op op = h.op;
  const bool lat = !h.bw();
  const uint64_t max_size = h.size != 0 ? h.size : op == Op::kSend ? kEchoMaxSize : (1ull << 20);
  // What this side does: WRITE/READ bw and READ lat: a passive region; WRITE lat: writes every
  // message back (ping-pong; one size, so not with -a); SEND bw: sink; SEND lat: echo.
  TargetInfo me;
  me.kind = TargetInfo::Kind::kPerf;
  const bool writes_back = op == Op::kWrite && lat && h.size != 0;
  const bool echoes = op == Op::kSend && lat;
  me.flags =
      static_cast<uint16_t>(MemoryServiceInfo::kFlagRead | MemoryServiceInfo::kFlagWrite |
                            (writes_back ? kPerfWritesBack : 0) | (echoes ? kPerfEchoes : 0));
  uint64_t buf = max_size;
  if (op == Op::kSend)
    buf = static_cast<uint64_t>(h.qps) * std::min(h.tx_depth, rt.config().limits.max_qp_depth) *
          max_size;
  else if (lat)
    buf = 2 * max_size;
  else if (h.verify)
    buf = static_cast<uint64_t>(h.qps) * h.iters * max_size;
  if (buf > (1ull << 30)) return fail("the test needs more than 1 GiB of buffer", 1);
  if (!create_endpoint(rt, h, buf, &run.ep, &err)) return fail(err, 1);
  Endpoint& ep = run.ep;
  me.address = reinterpret_cast<uint64_t>(ep.buf.data());
  me.length = ep.buf.size();
  me.token = ep.mr->get_remote_token();
  uint8_t accept_pd[MemoryServiceInfo::kWireSize];
  encode_perf_accept(me, accept_pd);

  // SEND: every QP gets its receives before its Accept (RQ slots of max_size; request context =
  // slot << 1, bit 0 set on an echo's SEND).
  const uint32_t rx = ep.rx_depth;
  auto post_recv = [&](uint32_t q, uint64_t slot) {
    NdkSge sge{ep.buf.data() + (q * rx + slot) * max_size, static_cast<uint32_t>(max_size),
               ep.mr->get_local_token()};
    return ep.qps[q]->receive(reinterpret_cast<void*>(static_cast<uintptr_t>(slot << 1)), &sge, 1);
  };
  if (op == Op::kSend)
    for (uint32_t q = 0; q < h.qps; ++q)
      for (uint64_t k = 0; k < rx; ++k)
        if (post_recv(q, k) != STATUS_SUCCESS) return fail("posting receives failed", 1);

  // Accept each request on the QP of its index.
  for (uint32_t i = 0; i < h.qps; ++i) links.push_back(std::make_unique<CmLink>());
  std::vector<Pending> accepted(h.qps);
  std::vector<bool> used(h.qps, false);
  const uint32_t limit = rt.config().limits.max_read_limit;
  for (uint32_t k = 0; k < h.qps; ++k) {
    if (!requests_came(k))
      return fail("only " + std::to_string(k) + " of " + std::to_string(h.qps) +
                      " connection requests came",
                  3);
    NTSTATUS ast = STATUS_SUCCESS;
    std::string why;
    rt.run_on_control([&] {
      Connector* conn = Connector::from(in.slots[k]);
      std::vector<uint8_t> pd = connection_data(conn);
      CmHello hh;
      if (pd.size() >= sizeof(hh)) std::memcpy(&hh, pd.data(), sizeof(hh));
      handled[k] = true;
      if (pd.size() < sizeof(hh) || hh.magic != kMagic || hh.index >= h.qps || used[hh.index] ||
          hh.op != first.op || hh.kind != first.kind || hh.size != first.size) {
        conn->reject(nullptr, 0);
        conn->close(nullptr, nullptr);
        why = "request " + std::to_string(k) + " does not belong to this test";
        return;
      }
      used[hh.index] = true;
      CmLink& l = *links[hh.index];
      l.conn = conn;
      l.hello = hh;
      ast = conn->accept_ex(ep.qps[hh.index], limit, limit, accept_pd, sizeof(accept_pd),
                            &on_cm_disconnect, &l, &on_request, &accepted[hh.index]);
      if (ast == STATUS_SUCCESS) accepted[hh.index].status = ast, accepted[hh.index].done = 1;
    });
    if (!why.empty()) return fail(why, 1);
    if (ast != STATUS_PENDING && ast != STATUS_SUCCESS)
      return fail("accept: " + std::string(status_name(ast)), 1);
  }
  if (!rt.wait_until(
          [&] {
            for (auto& a : accepted)
              if (a.done.load(std::memory_order_acquire) == 0) return false;
            return true;
          },
          std::chrono::seconds(10)))
    return fail("accept: no completion", 1);
  for (auto& a : accepted)
    if (a.status.load() != STATUS_SUCCESS)
      return fail("accept: " + std::string(status_name(a.status.load())), 1);
  std::printf("rocedp-perf: %u connection(s) accepted: %s %s, %s\n", h.qps, op_name(op),
              lat ? "lat" : "bw",
              writes_back       ? "writing every message back"
              : echoes          ? "echoing"
              : op == Op::kSend ? "receiving"
                                : "passive region");
  std::fflush(stdout);

  // Serve until every connection ended (the client disconnects when done).
  std::vector<uint64_t> received(h.qps, 0);
  uint64_t messages = 0, echoed = 0, bad = 0, errors = 0, written_back = 0;
  NTSTATUS first_error = STATUS_SUCCESS;
  uint8_t* local = ep.buf.data();
  const CmHello& client = links[0]->hello;
  NdkResultEx res[64];
  for (uint64_t polls = 0;; ++polls) {
    rt.poll();
    const uint32_t n = ep.cq->get_results_ex(res, 64);
    for (uint32_t j = 0; j < n; ++j) {
      const NdkResultEx& x = res[j];
      const auto q = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(x.qp_context));
      if (x.status != STATUS_SUCCESS) {
        // Work flushed when the client disconnects is expected.
        if (x.status != STATUS_CANCELLED || links[q]->disconnected.load() == 0) {
          if (errors++ == 0) first_error = x.status;
        }
        continue;
      }
      const auto ctx = reinterpret_cast<uintptr_t>(x.request_context);
      const uint64_t slot = ctx >> 1;
      uint8_t* p = local + (q * rx + slot) * max_size;
      if (x.type == NdkOperationType::kReceive) {
        const uint64_t k = received[q]++;
        ++messages;
        if (echoes) {
          NdkSge sge{p, x.bytes_transferred, ep.mr->get_local_token()};
          if (ep.qps[q]->send(reinterpret_cast<void*>(ctx | 1), &sge,
                              x.bytes_transferred != 0 ? 1 : 0, 0) == STATUS_SUCCESS)
            ++echoed;
          continue;
        }
        // Sink: the client fills message k of QP q with slot q x iters + k (client_bw).
        if (h.verify)
          bad += check_slot(p, q * h.iters + k, h.size) + (x.bytes_transferred != h.size ? 1 : 0);
        post_recv(q, slot);
      } else if ((ctx & 1) != 0) {
        post_recv(q, slot);  // the echo left: the slot takes the next SEND
      }
    }
    if (writes_back && links[0]->disconnected.load() == 0 &&
        __atomic_load_n(local + h.size - 1, __ATOMIC_ACQUIRE) == marker(written_back)) {
      // WRITE ping-pong (as --server): message i arrived when its last byte turned to marker(i).
      if (h.verify) bad += check_slot(local, written_back, h.size - 1);
      local[h.size - 1] = static_cast<uint8_t>(marker(written_back) ^ 0x80);
      NdkSge sge{local, static_cast<uint32_t>(h.size), ep.mr->get_local_token()};
      NTSTATUS wst;
      do {
        wst = ep.qps[0]->write(nullptr, &sge, 1, client.addr, client.rkey, 0);
        if (wst == STATUS_INSUFFICIENT_RESOURCES) {
          rt.poll();
          ep.cq->get_results_ex(res, 64);
        }
      } while (wst == STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
      ++written_back;
    }
    if ((polls & 0x3FF) == 0 && (all_disconnected(links) || past_deadline())) break;
  }
  if (!all_disconnected(links)) ++errors, first_error = STATUS_IO_TIMEOUT;
  // Let the DREPs and last ACKs leave before the port goes quiet.
  rt.wait_until([] { return false; }, std::chrono::milliseconds(200));
  std::printf(
      "rocedp-perf: served %u connection(s): %lu messages received, %lu echoed, %lu written "
      "back%s\n",
      h.qps, static_cast<unsigned long>(messages), static_cast<unsigned long>(echoed),
      static_cast<unsigned long>(written_back),
      h.verify && bad == 0 && (writes_back || op == Op::kSend) ? ", verify: every byte as sent"
                                                               : "");
  int status = 0;
  if (bad > 0) {
    std::fprintf(stderr, "rocedp-perf: verify: %lu bytes differ\n",
                 static_cast<unsigned long>(bad));
    status = 1;
  }
  if (errors > 0) {
    std::fprintf(stderr, "rocedp-perf: %lu error(s), first %s\n",
                 static_cast<unsigned long>(errors), std::string(status_name(first_error)).c_str());
    status = failed();
  }
  reject_strays();
  disconnect_all(rt, links);
  close_endpoint(rt, ep);
  close_listener();
  return status;
}

}  // namespace

// The endpoint with a connection manager, then the test. The client leaves first; the listener
// detaches its port and waits (bounded) for the client's side of the link to go away before it
// closes (DPDK 22.11 memif: neither side may poll while the other closes).
int run_cm(const Options& o) {
  int status = 0;
  auto rt =
      open_configured(o.endpoint, /*connection_manager=*/true, o.timeout_s, "rocedp-perf", &status);
  if (!rt) return status;
  clock::deadline().arm(o.timeout_s);
  if (o.listen) {
    status = run_listener(*rt, o);
  } else if (const std::string link = wait_link(*rt); !link.empty()) {
    std::fprintf(stderr, "rocedp-perf: %s\n", link.c_str());
    status = 1;
  } else {
    status = run_client(*rt, o);
  }
  rt->detach_ports();
  if (o.listen && rt->wait_until([&] { return !rt->link_up(); }, std::chrono::seconds(5)))
    usleep(200000);
  watchdog::phase("stopping the runtime");
  if (!rt->stop() && status == 0) status = 1;
  return status;
}

}  // namespace rocedp::perf
