#include "apps/perf/endpoint.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "apps/perf/clock.hpp"
#include "apps/perf/perf_util.hpp"
#include "apps/perf/report.hpp"
#include "apps/perf/watchdog.hpp"

namespace rocedp::perf {

bool build_config(const EndpointOptions& e, config::Config* out, std::string* err) {
  config::Config cfg;
  if (!e.config_file.empty()) {
    if (!load_config_file(e.config_file, &cfg, err)) return false;
    // One endpoint, one port: the one named (or the first); the others stay closed, so their
    // devices remain free for whoever else uses the file (a daemon on the other ports).
    const std::string want = e.config_port.empty() ? cfg.ports.front().name : e.config_port;
    const auto it = std::find_if(cfg.ports.begin(), cfg.ports.end(),
                                 [&](const config::PortConfig& p) { return p.name == want; });
    if (it == cfg.ports.end()) {
      std::string names;
      for (const auto& p : cfg.ports) names += (names.empty() ? "" : ", ") + p.name;
      *err = e.config_file + ": no port named '" + want + "' (its ports: " + names + ")";
      return false;
    }
    cfg.ports = {*it};
    // Only virtual devices (net_memif, net_af_packet, ...): keep EAL's PCI scan off the
    // machine's own NICs, as the command-line endpoint does.
    bool vdevs_only = true;
    for (const auto& p : cfg.ports) vdevs_only &= p.devargs.rfind("net_", 0) == 0;
    if (vdevs_only && std::find(cfg.eal.extra_args.begin(), cfg.eal.extra_args.end(), "--no-pci") ==
                          cfg.eal.extra_args.end())
      cfg.eal.extra_args.push_back("--no-pci");
  } else {
    config::PortConfig p;
    p.name = "perf0";
    p.devargs = e.devargs;
    const auto slash = e.ip_cidr.find('/');
    const auto ip = parse_ipv4(e.ip_cidr.substr(0, slash));
    if (!ip) {
      *err = "bad --ip " + e.ip_cidr;
      return false;
    }
    p.address.value = *ip;
    if (!e.ip6.empty()) {
      const auto ip6 = parse_ipv6(e.ip6);
      if (!ip6) {
        *err = "bad --ip6 " + e.ip6;
        return false;
      }
      p.address6 = config::Ipv6Address{*ip6};
    }
    p.prefix_len = slash == std::string::npos
                       ? 24
                       : static_cast<uint8_t>(std::atoi(e.ip_cidr.c_str() + slash + 1));
    if (!e.mac.empty()) {
      const auto mac = parse_mac(e.mac);
      if (!mac) {
        *err = "bad --mac " + e.mac;
        return false;
      }
      p.mac = config::MacAddress{*mac};
    }
    p.mtu = e.mtu;
    p.vlan = e.vlan;
    p.vlan_priority = static_cast<uint8_t>(e.vlan_priority);
    p.dscp = static_cast<uint8_t>(e.dscp);
    p.ecn = e.ecn;
    p.cnp_dscp = static_cast<uint8_t>(e.cnp_dscp);
    p.dcqcn = e.dcqcn;
    cfg.ports.push_back(p);
    cfg.eal.memory_mb = e.memory_mb;
    cfg.eal.hugepages = false;
    cfg.eal.file_prefix = e.file_prefix;
    cfg.eal.extra_args = {"--no-pci"};
    cfg.dataplane.mbuf_count = 16383;
    cfg.eal.main_lcore = e.lcore;
  }
  // One polling core: inline on the main lcore, or on its own worker (--lcore-mode W).
  if (e.worker_lcore >= 0) {
    cfg.eal.lcores = {cfg.eal.main_lcore, static_cast<unsigned>(e.worker_lcore)};
    cfg.dataplane.lcores = {static_cast<unsigned>(e.worker_lcore)};
  } else {
    cfg.eal.lcores = {cfg.eal.main_lcore};
    cfg.dataplane.lcores = {cfg.eal.main_lcore};
  }
  if ((e.fault_drop_pct > 0 || e.fault_ce_pct > 0) && !cfg.ports.empty()) {
    auto& f = cfg.ports[0].fault;
    f.direction = config::FaultConfig::Direction::kRx;
    f.drop_pct = e.fault_drop_pct;
    f.ce_pct = e.fault_ce_pct;
    f.seed = e.fault_seed != 0 ? e.fault_seed : static_cast<uint64_t>(getpid()) * 2654435761u + 1;
  }
  cfg.listeners.clear();
  cfg.eal.extra_args.push_back("--no-telemetry");
  cfg.telemetry.enabled = false;
  // A control thread on a shared 2-CPU machine must not spin; stats rounds only every second.
  cfg.telemetry.stats_interval_ms = 1000;
  *out = std::move(cfg);
  return true;
}

void wait_memif_socket(const config::Config& cfg, uint32_t timeout_s) {
  for (const auto& p : cfg.ports) {
    const std::string& d = p.devargs;
    // Only a socket file can be waited for (socket-abstract=no); an abstract socket is not.
    if (d.rfind("net_memif", 0) != 0 || d.find("role=client") == std::string::npos ||
        d.find("socket-abstract=no") == std::string::npos)
      continue;
    std::string path = "/run/memif.sock";  // the PMD's default
    const auto at = d.find("socket=");
    if (at != std::string::npos)
      path = d.substr(at + 7, d.find(',', at) == std::string::npos ? std::string::npos
                                                                   : d.find(',', at) - at - 7);
    // Only the file can be waited for: probing the socket with a connection that closes before
    // the handshake makes DPDK 22.11's memif server panic on its interrupt thread.
    for (uint32_t waited = 0; waited < timeout_s * 100 && access(path.c_str(), F_OK) != 0; ++waited)
      usleep(10000);
    // A file created just now may belong to a server between bind() and listen() (a client
    // connecting then fails for good): give a fresh one a moment.
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && std::time(nullptr) - st.st_ctime <= 2) usleep(200000);
  }
}

