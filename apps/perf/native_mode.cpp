#include "apps/perf/native_mode.hpp"

#include <unistd.h>

#include <algorithm>
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
#include "apps/perf/raw.hpp"
#include "apps/perf/report.hpp"
#include "apps/perf/verify.hpp"
#include "apps/perf/watchdog.hpp"

namespace rocedp::perf {
namespace {

// Exit status of a failure: 3 when the run's time limit caused it.
int failed() {
  return clock::deadline().timed_out() ? 3 : 1;
}

int say(const std::string& what, int status) {
  std::fprintf(stderr, "rocedp-perf: %s\n", what.c_str());
  return status;
}

struct Native {
  const Options& o;
  Test t;
  Report report;
  Oob oob;
  AdapterRuntime* rt = nullptr;  // RDMA
  RawBaseline* raw = nullptr;    // --raw
  Run run;
  explicit Native(const Options& options) : o(options) {}
  IdleFn idle() {
    if (rt == nullptr) return nullptr;
    return [this] { keep_polling(*rt); };
  }
  PortInfo port() const { return rt != nullptr ? rt->port() : raw->port(); }
};

std::vector<uint64_t> size_list(const Options& o) {
  std::vector<uint64_t> out;
  if (o.all_sizes)
    for (uint64_t s = 2; s <= (1ull << 23); s *= 2) out.push_back(s);
  else
    out.push_back(o.size);
  return out;
}

uint64_t buffer_len(const Test& t, uint64_t max_size, std::string* err) {
  if (!t.bw()) return 2 * max_size;
  if (!t.verify) return max_size;
  const uint64_t len = static_cast<uint64_t>(t.qps) * t.iters * max_size;
  if (len > (1ull << 30)) {
    *err = "--verify needs a slot per message: qps x iters x size must stay within 1 GiB";
    return 0;
  }
  return len;
}

QpInfo port_info(const PortInfo& p) {
  QpInfo q;
  q.ip = p.ip;
  if (p.has_ip6) {
    std::memcpy(q.ip6, p.ip6.data(), 16);
    q.has_ip6 = 1;
  }
  std::memcpy(q.mac, p.mac.data(), 6);
  q.mtu = p.mtu;
  return q;
}

std::vector<QpInfo> local_info(AdapterRuntime& rt, const Endpoint& ep) {
  const QpInfo base = port_info(rt.port());
  std::vector<QpInfo> out(ep.qps.size(), base);
  for (size_t i = 0; i < ep.qps.size(); ++i) {
    QpInfo& q = out[i];
    q.qpn = ep.qps[i]->qpn();
    q.psn =
        static_cast<uint32_t>((q.qpn * 2654435761u + static_cast<uint32_t>(getpid())) & 0xFFFFFF);
    q.addr = reinterpret_cast<uint64_t>(ep.buf.data());
    q.len = ep.buf.size();
    q.rkey = ep.mr->get_remote_token();
  }
  return out;
}

// Every QP to RTR/RTS with its peer's QPN, PSN, MAC and IP (out of band, as ibv_rc_pingpong): over
// IPv6 when both ports have an IPv6 address (--ip6).
bool connect_all(Run& run, std::string* err) {
  AdapterRuntime& rt = *run.rt;
  std::vector<Pending> pend(run.ep.qps.size());
  const uint32_t pmtu = std::min(path_mtu_for(rt.port().mtu), path_mtu_for(run.peer.at(0).mtu));
  const uint32_t read_limit = rt.config().limits.max_read_limit;
  const bool ip6 = rt.port().has_ip6;
  return batched(
      rt, run.ep.qps.size(), pend,
      [&](size_t i) {
        NdkQpConnectParams p;
        p.remote_qpn = run.peer[i].qpn;
        if (run.peer[i].has_ip6 != 0 && ip6) {
          std::memcpy(p.remote_ip6, run.peer[i].ip6, 16);  // RoCEv2 over IPv6
        } else {
          p.remote_ip = run.peer[i].ip;
        }
        std::memcpy(p.remote_mac, run.peer[i].mac, 6);
        p.path_mtu = pmtu;
        p.local_psn = run.mine[i].psn;
        p.remote_psn = run.peer[i].psn;
        p.local_ack_timeout = 14;  // 67 ms: generous on a shared machine
        p.min_rnr_timer = 1;       // 0.01 ms: a SEND that finds no receive retries soon
        p.inbound_read_limit = read_limit;
        p.outbound_read_limit = read_limit;
        return run.ep.qps[i]->connect(p, &on_request, &pend[i]);
      },
      "connect", err);
}

// The RDMA objects, then the QP infos both ways (the server sends first), then the QPs
// connected. A failure is sent to the peer too.
int set_up_rdma(Native& n, uint64_t buf, bool client) {
  std::string err;
  Run& run = n.run;
  if (!create_endpoint(*n.rt, n.t, buf, &run.ep, &err) ||
      (client && !n.oob.recv_infos(&run.peer, n.idle(), &err))) {
    n.oob.send_fail(err);
    return say(err, client ? failed() : 1);
  }
  run.mine = local_info(*n.rt, run.ep);
  const bool ok = client
                      ? run.peer.size() == run.mine.size() && n.oob.send_infos(run.mine)
                      : n.oob.send_infos(run.mine) && n.oob.recv_infos(&run.peer, n.idle(), &err) &&
                            run.peer.size() == run.mine.size();
  if (!ok || !connect_all(run, &err)) {
    if (err.empty()) err = "QP info exchange failed";
    n.oob.send_fail(err);
    close_endpoint(*n.rt, run.ep);
    return say(err, 1);
  }
  return 0;
}

// One size of the RDMA client: the run, DONE, the server's REPORT and the checks.
Row client_size(Native& n, uint64_t size, uint64_t iters) {
  Run& run = n.run;
  const Test& t = n.t;
  std::string err;
  if (!t.bw() && t.op == Op::kSend) {
    NdkSge sge{run.ep.buf.data() + size, static_cast<uint32_t>(size), run.ep.mr->get_local_token()};
    run.ep.qps[0]->receive(nullptr, &sge, 1);
  }
  Row r = t.bw() ? client_bw(run, size, iters) : client_lat(run, size, iters);
  const DoneMsg d{r.iterations, 0};
  n.oob.send(kDone, d);
  ReportMsg rep;
  if (!r.ok) {
    // The client's own failure (a time limit, a completion error) is the story: the server's
    // check of messages that never arrived would only blame their bytes.
  } else if (!n.oob.recv_struct(kReport, &rep, n.idle(), &err)) {
    r.ok = false;
    r.error = err;
  } else if (rep.errors > 0) {
    r.ok = false;
    r.error = "server saw " + std::to_string(rep.errors) + " error(s)";
  } else if (rep.bad_bytes > 0) {
    r.ok = false;
    r.error = "verify: " + std::to_string(rep.bad_bytes) + " bytes differ on the server";
  } else if (t.bw() && t.op == Op::kSend && rep.received != r.iterations) {
    r.ok = false;
    r.error = "server received " + std::to_string(rep.received) + " of " +
              std::to_string(r.iterations) + " messages";
  }
  if (r.ok && t.verify && t.bw() && t.op == Op::kRead) {
    const Slots s{true, iters, size};
    uint64_t bad = 0;
    for (uint32_t q = 0; q < t.qps; ++q)
      for (uint64_t i = 0; i < iters; ++i)
        bad += check_slot(run.ep.buf.data() + s.offset(q, i), s.slot(q, i), size);
    if (bad > 0) {
      r.ok = false;
      r.error = "verify: " + std::to_string(bad) + " bytes read differ";
    }
  }
  const uint32_t pmtu = std::min(path_mtu_for(n.rt->port().mtu), path_mtu_for(run.peer[0].mtu));
  r.frames_per_msg = static_cast<uint32_t>(frame_sizes(t.op, size, pmtu).size());
  return r;
}

// The client drives every size and prints the rows.
int run_client(Native& n) {
  std::string err;
  const Test& t = n.t;
  const bool raw = t.raw;
  const auto sizes = size_list(n.o);
  const uint64_t buf = buffer_len(t, sizes.back(), &err);
  if (buf == 0) return say(err, 2);
  std::vector<QpInfo>& peer = n.run.peer;
  if (raw) {
    if (!n.oob.recv_infos(&peer, nullptr, &err) || !n.oob.send_infos({port_info(n.port())}))
      return say(err, failed());
  } else if (const int status = set_up_rdma(n, buf, true); status != 0) {
    return status;
  }
  std::vector<uint8_t> p;
  if (!n.oob.recv(kReady, &p, n.idle(), &err)) {
    if (!raw) close_endpoint(*n.rt, n.run.ep);
    return say(err, failed());
  }
  if (!raw) print_qp_memory(n.report, n.run.ep.rss_per_qp);
  print_header(n.report);
  int status = 0;
  for (uint64_t size : sizes) {
    const uint64_t iters = iters_for(t, size);
    if (!raw && t.verify && t.bw() && (t.op == Op::kWrite || t.op == Op::kSend)) {
      const Slots s{true, iters, size};
      for (uint32_t q = 0; q < t.qps; ++q)
        for (uint64_t i = 0; i < iters; ++i)
          fill_slot(n.run.ep.buf.data() + s.offset(q, i), s.slot(q, i), size);
    }
    const SizeMsg sm{size, iters};
    if (!n.oob.send(kSize, sm) || !n.oob.recv(kSizeReady, &p, n.idle(), &err)) {
      status = say(err, failed());
      break;
    }
    Row r;
    if (raw) {
      ReportMsg rep;
      r = n.raw->client(t, peer[0], size, iters, n.oob, &rep, &err);
    } else {
      r = client_size(n, size, iters);
    }
    if (!r.ok) {
      if (!raw && n.o.json) print_engine_counters(*n.rt);
      status = say("size " + std::to_string(size) + ": " + r.error, failed());
      break;
    }
    print_row(n.report, r);
    if (!raw && n.o.json) print_engine_counters(*n.rt);
    if (t.verify) print_verified(n.report, r.iterations, size);
  }
  if (status == 0)
    n.oob.send(kBye, nullptr, 0);
  else
    n.oob.send_fail("client failed");
  if (!raw) close_endpoint(*n.rt, n.run.ep);
  return status;
}

// The server adopts the client's test and serves one size at a time until BYE.
int run_server(Native& n) {
  std::string err;
  const Test& t = n.t;
  const bool raw = t.raw;
  std::vector<uint64_t> sizes{t.size};
  if (t.size == 0) sizes = {2, 1ull << 23};  // -a: buffers for the largest size
  const uint64_t buf = buffer_len(t, *std::max_element(sizes.begin(), sizes.end()), &err);
  if (buf == 0) {
    n.oob.send_fail(err);
    return say(err, 2);
  }
  std::vector<QpInfo>& peer = n.run.peer;
  if (raw) {
    if (!n.oob.send_infos({port_info(n.port())}) || !n.oob.recv_infos(&peer, nullptr, &err))
      return say(err, failed());
  } else if (const int status = set_up_rdma(n, buf, false); status != 0) {
    return status;
  }
  n.oob.send(kReady, nullptr, 0);
  int status = 0;
  std::vector<uint8_t> p;
  uint32_t type = 0;
  for (;;) {
    if (!n.oob.try_recv(&type, &p)) {
      if (n.oob.peer_closed() || clock::deadline().passed()) {
        status = say(clock::deadline().timed_out() ? "time limit reached" : "client went away",
                     failed());
        break;
      }
      if (raw) {
        usleep(10);
      } else {
        for (int k = 0; k < 64 && n.rt->poll(); ++k) {
        }
        if (!n.rt->inline_cores()) usleep(10);
      }
      continue;
    }
    if (type == kBye) break;
    if (type == kFail) {
      status = say("client failed: " + std::string(p.begin(), p.end()), 1);
      break;
    }
    if (type != kSize || p.size() != sizeof(SizeMsg)) {
      status = 1;
      break;
    }
    SizeMsg sm;
    std::memcpy(&sm, p.data(), sizeof(sm));
    const ReportMsg rep = raw ? n.raw->server_size(t, peer[0], sm.size, n.oob)
                              : server_size(n.run, sm.size, sm.iters);
    n.oob.send(kReport, rep);
    // The responder's side of the run: what it dropped and why, NAKs it sent.
    if (!raw && n.o.json) print_engine_counters(*n.rt);
    if (rep.errors > 0 || rep.bad_bytes > 0) status = 1;
  }
  if (!raw) close_endpoint(*n.rt, n.run.ep);
  return status;
}

// The test with the runtime up (RDMA or raw), then the shutdown both sides agree on. Neither
// side may poll its port while the other closes (DPDK 22.11 memif unmaps the shared rings on its
// interrupt thread when the peer leaves): both detach, then tell each other.
template <typename R>
int run_and_close(Native& n, R& rt, const config::Config& cfg) {
  clock::deadline().arm(n.o.timeout_s);
  int status = 0;
  if (const std::string err = wait_link(rt); !err.empty()) {
    n.oob.send_fail(err);
    status = say(err, 1);
  } else {
    status = n.o.server ? run_server(n) : run_client(n);
  }
  rt.detach_ports();
  if (status == 0) {
    std::vector<uint8_t> p;
    std::string err;
    if (n.o.server) {
      n.oob.send(kDetached, nullptr, 0);
      n.oob.recv(kDetached, &p, nullptr, &err);
    } else {
      n.oob.recv(kDetached, &p, nullptr, &err);
      n.oob.send(kDetached, nullptr, 0);
    }
  }
  if (cfg.ports[0].devargs.find("role=client") != std::string::npos) {
    // One side at a time (tests/pmd/test_port.cpp): DPDK 22.11's memif interrupt thread can
    // crash when the server end sees its client leave while it closes too. The memif server
    // closes first; the memif client waits (bounded) until its link went down, then closes.
    // The disconnect is handled on EAL's interrupt thread, which unregisters the control
    // channel's handler after the link went down: give it time before the port is closed here.
    if (rt.wait_until([&] { return !rt.link_up(); }, std::chrono::seconds(3))) usleep(200000);
  }
  n.rt = nullptr;
  n.raw = nullptr;
  watchdog::phase("stopping the runtime");
  if (!rt.stop() && status == 0) status = 1;
  return status;
}

// --raw --reflector: the peer only bounces frames (dpdk-testpmd --forward-mode=macswap), so there
// is no out-of-band exchange: the frames carry our own IP both ways and the reflector's MAC, which
// the swap turns back into ours.
int run_reflected(const Options& o) {
  config::Config cfg;
  std::string err;
  if (!build_config(o.endpoint, &cfg, &err)) return say(err, 2);
  wait_memif_socket(cfg, std::min(o.timeout_s, kStartupWaitS));
  auto raw = RawBaseline::open(cfg, &err);
  if (!raw) return say("start: " + err, 1);
  clock::deadline().arm(o.timeout_s);
  int status = 0;
  if (const std::string link = wait_link(*raw); !link.empty()) {
    status = say(link, 1);
  } else {
    Report report;
    report.test = o.test;
    report.json = o.json;
    report.notes.push_back("Peer            : a frame reflector at " + format_mac(*o.reflector));
    QpInfo peer = port_info(raw->port());
    std::memcpy(peer.mac, o.reflector->data(), 6);
    print_header(report);
    for (uint64_t size : size_list(o)) {
      const Row r = raw->reflected(o.test, peer, size, iters_for(o.test, size));
      if (!r.ok) {
        status = say("size " + std::to_string(size) + ": " + r.error, failed());
        break;
      }
      print_row(report, r);
    }
  }
  if (!raw->stop() && status == 0) status = 1;
  return status;
}

}  // namespace

int run_native(const Options& o) {
  if (o.reflector) return run_reflected(o);
  Native n(o);
  std::string err;
  const int oob_timeout_ms = static_cast<int>(std::min<uint32_t>(o.timeout_s, 30) * 1000);
  if (o.server) {
    Hello h;
    if (!n.oob.listen_and_accept(o.oob_port, oob_timeout_ms, &err) ||
        !n.oob.recv_struct(kHello, &h, nullptr, &err))
      return say(err, 1);
    if (h.magic != kMagic) return say("not a rocedp-perf peer", 1);
    n.t = test_of(h);
  } else {
    n.t = o.test;
    if (!n.oob.connect_to(o.host, o.oob_port, oob_timeout_ms, &err) ||
        !n.oob.send(kHello, hello_of(n.t)))
      return say(err, 1);
  }
  n.report.test = n.t;
  n.report.json = o.json;
  n.report.report_gbits = o.report_gbits;
  n.run.test = n.t;
  n.run.oob = &n.oob;
  n.run.recv_delay_ms = o.recv_delay_ms;

  config::Config cfg;
  if (!build_config(o.endpoint, &cfg, &err)) return say(err, 2);
  if (n.t.raw) {
    wait_memif_socket(cfg, std::min(o.timeout_s, kStartupWaitS));
    auto raw = RawBaseline::open(cfg, &err);
    if (!raw) {
      n.oob.send_fail(err);
      return say("start: " + err, 1);
    }
    n.raw = raw.get();
    return run_and_close(n, *raw, cfg);
  }
  auto rt = open_endpoint(cfg, o.endpoint, /*connection_manager=*/false, o.timeout_s, &err);
  if (!rt) {
    n.oob.send_fail(err);
    return say("start: " + err, 1);
  }
  n.rt = rt.get();
  n.run.rt = rt.get();
  return run_and_close(n, *rt, cfg);
}

}  // namespace rocedp::perf
