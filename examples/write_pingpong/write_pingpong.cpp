// write_pingpong: two processes bounce a message back and forth with RDMA WRITEs over a
// net_memif link, using only rocedp's public API (include/rocedp/). See README.md.
//
//   write_pingpong --role server --socket /tmp/pp.sock [--iterations N] [--size BYTES]
//   write_pingpong --role client --socket /tmp/pp.sock [--iterations N] [--size BYTES]
//   (--prefix NAME: the EAL file prefix; default pingpong-ROLE-PID)
//
// Each side registers a buffer and tells the peer where it is (address and token) in the
// connection's private data. The client WRITEs message i into the server's buffer; the server
// sees it arrive (the sequence number in the message's last 8 bytes), checks every byte and
// WRITEs it back; the client checks the echo. Exit 0 when every byte of every round trip was
// right.

#include <rocedp/rocedp.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace rocedp;
using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::seconds(60);  // the memif link comes up after the first CM REQs

/// Where a peer may WRITE: sent in the CM private data.
struct RegionInfo {
  uint64_t address;
  uint32_t token;
  uint32_t length;
};

/// A completion callback's result, read by the main thread.
struct Done {
  std::atomic<bool> done{false};
  std::atomic<NTSTATUS> status{STATUS_PENDING};
  NdkObjectHeader* object = nullptr;
  static void request(void* c, NTSTATUS s) {
    auto* d = static_cast<Done*>(c);
    d->status = s;
    d->done = true;
  }
  static void create(void* c, NTSTATUS s, NdkObjectHeader* o) {
    auto* d = static_cast<Done*>(c);
    d->object = o;
    d->status = s;
    d->done = true;
  }
  static void closed(void* c) { static_cast<Done*>(c)->done = true; }
};

int fail(const char* what, NTSTATUS st = STATUS_SUCCESS) {
  std::fprintf(stderr, "write_pingpong: %s%s%s\n", what, st != STATUS_SUCCESS ? ": " : "",
               st != STATUS_SUCCESS ? status_name(st).data() : "");
  return 1;
}

config::Config make_config(bool server, const std::string& socket, const std::string& prefix) {
  config::Config cfg;
  cfg.eal.lcores = {0};
  cfg.eal.main_lcore = 0;
  cfg.eal.memory_mb = 256;
  cfg.eal.file_prefix =
      !prefix.empty()
          ? prefix
          : std::string("pingpong-") + (server ? "server-" : "client-") + std::to_string(getpid());
  cfg.dataplane.lcores = {0};  // one core, driven inline by this thread
  cfg.dataplane.mbuf_count = 4095;
  cfg.telemetry.enabled = false;
  const uint32_t base = 0xC6120000 | 0x6400;  // 198.18.100.0/24
  const config::MacAddress server_mac{{0x02, 0x00, 0x00, 0x00, 0x64, 0x01}};
  const config::MacAddress client_mac{{0x02, 0x00, 0x00, 0x00, 0x64, 0x02}};
  config::PortConfig port;
  port.name = "memif0";
  port.devargs = "net_memif0,role=" + std::string(server ? "server" : "client") +
                 ",socket=" + socket + ",socket-abstract=no";
  port.mac = server ? server_mac : client_mac;
  port.address.value = base | (server ? 1 : 2);
  port.prefix_len = 24;
  port.neighbours.push_back(
      {config::Ipv4Address{base | (server ? 2u : 1u)}, server ? client_mac : server_mac});
  cfg.ports.push_back(port);
  return cfg;
}

struct Endpoint {
  AdapterRuntime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;
  Connector* conn = nullptr;
  std::vector<uint8_t> buf;  // [0, size): the peer writes here; [size, 2*size): what we send
};

/// Waits for `d` (polling the inline core); the request's final status.
NTSTATUS wait(AdapterRuntime& rt, NTSTATUS inline_status, Done& d) {
  if (inline_status != STATUS_PENDING) return inline_status;
  if (!rt.wait_until([&] { return d.done.load(); }, kWait)) return STATUS_IO_TIMEOUT;
  return d.status;
}