std::unique_ptr<AdapterRuntime> open_endpoint(const config::Config& cfg, const EndpointOptions& e,
                                              bool connection_manager, uint32_t timeout_s,
                                              std::string* err) {
  wait_memif_socket(cfg, std::min(timeout_s, kStartupWaitS));
  OpenOptions o;
  o.program = "rocedp-perf";
  o.launch_cores = e.worker_lcore >= 0;
  o.connection_manager = connection_manager;
  o.telemetry = false;
  return open_adapter(cfg, o, err);
}

std::unique_ptr<AdapterRuntime> open_configured(const EndpointOptions& e, bool connection_manager,
                                                uint32_t timeout_s, const char* who, int* status) {
  std::string err;
  config::Config cfg;
  if (!build_config(e, &cfg, &err)) {
    std::fprintf(stderr, "%s: %s\n", who, err.c_str());
    *status = 2;
    return nullptr;
  }
  auto rt = open_endpoint(cfg, e, connection_manager, timeout_s, &err);
  if (!rt) {
    std::fprintf(stderr, "%s: start: %s\n", who, err.c_str());
    *status = 1;
  }
  return rt;
}

int run_endpoint(const EndpointOptions& e, uint32_t timeout_s, const char* who,
                 const std::function<int(AdapterRuntime&)>& body) {
  int status = 1;
  auto rt = open_configured(e, /*connection_manager=*/true, timeout_s, who, &status);
  if (!rt) return status;
  clock::deadline().arm(timeout_s);
  // The link's wait is bounded by the run's time limit too (then the exit status says so).
  if (!rt->wait_until([&] { return rt->link_up() || clock::deadline().passed(); },
                      std::chrono::seconds(kStartupWaitS)) ||
      !rt->link_up()) {
    std::fprintf(stderr, "%s: link of port %s did not come up\n", who, rt->port().name.c_str());
    status = clock::deadline().timed_out() ? 3 : 1;
  } else {
    status = body(*rt);
    if (status != 0 && clock::deadline().timed_out()) status = 3;
    if (e.counters) {
      print_engine_counters(*rt);
      print_drop_counters(*rt);
    }
  }
  rt->detach_ports();
  watchdog::phase("stopping the runtime");
  if (!rt->stop() && status == 0) status = 1;
  return status;
}

NTSTATUS connect_retrying(AdapterRuntime& rt, Qp* qp, const NdkSockAddr& to, uint32_t read_limit,
                          NdkDisconnectEventCallbackEx on_disconnect, void* disconnect_ctx,
                          Connector** out) {
  for (int attempt = 0;; ++attempt) {
    Connector* c = nullptr;
    Pending p;
    NTSTATUS st = call_and_wait(
        rt, p,
        [&] {
          NTSTATUS x = create_connector(rt.adapter(), nullptr, nullptr, &c);
          if (x == STATUS_SUCCESS)
            x = c->connect(qp, NdkSockAddr{0, 0}, to, read_limit, read_limit, nullptr, 0,
                           &on_request, &p);
          return x;
        },
        kEstablishWait);
    Pending q;
    if (st == STATUS_SUCCESS) {
      st = call_and_wait(rt, q, [&] {
        return c->complete_connect_ex(on_disconnect, disconnect_ctx, &on_request, &q);
      });
      if (st == STATUS_SUCCESS) {
        *out = c;
        return st;
      }
    }
    // A Connect or CompleteConnect that timed out is still pending: its completion must find
    // p and q.
    if (c != nullptr) close_connector_settled(rt, c, {&p, &q});
    if (st != STATUS_CONNECTION_REFUSED || attempt >= 50 || clock::deadline().passed()) return st;
    rt.wait_until([] { return false; }, std::chrono::milliseconds(200));
  }
}

NTSTATUS accept_connection(AdapterRuntime& rt, Connector* c, Qp* qp, uint32_t read_limit,
                           NdkDisconnectEventCallbackEx on_disconnect, void* disconnect_ctx,
                           Pending& p) {
  return call_and_wait(
      rt, p,
      [&] {
        return c->accept_ex(qp, read_limit, read_limit, nullptr, 0, on_disconnect, disconnect_ctx,
                            &on_request, &p);
      },
      kEstablishWait);
}

void keep_polling(AdapterRuntime& rt) {
  for (int k = 0; k < 64; ++k)
    if (!rt.poll()) break;
  if (!rt.inline_cores()) usleep(20);
}

void on_created(void* ctx, NTSTATUS s, NdkObjectHeader* o) {
  auto* p = static_cast<Pending*>(ctx);
  p->object = o;
  p->status.store(s);
  p->done.store(1, std::memory_order_release);
}
void on_request(void* ctx, NTSTATUS s) {
  auto* p = static_cast<Pending*>(ctx);
  p->status.store(s);
  p->done.store(1, std::memory_order_release);
}
void on_closed(void* ctx) {
  on_request(ctx, STATUS_SUCCESS);
}

void close_connector_settled(AdapterRuntime& rt, Connector* c,
                             std::initializer_list<Pending*> pend) {
  rt.run_on_control([&] { c->close(nullptr, nullptr); });
  rt.wait_until(
      [&] {
        for (const Pending* p : pend)
          if (p->owed && p->done.load(std::memory_order_acquire) == 0) return false;
        return true;
      },
      std::chrono::seconds(10));
}

NTSTATUS call_and_wait(AdapterRuntime& rt, Pending& p, const std::function<NTSTATUS()>& start,
                       std::chrono::milliseconds timeout) {
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] { st = start(); });
  if (st != STATUS_PENDING) return st;
  p.owed = true;
  if (!rt.wait_until([&] { return p.done.load(std::memory_order_acquire) != 0; }, timeout))
    return STATUS_IO_TIMEOUT;
  return p.status.load();
}