NTSTATUS open_endpoint(Endpoint& ep, uint32_t size) {
  AdapterRuntime& rt = *ep.rt;
  ep.buf.assign(2 * size, 0);
  NTSTATUS st = STATUS_SUCCESS;
  rt.run_on_control([&] { st = rt.adapter().create_pd(nullptr, nullptr, &ep.pd); });
  if (st != STATUS_SUCCESS) return st;
  Done cqd, qpd;
  rt.run_on_control(
      [&] { st = rt.adapter().create_cq(64, nullptr, nullptr, 0, &Done::create, &cqd, &ep.cq); });
  if ((st = wait(rt, st, cqd)) != STATUS_SUCCESS) return st;
  ep.cq = ndk_object_cast<Cq>(cqd.object);
  rt.run_on_control([&] {
    st = ep.pd->create_qp(ep.cq, ep.cq, &ep, 4, 16, 1, 1, 0, &Done::create, &qpd, &ep.qp);
  });
  if ((st = wait(rt, st, qpd)) != STATUS_SUCCESS) return st;
  ep.qp = ndk_object_cast<Qp>(qpd.object);
  rt.run_on_control([&] {
    st = ep.pd->create_mr(false, nullptr, nullptr, &ep.mr);
    if (st == STATUS_SUCCESS)
      st = ep.mr->register_mr(ep.buf.data(), ep.buf.size(),
                              NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                              nullptr, nullptr);
  });
  return st;
}

void close_endpoint(Endpoint& ep) {
  AdapterRuntime& rt = *ep.rt;
  auto close_wait = [&](auto* object) {
    if (object == nullptr) return;
    Done d;
    NTSTATUS st = STATUS_SUCCESS;
    rt.run_on_control([&] { st = object->close(&Done::closed, &d); });
    if (st == STATUS_PENDING) rt.wait_until([&] { return d.done.load(); }, kWait);
  };
  close_wait(ep.conn);
  close_wait(ep.qp);
  close_wait(ep.cq);
  close_wait(ep.mr);
  close_wait(ep.pd);
}

RegionInfo local_region(const Endpoint& ep, uint32_t size) {
  return RegionInfo{reinterpret_cast<uint64_t>(ep.buf.data()), ep.mr->get_remote_token(), size};
}

/// The peer's RegionInfo from the connection's private data (the CM carries it padded to the
/// message's private-data size).
NTSTATUS read_private_data(Connector& conn, RegionInfo* out) {
  uint8_t data[256];
  uint32_t len = sizeof data;
  const NTSTATUS st = conn.get_connection_data(nullptr, nullptr, data, &len);
  if (st != STATUS_SUCCESS) return st;
  if (len < sizeof *out) return STATUS_INVALID_PARAMETER;
  std::memcpy(out, data, sizeof *out);
  return STATUS_SUCCESS;
}