bool batched(AdapterRuntime& rt, size_t n, std::vector<Pending>& pend,
             const std::function<NTSTATUS(size_t)>& start, const char* what, std::string* err) {
  auto failed = [&](size_t i, NTSTATUS st) {
    *err = std::string(what) + " " + std::to_string(i) + ": " + std::string(status_name(st));
    return false;
  };
  for (size_t base = 0; base < n; base += kBatch) {
    const size_t end = std::min(n, base + kBatch);
    std::vector<NTSTATUS> inline_status(end - base);
    rt.run_on_control([&] {
      for (size_t i = base; i < end; ++i) inline_status[i - base] = start(i);
    });
    for (size_t i = base; i < end; ++i) {
      const NTSTATUS st = inline_status[i - base];
      if (st == STATUS_SUCCESS)
        pend[i].done = 1, pend[i].status = st;
      else if (st != STATUS_PENDING)
        return failed(i, st);
    }
    const bool ok = rt.wait_until(
        [&] {
          for (size_t i = base; i < end; ++i)
            if (pend[i].done.load(std::memory_order_acquire) == 0) return false;
          return true;
        },
        std::chrono::seconds(10));
    if (!ok) {
      *err = std::string(what) + ": no completion from the control thread";
      return false;
    }
    for (size_t i = base; i < end; ++i)
      if (pend[i].status.load() != STATUS_SUCCESS) return failed(i, pend[i].status.load());
  }
  return true;
}

namespace {
void cm_on_connect_event(void* ctx, NdkConnector* nc) {
  auto* link = static_cast<CmLink*>(ctx);
  NdkConnector* none = nullptr;
  if (!link->incoming.compare_exchange_strong(none, nc)) {  // one connection at a time
    Connector* c = Connector::from(nc);
    c->reject(nullptr, 0);
    c->close(nullptr, nullptr);
  }
}
}  // namespace

void cm_on_disconnect(void* ctx, NTSTATUS) {
  static_cast<CmLink*>(ctx)->gone.store(1);
}

bool cm_await_request(AdapterRuntime& rt, CmLink& link, uint16_t port, uint32_t timeout_s,
                      const char* who, std::string* err) {
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] {
    st = create_listener(rt.adapter(), &cm_on_connect_event, &link, nullptr, nullptr,
                         &link.listener);
    if (st == STATUS_SUCCESS) st = link.listener->listen(NdkSockAddr{0, port}, nullptr, nullptr);
  });
  if (st != STATUS_SUCCESS) {
    *err = "listen on port " + std::to_string(port) + ": " + std::string(status_name(st));
    return false;
  }
  std::printf("%s: listening on port %u\n", who, port);
  std::fflush(stdout);
  return cm_next_request(rt, link, timeout_s, err);
}

bool cm_next_request(AdapterRuntime& rt, CmLink& link, uint32_t timeout_s, std::string* err) {
  if (!rt.wait_until([&] { return link.incoming.load() != nullptr || clock::deadline().passed(); },
                     std::chrono::seconds(timeout_s)) ||
      link.incoming.load() == nullptr) {
    *err = "no connection request came";
    return false;
  }
  link.conn = Connector::from(link.incoming.load());
  return true;
}

bool cm_accept_one(AdapterRuntime& rt, CmLink& link, uint16_t port, Qp* qp, uint32_t timeout_s,
                   const char* who, std::string* err) {
  if (!cm_await_request(rt, link, port, timeout_s, who, err)) return false;
  const NTSTATUS st = accept_connection(rt, link.conn, qp, rt.config().limits.max_read_limit,
                                        &cm_on_disconnect, &link, link.accepted);
  if (st == STATUS_SUCCESS) return true;
  *err = "accept: " + std::string(status_name(st));
  return false;
}

bool cm_connect(AdapterRuntime& rt, CmLink& link, Qp* qp, NdkSockAddr addr, uint16_t port,
                std::string* err) {
  addr.port = port;
  const NTSTATUS st = connect_retrying(rt, qp, addr, rt.config().limits.max_read_limit,
                                       &cm_on_disconnect, &link, &link.conn);
  if (st == STATUS_SUCCESS) return true;
  *err = "connect to " + format_sockaddr(addr) + ": " + std::string(status_name(st));
  return false;
}

void cm_close(AdapterRuntime& rt, CmLink& link) {
  if (link.conn != nullptr) {
    Pending p;
    call_and_wait(
        rt, p, [&] { return link.conn->disconnect(&on_request, &p); }, kDisconnectWait);
    close_connector_settled(rt, link.conn, {&p});  // a Disconnect without DREP still pending
    link.conn = nullptr;
  }
  if (link.listener != nullptr) rt.run_on_control([&] { link.listener->close(nullptr, nullptr); });
  rt.wait_until([] { return false; }, std::chrono::milliseconds(200));
}

std::vector<NTSTATUS> disconnect_and_close(AdapterRuntime& rt, const std::vector<Connector*>& conns,
                                           const std::vector<bool>& disconnect,
                                           const std::function<void()>& close_more) {
  std::vector<Pending> pend(conns.size());
  std::vector<NTSTATUS> st(conns.size(), STATUS_SUCCESS);
  rt.run_on_control([&] {
    for (size_t i = 0; i < conns.size(); ++i)
      if (disconnect[i]) st[i] = conns[i]->disconnect(&on_request, &pend[i]);
  });
  auto settled = [&] {
    for (size_t i = 0; i < conns.size(); ++i)
      if (st[i] == STATUS_PENDING && pend[i].done.load(std::memory_order_acquire) == 0)
        return false;
    return true;
  };
  rt.wait_until(settled, kDisconnectWait);
  std::vector<NTSTATUS> out(st);
  for (size_t i = 0; i < conns.size(); ++i)
    if (st[i] == STATUS_PENDING)
      out[i] = pend[i].done.load() != 0 ? pend[i].status.load() : STATUS_IO_TIMEOUT;
  rt.run_on_control([&] {
    for (Connector* c : conns) c->close(nullptr, nullptr);
    if (close_more) close_more();
  });
  // A Disconnect still pending completes (CANCELLED) before its connector's close does: `pend`
  // must outlive those completions.
  rt.wait_until(settled, std::chrono::seconds(5));
  return out;
}

bool connect_out_of_band(AdapterRuntime& rt, Qp* qp, NdkQpConnectParams p, std::string* err) {
  std::array<uint8_t, 6> mac{};
  if (p.remote_ip != 0) {
    if (!rt.resolve_neighbour(p.remote_ip, &mac, std::chrono::seconds(10)))
      return (*err = "ARP: " + format_ipv4(p.remote_ip) + " did not answer"), false;
  } else {
    // RoCEv2 over IPv6: the port needs an IPv6 address (--ip6, ports[].ipv6).
    std::array<uint8_t, 16> ip6{};
    std::memcpy(ip6.data(), p.remote_ip6, 16);
    if (!rt.port().has_ip6)
      return (*err = "the peer's GID " + format_gid(ip6.data()) +
                     " is IPv6: give this port an IPv6 address (--ip6)"),
             false;
    if (!rt.resolve_neighbour6(ip6, &mac, std::chrono::seconds(10)))
      return (*err = "NDP: " + format_gid(ip6.data()) + " did not answer"), false;
  }
  std::memcpy(p.remote_mac, mac.data(), 6);
  Pending pd;
  const NTSTATUS st = call_and_wait(rt, pd, [&] { return qp->connect(p, &on_request, &pd); });
  // A core that did not answer in time still will (or the watchdog ends the process): `pd`
  // must be there for it.
  if (st == STATUS_IO_TIMEOUT)
    rt.wait_until([&] { return pd.done.load(std::memory_order_acquire) != 0; },
                  std::chrono::hours(1));
  if (st != STATUS_SUCCESS) return (*err = "QP connect: " + std::string(status_name(st))), false;
  return true;
}

bool create_cq(AdapterRuntime& rt, uint32_t depth, Cq** out, std::string* err,
               NdkCqNotificationCallback notification, void* context) {
  std::vector<Pending> one(1);
  if (!batched(
          rt, 1, one,
          [&](size_t) {
            return rt.adapter().create_cq(depth, notification, context, 0, &on_created, &one[0],
                                          out);
          },
          "create_cq", err))
    return false;
  if (one[0].object != nullptr) *out = ndk_object_cast<Cq>(one[0].object);
  return true;
}

bool create_qps(AdapterRuntime& rt, Pd* pd, Cq* cq, size_t n, uint32_t rx_depth, uint32_t tx_depth,
                std::vector<Qp*>* out, std::string* err, Srq* srq) {
  out->assign(n, nullptr);
  std::vector<Pending> pend(n);
  if (!batched(
          rt, n, pend,
          [&](size_t i) {
            void* ctx = reinterpret_cast<void*>(i);
            return srq != nullptr ? pd->create_qp_with_srq(cq, cq, srq, ctx, tx_depth, 1, 0,
                                                           &on_created, &pend[i], &(*out)[i])
                                  : pd->create_qp(cq, cq, ctx, rx_depth, tx_depth, 1, 1, 0,
                                                  &on_created, &pend[i], &(*out)[i]);
          },
          "create_qp", err))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (pend[i].object != nullptr) (*out)[i] = ndk_object_cast<Qp>(pend[i].object);
  return true;
}