uint64_t load_seq(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
bool wait_seq(Endpoint& ep, uint32_t size, uint64_t want) {
  const uint8_t* last = ep.buf.data() + size - 8;
  // The polling core writes the buffer; wait_until's call through std::function keeps the
  // compiler from caching the load.
  return ep.rt->wait_until([&] { return load_seq(last) == want; }, kWait);
}
void fill(uint8_t* p, uint32_t size, uint64_t seq) {
  for (uint32_t k = 0; k + 8 < size; ++k) p[k] = static_cast<uint8_t>(seq * 131 + k);
  std::memcpy(p + size - 8, &seq, 8);
}
bool check(const uint8_t* p, uint32_t size, uint64_t seq) {
  for (uint32_t k = 0; k + 8 < size; ++k)
    if (p[k] != static_cast<uint8_t>(seq * 131 + k)) return false;
  return load_seq(p + size - 8) == seq;
}

/// WRITEs the outbound half to the peer and waits for its completion.
NTSTATUS write_to_peer(Endpoint& ep, const RegionInfo& peer, uint32_t size) {
  NdkSge sge{ep.buf.data() + size, size, ep.mr->get_local_token()};
  NTSTATUS st = ep.qp->write(&ep, &sge, 1, peer.address, peer.token, 0);
  if (st != STATUS_SUCCESS) return st;
  NdkResult r{};
  if (!ep.rt->wait_until([&] { return ep.cq->get_results(&r, 1) == 1; }, kWait))
    return STATUS_IO_TIMEOUT;
  return r.status;
}

int run(bool server, const std::string& socket, const std::string& prefix, uint32_t iterations,
        uint32_t size) {
  OpenOptions options;
  options.program = "write_pingpong";
  options.launch_cores = false;
  std::string error;
  auto rt = open_adapter(make_config(server, socket, prefix), options, &error);
  if (!rt) return fail(("open_adapter: " + error).c_str());
  const PortInfo port = rt->port();
  std::printf("%s: adapter up on %s (%u cores)\n", server ? "server" : "client", port.name.c_str(),
              rt->adapter().core_count());
  Endpoint ep;
  ep.rt = rt.get();
  NTSTATUS st = open_endpoint(ep, size);
  if (st != STATUS_SUCCESS) return fail("endpoint", st);
  const RegionInfo mine = local_region(ep, size);
  RegionInfo peer{};
  constexpr uint16_t kNdPort = 7100;
  const uint32_t server_ip = (port.ip & ~0xFFu) | 1;

  if (server) {
    // Listen; the ConnectEvent (control thread) hands over the connector.
    std::atomic<NdkConnector*> incoming{nullptr};
    Listener* listener = nullptr;
    rt->run_on_control([&] {
      st = create_listener(
          rt->adapter(),
          [](void* c, NdkConnector* n) { static_cast<std::atomic<NdkConnector*>*>(c)->store(n); },
          &incoming, nullptr, nullptr, &listener);
      if (st == STATUS_SUCCESS) st = listener->listen(NdkSockAddr{0, kNdPort}, nullptr, nullptr);
    });
    if (st != STATUS_SUCCESS) return fail("listen", st);
    std::printf("server: listening on port %u\n", kNdPort);
    std::fflush(stdout);
    if (!rt->wait_until([&] { return incoming.load() != nullptr; }, std::chrono::seconds(60)))
      return fail("no client connected");
    ep.conn = Connector::from(incoming.load());
    Done accepted;
    std::atomic<bool> disconnected{false};
    rt->run_on_control([&] {
      st = read_private_data(*ep.conn, &peer);
      if (st == STATUS_SUCCESS)
        st = ep.conn->accept(
            ep.qp, 0, 0, &mine, sizeof mine,
            [](void* c) { static_cast<std::atomic<bool>*>(c)->store(true); }, &disconnected,
            &Done::request, &accepted);
    });
    if ((st = wait(*rt, st, accepted)) != STATUS_SUCCESS) return fail("accept", st);
    rt->run_on_control([&] { listener->close(nullptr, nullptr); });
    for (uint64_t i = 1; i <= iterations; ++i) {
      if (!wait_seq(ep, size, i)) return fail("message did not arrive");
      if (!check(ep.buf.data(), size, i)) return fail("message bytes differ");
      std::memcpy(ep.buf.data() + size, ep.buf.data(), size);
      if ((st = write_to_peer(ep, peer, size)) != STATUS_SUCCESS) return fail("WRITE back", st);
    }
    // The client ends the connection.
    if (!rt->wait_until([&] { return disconnected.load(); }, kWait))
      return fail("client did not disconnect");
    std::printf("server: %u messages of %u bytes checked and returned\n", iterations, size);
  } else {
    Done connected, completed;
    rt->run_on_control([&] {
      st = create_connector(rt->adapter(), nullptr, nullptr, &ep.conn);
      if (st == STATUS_SUCCESS)
        st = ep.conn->connect(ep.qp, NdkSockAddr{0, 0}, NdkSockAddr{server_ip, kNdPort}, 0, 0,
                              &mine, sizeof mine, &Done::request, &connected);
    });
    if ((st = wait(*rt, st, connected)) != STATUS_SUCCESS) return fail("connect", st);
    rt->run_on_control([&] {
      st = read_private_data(*ep.conn, &peer);
      if (st == STATUS_SUCCESS)
        st = ep.conn->complete_connect(nullptr, nullptr, &Done::request, &completed);
    });
    if ((st = wait(*rt, st, completed)) != STATUS_SUCCESS) return fail("complete connect", st);
    std::vector<double> rtt_us;
    for (uint64_t i = 1; i <= iterations; ++i) {
      fill(ep.buf.data() + size, size, i);
      const auto t0 = Clock::now();
      if ((st = write_to_peer(ep, peer, size)) != STATUS_SUCCESS) return fail("WRITE", st);
      if (!wait_seq(ep, size, i)) return fail("echo did not arrive");
      rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (!check(ep.buf.data(), size, i)) return fail("echo bytes differ");
    }
    std::sort(rtt_us.begin(), rtt_us.end());
    std::printf(
        "client: %u round trips of %u bytes, every byte checked; median %.1f us (min %.1f, max "
        "%.1f)\n",
        iterations, size, rtt_us[rtt_us.size() / 2], rtt_us.front(), rtt_us.back());
    Done d;
    rt->run_on_control([&] { st = ep.conn->disconnect(&Done::request, &d); });
    wait(*rt, st, d);
  }
  close_endpoint(ep);
  if (!rt->stop()) return fail("stop");
  std::printf("%s: PASS\n", server ? "server" : "client");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string role, socket, prefix;
  uint32_t iterations = 1000, size = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--role")
      role = v;
    else if (a == "--socket")
      socket = v;
    else if (a == "--prefix")
      prefix = v;
    else if (a == "--iterations")
      iterations = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    else if (a == "--size")
      size = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
  }
  if ((role != "server" && role != "client") || socket.empty() || iterations == 0 || size < 16 ||
      size > 1024) {
    std::fprintf(stderr,
                 "usage: write_pingpong --role server|client --socket PATH [--iterations N] "
                 "[--size 16..1024] [--prefix NAME]\n");
    return 2;
  }
  return run(role == "server", socket, prefix, iterations, size);
}