bool create_srq(AdapterRuntime& rt, Pd* pd, uint32_t depth, Srq** out, std::string* err) {
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control(
      [&] { st = pd->create_srq(depth, 1, 0, nullptr, nullptr, 0, nullptr, nullptr, out); });
  if (st == STATUS_SUCCESS) return true;
  *err = "create_srq: " + std::string(status_name(st));
  return false;
}

bool register_buffer(AdapterRuntime& rt, Pd* pd, void* data, size_t len, Mr** out,
                     std::string* err) {
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] {
    st = pd->create_mr(false, nullptr, nullptr, out);
    if (st == STATUS_SUCCESS)
      st = (*out)->register_mr(data, len,
                               NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                   NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                               nullptr, nullptr);
  });
  if (st == STATUS_SUCCESS) return true;
  *err = "register_mr: " + std::string(status_name(st));
  return false;
}

void close_objects(AdapterRuntime& rt, const std::vector<Qp*>& qps, const std::vector<Cq*>& cqs,
                   const std::vector<Mr*>& mrs, Pd* pd, const std::vector<Srq*>& srqs) {
  std::string err;
  auto close_all = [&](auto& objects, const char* what) {
    std::vector<Pending> pend(objects.size());
    batched(
        rt, objects.size(), pend,
        [&](size_t i) {
          return objects[i] != nullptr ? objects[i]->close(&on_closed, &pend[i]) : STATUS_SUCCESS;
        },
        what, &err);
  };
  close_all(qps, "close qp");
  close_all(srqs, "close srq");
  close_all(cqs, "close cq");
  close_all(mrs, "close mr");
  rt.run_on_control([&] {
    if (pd != nullptr) pd->close(nullptr, nullptr);
  });
  if (!err.empty()) std::fprintf(stderr, "rocedp-perf: closing: %s\n", err.c_str());
}

namespace {

uint64_t rss_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

bool create_endpoint(AdapterRuntime& rt, const Test& t, uint64_t buf_len, Endpoint* ep,
                     std::string* err) {
  const auto& lim = rt.config().limits;
  ep->qp_depth = std::min(t.tx_depth, lim.max_qp_depth);
  ep->rx_depth = t.op == Op::kSend ? ep->qp_depth : 1;
  // One CQ for every QP's send and receive completions; outstanding work is capped to its depth.
  const uint64_t want = static_cast<uint64_t>(t.qps) * (ep->qp_depth + ep->rx_depth) + 64;
  ep->cq_depth =
      static_cast<uint32_t>(std::min<uint64_t>(lim.max_cq_depth, std::max<uint64_t>(want, 256)));
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] { st = rt.adapter().create_pd(nullptr, nullptr, &ep->pd); });
  if (st != STATUS_SUCCESS) {
    *err = "create_pd: " + std::string(status_name(st));
    return false;
  }
  if (!create_cq(rt, ep->cq_depth, &ep->cq, err)) return false;
  ep->buf.assign(std::max<uint64_t>(buf_len, 8), 0);
  if (!register_buffer(rt, ep->pd, ep->buf.data(), ep->buf.size(), &ep->mr, err)) return false;
  const uint64_t rss0 = rss_bytes();
  if (!create_qps(rt, ep->pd, ep->cq, t.qps, ep->rx_depth, ep->qp_depth, &ep->qps, err))
    return false;
  ep->rss_per_qp = (rss_bytes() - std::min(rss0, rss_bytes())) / t.qps;
  return true;
}

void close_endpoint(AdapterRuntime& rt, Endpoint& ep) {
  close_objects(rt, ep.qps, {ep.cq}, {ep.mr}, ep.pd);
  ep = Endpoint{};
}

}  // namespace rocedp::perf
