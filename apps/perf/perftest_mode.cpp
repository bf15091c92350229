// rocedp-perf --perftest: the runs and perftest's output table (perftest_exchange.hpp has the
// exchange). The endpoint is one rocedp runtime with inline polling (as the rest of rocedp-perf):
// every wait below keeps the core polling, so the peer's traffic is answered meanwhile.

#include "apps/perf/perftest_mode.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rte_cycles.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/perf_util.hpp"
#include "apps/perf/perftest_exchange.hpp"
#include "config/config.hpp"
#include "control/control_thread.hpp"
#include "control/neighbour_table.hpp"
#include "control/runtime.hpp"
#include "pmd/log.hpp"
#include "pmd/port.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"

namespace rocedp::perf {
namespace {

using control::Runtime;

enum class Op { kWrite, kRead, kSend };
enum class Kind { kBw, kLat };

struct Options {
  bool server = true;
  std::string host;
  bool rdma_cm = false;
  uint16_t port = kPerftestPort;
  Op op = Op::kWrite;
  Kind kind = Kind::kBw;
  bool have_op = false, have_kind = false;
  uint64_t size = 0;
  bool size_set = false;
  uint64_t iters = 0;
  uint32_t duration_s = 0;
  uint32_t qps = 1;
  uint32_t tx_depth = 0;
  bool report_gbits = false;
  bool all_sizes = false;
  uint32_t timeout_s = 120;
  std::string dump_file;  // rocedp extension: the received region after the run
  // endpoint (as rocedp-perf's)
  std::string config_file, devargs, ip_cidr, mac, file_prefix, log_level = "warning";
  uint16_t mtu = 1500;
  unsigned lcore = 0, memory_mb = 512;
};

[[noreturn]] void usage(int status) {
  std::fprintf(
      status == 0 ? stdout : stderr,
      "usage: rocedp-perf --perftest [HOST] [endpoint] write|read|send bw|lat [perftest options]\n"
      "  without HOST: the server (like ib_write_bw with no host); with HOST: the client\n"
      "endpoint: --config FILE | --port-devargs DEVARGS --ip A.B.C.D/NN [--mac MAC] [--mtu N]\n"
      "          [--lcore N] [--file-prefix P] [--memory-mb MB] [--log-level L]\n"
      "perftest: -R (rdma_cm)  -p PORT (18515)  -s SIZE  -n ITERS  -D SECONDS  -q QPS  -t "
      "TX_DEPTH\n"
      "          -a  --report_gbits  -F  (-d DEV, -x GID, -i PORT, -m MTU, -c RC: accepted, not "
      "needed)\n"
      "rocedp:   --timeout SECONDS (whole run, default 120)  --dump-recv FILE (received region)\n");
  std::exit(status);
}

Options parse(int argc, char** argv) {
  Options o;
  auto need = [&](int& i) -> const char* {
    if (i + 1 >= argc) usage(2);
    return argv[++i];
  };
  auto num = [&](int& i) {
    uint64_t v = 0;
    if (!parse_u64(need(i), &v)) usage(2);
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--perftest" || a == "-F") continue;
    if (a == "-R" || a == "--rdma_cm")
      o.rdma_cm = true;
    else if (a == "-p" || a == "--port")
      o.port = static_cast<uint16_t>(num(i));
    else if (a == "-s" || a == "--size")
      o.size = num(i), o.size_set = true;
    else if (a == "-n" || a == "--iters")
      o.iters = num(i);
    else if (a == "-D" || a == "--duration")
      o.duration_s = static_cast<uint32_t>(num(i));
    else if (a == "-q" || a == "--qp")
      o.qps = static_cast<uint32_t>(num(i));
    else if (a == "-t" || a == "--tx-depth")
      o.tx_depth = static_cast<uint32_t>(num(i));
    else if (a == "-a" || a == "--all")
      o.all_sizes = true;
    else if (a == "--report_gbits")
      o.report_gbits = true;
    else if (a == "-d" || a == "-x" || a == "-i" || a == "-m" || a == "-c" || a == "--ib-dev" ||
             a == "--gid-index")
      need(i);
    else if (a == "--timeout")
      o.timeout_s = static_cast<uint32_t>(num(i));
    else if (a == "--dump-recv")
      o.dump_file = need(i);
    else if (a == "--config")
      o.config_file = need(i);
    else if (a == "--port-devargs")
      o.devargs = need(i);
    else if (a == "--ip")
      o.ip_cidr = need(i);
    else if (a == "--mac")
      o.mac = need(i);
    else if (a == "--mtu")
      o.mtu = static_cast<uint16_t>(num(i));
    else if (a == "--lcore")
      o.lcore = static_cast<unsigned>(num(i));
    else if (a == "--file-prefix")
      o.file_prefix = need(i);
    else if (a == "--memory-mb")
      o.memory_mb = static_cast<unsigned>(num(i));
    else if (a == "--log-level")
      o.log_level = need(i);
    else if (a == "-h" || a == "--help")
      usage(0);
    else if (a == "write" || a == "read" || a == "send") {
      o.op = a == "write" ? Op::kWrite : a == "read" ? Op::kRead : Op::kSend;
      o.have_op = true;
    } else if (a == "bw" || a == "lat") {
      o.kind = a == "bw" ? Kind::kBw : Kind::kLat;
      o.have_kind = true;
    } else if (!a.empty() && a[0] != '-' && o.host.empty()) {
      o.host = a;
      o.server = false;
    } else {
      std::fprintf(stderr, "rocedp-perf --perftest: unknown argument %s\n", a.c_str());
      usage(2);
    }
  }
  if (!o.have_op || !o.have_kind) usage(2);
  if (o.config_file.empty() && (o.devargs.empty() || o.ip_cidr.empty())) usage(2);
  const bool bw = o.kind == Kind::kBw;
  if (!o.size_set) o.size = bw ? 65536 : 2;
  if (o.iters == 0) o.iters = bw ? 5000 : 1000;
  if (o.tx_depth == 0) o.tx_depth = bw ? 128 : 1;
  if (o.qps == 0 || o.size == 0 || o.size > (1u << 23) || o.iters == 0) usage(2);
  if (!bw && o.qps != 1) {
    std::fprintf(stderr, "rocedp-perf --perftest: latency tests use one QP (as perftest)\n");
    usage(2);
  }
  if (o.all_sizes && bw && o.op == Op::kSend) {
    std::fprintf(stderr, "rocedp-perf --perftest: -a with send bw is not supported\n");
    usage(2);
  }
  if (o.file_prefix.empty()) o.file_prefix = "rocedp-perftest-" + std::to_string(getpid());
  return o;
}

config::Config build_config(const Options& o, std::string* err) {
  config::Config cfg;
  if (!o.config_file.empty()) {
    try {
      cfg = config::load_file(o.config_file);
    } catch (const config::ConfigError& e) {
      *err = e.what();
      return cfg;
    }
    cfg.listeners.clear();
    if (std::find(cfg.eal.extra_args.begin(), cfg.eal.extra_args.end(), "--no-pci") ==
        cfg.eal.extra_args.end())
      cfg.eal.extra_args.push_back("--no-pci");
  } else {
    config::PortConfig p;
    p.name = "perf0";
    p.devargs = o.devargs;
    const auto slash = o.ip_cidr.find('/');
    const auto ip = config::parse_ipv4(o.ip_cidr.substr(0, slash));
    if (!ip) {
      *err = "bad --ip " + o.ip_cidr;
      return cfg;
    }
    p.address = *ip;
    p.prefix_len = slash == std::string::npos
                       ? 24
                       : static_cast<uint8_t>(std::atoi(o.ip_cidr.c_str() + slash + 1));
    if (!o.mac.empty()) {
      const auto mac = config::parse_mac(o.mac);
      if (!mac) {
        *err = "bad --mac " + o.mac;
        return cfg;
      }
      p.mac = *mac;
    }
    p.mtu = o.mtu;
    cfg.ports.push_back(p);
    cfg.eal.memory_mb = o.memory_mb;
    cfg.eal.hugepages = false;
    cfg.eal.file_prefix = o.file_prefix;
    cfg.eal.extra_args = {"--no-pci"};
    cfg.dataplane.mbuf_count = 16383;
    cfg.eal.main_lcore = o.lcore;
  }
  cfg.eal.lcores = {cfg.eal.main_lcore};
  cfg.dataplane.lcores = {cfg.eal.main_lcore};
  cfg.eal.extra_args.push_back("--no-telemetry");
  cfg.telemetry.enabled = false;
  cfg.telemetry.stats_interval_ms = 1000;
  return cfg;
}

// ------------------------------------------------------------------------------------------------
// Waiting while the core keeps polling.

struct Clock {
  uint64_t deadline = UINT64_MAX;
  bool timed_out = false;
  bool past() {
    if (rte_rdtsc() > deadline) timed_out = true;
    return timed_out;
  }
};

void keep_polling(Runtime& rt) {
  for (int k = 0; k < 64 && rt.poll(); ++k) {
  }
}

double tsc_us(uint64_t cycles) {
  return static_cast<double>(cycles) * 1e6 / static_cast<double>(rte_get_tsc_hz());
}

struct Pending {
  std::atomic<int> done{0};
  std::atomic<NTSTATUS> status{STATUS_PENDING};
  NdkObjectHeader* object = nullptr;
};
void on_created(void* c, NTSTATUS s, NdkObjectHeader* o) {
  auto* p = static_cast<Pending*>(c);
  p->object = o;
  p->status.store(s);
  p->done.store(1, std::memory_order_release);
}
void on_request(void* c, NTSTATUS s) {
  auto* p = static_cast<Pending*>(c);
  p->status.store(s);
  p->done.store(1, std::memory_order_release);
}

// Runs start() on the control thread; waits for its completion when it returned PENDING.
NTSTATUS call_and_wait(Runtime& rt, Pending& p, const std::function<NTSTATUS()>& start,
                       int timeout_ms = 10000) {
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] { st = start(); });
  if (st != STATUS_PENDING) return st;
  if (!rt.wait_until([&] { return p.done.load(std::memory_order_acquire) != 0; },
                     std::chrono::milliseconds(timeout_ms)))
    return STATUS_IO_TIMEOUT;
  return p.status.load();
}

// ------------------------------------------------------------------------------------------------
// Exchange channels.

class TcpChannel : public PerftestChannel {
 public:
  TcpChannel(Runtime& rt, Clock& clock) : rt_(rt), clock_(clock) {}
  ~TcpChannel() override {
    if (fd_ >= 0) close(fd_);
  }
  bool listen_and_accept(uint16_t port, std::string* err) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) return fail(err, "socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(ls, 1) != 0) {
      close(ls);
      return fail(err, "bind/listen on TCP port " + std::to_string(port));
    }
    for (;;) {
      pollfd p{ls, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) break;
      keep_polling(rt_);
      usleep(200);
      if (clock_.past()) {
        close(ls);
        return fail(err, "no client connected in time");
      }
    }
    fd_ = accept(ls, nullptr, nullptr);
    close(ls);
    if (fd_ < 0) return fail(err, "accept");
    return setup();
  }
  bool connect_to(const std::string& host, uint16_t port, std::string* err) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) return fail(err, "bad host " + host);
    while (!clock_.past()) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      if (fd_ < 0) return fail(err, "socket");
      if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return setup();
      close(fd_);
      fd_ = -1;
      rt_.wait_until([] { return false; }, std::chrono::milliseconds(100));
    }
    return fail(err, "cannot connect to " + host + ":" + std::to_string(port));
  }
  bool write(const void* data, size_t len, std::string* err) override {
    const auto* b = static_cast<const uint8_t*>(data);
    while (len > 0) {
      const ssize_t n = ::send(fd_, b, len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail(err, "TCP write");
      b += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }
  bool read(void* data, size_t len, std::string* err) override {
    auto* b = static_cast<uint8_t*>(data);
    size_t got = 0;
    uint32_t spins = 0;
    while (got < len) {
      const ssize_t n = recv(fd_, b + got, len - got, MSG_DONTWAIT);
      if (n > 0) {
        got += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) return fail(err, "the peer closed the TCP exchange");
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return fail(err, "TCP read");
      keep_polling(rt_);
      if ((++spins & 0xFF) == 0 && clock_.past())
        return fail(err, "time limit reached in the TCP exchange");
    }
    return true;
  }

 private:
  bool setup() {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return true;
  }
  static bool fail(std::string* err, const std::string& why) {
    *err = why + (errno ? std::string(": ") + std::strerror(errno) : "");
    return false;
  }
  Runtime& rt_;
  Clock& clock_;
  int fd_ = -1;
};

// perftest's rdma_cm control QP: one SEND at a time (perftest waits for each SEND's completion),
// receives of kSlot bytes always posted.
class QpChannel : public PerftestChannel {
 public:
  static constexpr uint32_t kSlot = 64, kRecvSlots = 4;
  QpChannel(Runtime& rt, Clock& clock)
      : rt_(rt), clock_(clock), buf_((1 + kRecvSlots) * kSlot, 0) {}
  std::vector<uint8_t>& buffer() { return buf_; }
  void attach(Qp* qp, Cq* cq, Mr* mr) {
    qp_ = qp;
    cq_ = cq;
    mr_ = mr;
  }
  bool post_receives() {
    for (uint32_t s = 1; s <= kRecvSlots; ++s)
      if (post_recv(s) != STATUS_SUCCESS) return false;
    return true;
  }
  bool write(const void* data, size_t len, std::string* err) override {
    std::memcpy(buf_.data(), data, len);
    NdkSge sge{buf_.data(), static_cast<uint32_t>(len), mr_->get_local_token()};
    const NTSTATUS st = qp_->send(nullptr, &sge, 1, 0);
    if (st != STATUS_SUCCESS) return fail(err, "control SEND: " + std::string(status_name(st)));
    sent_done_ = false;
    while (!sent_done_) {
      if (!drain(err)) return false;
    }
    return true;
  }
  bool read(void* data, size_t len, std::string* err) override {
    while (arrived_.empty()) {
      if (!drain(err)) return false;
    }
    const auto [slot, bytes] = arrived_.front();
    arrived_.pop_front();
    if (bytes != len)
      return fail(err, "control message of " + std::to_string(bytes) + " bytes, wanted " +
                           std::to_string(len));
    std::memcpy(data, buf_.data() + slot * kSlot, len);
    if (post_recv(slot) != STATUS_SUCCESS) return fail(err, "control receive");
    return true;
  }

 private:
  NTSTATUS post_recv(uint32_t slot) {
    NdkSge sge{buf_.data() + slot * kSlot, kSlot, mr_->get_local_token()};
    return qp_->receive(reinterpret_cast<void*>(static_cast<uintptr_t>(slot)), &sge, 1);
  }
  bool drain(std::string* err) {
    keep_polling(rt_);
    NdkResultEx r[8];
    const uint32_t n = cq_->get_results_ex(r, 8);
    for (uint32_t k = 0; k < n; ++k) {
      if (r[k].status != STATUS_SUCCESS)
        return fail(err, "control QP completion " + std::string(status_name(r[k].status)));
      if (r[k].type == NdkOperationType::kReceive)
        arrived_.emplace_back(
            static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r[k].request_context)),
            r[k].bytes_transferred);
      else
        sent_done_ = true;
    }
    if (n == 0 && (++spins_ & 0xFF) == 0 && clock_.past())
      return fail(err, "time limit reached in the rdma_cm exchange");
    return true;
  }
  static bool fail(std::string* err, const std::string& why) {
    *err = why;
    return false;
  }
  Runtime& rt_;
  Clock& clock_;
  std::vector<uint8_t> buf_;
  Qp* qp_ = nullptr;
  Cq* cq_ = nullptr;
  Mr* mr_ = nullptr;
  bool sent_done_ = false;
  uint32_t spins_ = 0;
  std::deque<std::pair<uint32_t, uint32_t>> arrived_;
};

// ------------------------------------------------------------------------------------------------
// rdma_cm connections (NDK connectors).

constexpr uint32_t kMaxConnections = 64;

struct Incoming {
  std::array<NdkConnector*, kMaxConnections> slots{};
  std::atomic<uint32_t> count{0};
};
void on_connect_event(void* ctx, NdkConnector* nc) {
  auto* in = static_cast<Incoming*>(ctx);
  const uint32_t n = in->count.load(std::memory_order_relaxed);
  if (n >= kMaxConnections) {
    Connector* c = Connector::from(nc);
    c->reject(nullptr, 0);
    c->close(nullptr, nullptr);
    return;
  }
  in->slots[n] = nc;
  in->count.store(n + 1, std::memory_order_release);
}
void on_disconnect(void* ctx, NTSTATUS) {
  static_cast<std::atomic<int>*>(ctx)->store(1);
}

// ------------------------------------------------------------------------------------------------
// One run.

struct Session {
  Options o;
  Runtime* rt = nullptr;
  Clock clock;
  bool client = false;
  Pd* pd = nullptr;
  Cq* cq = nullptr;  // data QPs
  Mr* mr = nullptr;
  std::vector<uint8_t> buf;  // [0, half): what we send / READ into; [half, ...): the peer's target
  uint64_t half = 0;
  std::vector<Qp*> qps;
  uint32_t rx_depth = 1;
  uint32_t qp_depth = 1;
  uint32_t path_mtu = 1024;
  std::vector<PerftestKey> mine, peer;
  // rdma_cm
  Cq* ccq = nullptr;
  Qp* cqp = nullptr;
  Mr* cmr = nullptr;
  std::unique_ptr<QpChannel> qch;
  std::unique_ptr<TcpChannel> tch;
  PerftestChannel* ch = nullptr;
  Listener* listener = nullptr;
  Incoming incoming;
  std::vector<Connector*> connectors;  // control first
  std::unique_ptr<std::atomic<int>[]> gone;
  std::vector<Pending> pend_accept;
};

bool fail(const std::string& what) {
  std::fprintf(stderr, "rocedp-perf --perftest: %s\n", what.c_str());
  return false;
}

bool create_cq(Session& s, uint32_t depth, Cq** out) {
  Pending p;
  const NTSTATUS st = call_and_wait(*s.rt, p, [&] {
    return s.rt->adapter()->create_cq(depth, nullptr, nullptr, 0, &on_created, &p, out);
  });
  if (st != STATUS_SUCCESS) return fail("create_cq: " + std::string(status_name(st)));
  if (p.object != nullptr) *out = ndk_object_cast<Cq>(p.object);
  return true;
}

bool create_qp(Session& s, Cq* cq, uint32_t rx, uint32_t tx, uintptr_t ctx, Qp** out) {
  Pending p;
  const NTSTATUS st = call_and_wait(*s.rt, p, [&] {
    return s.pd->create_qp(cq, cq, reinterpret_cast<void*>(ctx), rx, tx, 1, 1, 0, &on_created, &p,
                           out);
  });
  if (st != STATUS_SUCCESS) return fail("create_qp: " + std::string(status_name(st)));
  if (p.object != nullptr) *out = ndk_object_cast<Qp>(p.object);
  return true;
}

bool register_region(Session& s, std::vector<uint8_t>& b, Mr** out) {
  NTSTATUS st = STATUS_PENDING;
  s.rt->run_on_control([&] {
    st = s.pd->create_mr(false, nullptr, nullptr, out);
    if (st == STATUS_SUCCESS)
      st = (*out)->register_mr(b.data(), b.size(),
                               NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                   NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                               nullptr, nullptr);
  });
  if (st != STATUS_SUCCESS) return fail("register_mr: " + std::string(status_name(st)));
  return true;
}

uint64_t max_size(const Options& o) {
  return o.all_sizes ? (1ull << 23) : o.size;
}

bool setup_objects(Session& s) {
  const auto& lim = s.rt->config().limits;
  const bool bw = s.o.kind == Kind::kBw;
  s.qp_depth = std::min(std::max<uint32_t>(s.o.tx_depth, 2), lim.max_qp_depth);
  s.rx_depth = s.o.op == Op::kSend ? std::min<uint32_t>(bw ? 512 : 16, lim.max_qp_depth) : 1;
  NTSTATUS st = STATUS_PENDING;
  s.rt->run_on_control([&] { st = s.rt->adapter()->create_pd(nullptr, nullptr, &s.pd); });
  if (st != STATUS_SUCCESS) return fail("create_pd: " + std::string(status_name(st)));
  const uint64_t want = static_cast<uint64_t>(s.o.qps) * (s.qp_depth + s.rx_depth) + 64;
  if (!create_cq(s,
                 static_cast<uint32_t>(
                     std::min<uint64_t>(lim.max_cq_depth, std::max<uint64_t>(want, 256))),
                 &s.cq))
    return false;
  // Page-rounded halves; the upper one has room for perftest's cycling through its cycle buffer.
  s.half = (max_size(s.o) + 4095) / 4096 * 4096;
  s.buf.assign(2 * s.half + 8192, 0);
  for (uint64_t k = 0; k < s.half; ++k)
    s.buf[k] = static_cast<uint8_t>(k * 131 + 7);  // what we send
  // --dump-recv: the peer's target starts as a pattern no perftest buffer holds, so a byte the
  // peer never wrote shows in the dump.
  if (!s.o.dump_file.empty())
    std::fill(s.buf.begin() + s.half, s.buf.begin() + s.half + max_size(s.o), 0x5A);
  if (!register_region(s, s.buf, &s.mr)) return false;
  s.qps.assign(s.o.qps, nullptr);
  for (uint32_t i = 0; i < s.o.qps; ++i)
    if (!create_qp(s, s.cq, s.rx_depth, s.qp_depth, i, &s.qps[i])) return false;
  if (s.o.rdma_cm) {
    if (!create_cq(s, 64, &s.ccq)) return false;
    s.qch = std::make_unique<QpChannel>(*s.rt, s.clock);
    if (!register_region(s, s.qch->buffer(), &s.cmr)) return false;
    if (!create_qp(s, s.ccq, QpChannel::kRecvSlots, 4, 0, &s.cqp)) return false;
    s.qch->attach(s.cqp, s.ccq, s.cmr);
  }
  return true;
}

// Receives of SEND tests, posted before the peer may send.
bool post_data_receives(Session& s) {
  if (s.o.op != Op::kSend) return true;
  for (uint32_t q = 0; q < s.o.qps; ++q)
    for (uint32_t k = 0; k < s.rx_depth; ++k) {
      NdkSge sge{s.buf.data() + s.half, static_cast<uint32_t>(max_size(s.o)),
                 s.mr->get_local_token()};
      if (s.qps[q]->receive(nullptr, &sge, 1) != STATUS_SUCCESS)
        return fail("posting receives failed");
    }
  return true;
}

void fill_keys(Session& s) {
  const uint32_t irl = s.rt->config().limits.max_read_limit;
  s.mine.assign(s.o.qps, PerftestKey{});
  for (uint32_t i = 0; i < s.o.qps; ++i) {
    PerftestKey& k = s.mine[i];
    k.out_reads = s.o.op == Op::kRead ? irl : 1;
    k.qpn = s.qps[i]->qpn();
    k.psn = static_cast<uint32_t>(
        (rte_rdtsc() * 2654435761u + k.qpn + static_cast<uint32_t>(getpid())) & 0xFFFFFF);
    k.rkey = s.mr->get_remote_token();
    k.vaddr = reinterpret_cast<uint64_t>(s.buf.data() + s.half);
    k.set_ipv4(s.rt->port().address().value);
    k.gid_index = 1;
  }
}

bool xchg_key(Session& s, uint32_t i, PerftestKey* theirs, std::string* err) {
  if (s.o.rdma_cm) {
    uint8_t mine[kKeyStructSize], peer[kKeyStructSize];
    encode_key_struct(s.mine[i], mine);
    if (!exchange(*s.ch, s.client, mine, peer, sizeof(mine), err)) return false;
    return decode_key_struct(peer, sizeof(peer), theirs) || (*err = "bad key", false);
  }
  uint8_t mine[kKeyTextSize], peer[kKeyTextSize];
  encode_key_text(s.mine[i], mine);
  if (!exchange(*s.ch, s.client, mine, peer, sizeof(mine), err)) return false;
  if (!decode_key_text(peer, sizeof(peer), theirs))
    return (*err = "the peer's key is not a RoCE (GID) key"), false;
  return true;
}

// TCP exchange: the QPs go to RTR/RTS with the peer's QPN and PSN (perftest: our sq_psn is the PSN
// we sent, the peer's is our rq_psn), to the MAC ARP finds for the peer GID's IPv4 address.
bool connect_qps_oob(Session& s) {
  const uint32_t ip = s.peer[0].ipv4();
  if (ip == 0) return fail("the peer's GID is not an IPv4-mapped address (RoCEv2 over IPv4 only)");
  struct Resolved {
    std::atomic<int> done{0};
    bool reachable = false;
    uint8_t mac[6] = {};
  } r;
  s.rt->run_on_control([&] {
    config::Ipv4Address a;
    a.value = ip;
    s.rt->control()->neighbour_table_st(0).resolve(a, control::NeighbourClock::now(),
                                                   [&r](const control::ResolveResult& res) {
                                                     r.reachable = res.reachable;
                                                     std::memcpy(r.mac, res.mac.bytes.data(), 6);
                                                     r.done.store(1, std::memory_order_release);
                                                   });
  });
  if (!s.rt->wait_until([&] { return r.done.load(std::memory_order_acquire) != 0; },
                        std::chrono::seconds(10)) ||
      !r.reachable)
    return fail("ARP: " + config::format_ipv4(config::Ipv4Address{ip}) + " did not answer");
  const uint32_t limit = s.rt->config().limits.max_read_limit;
  for (uint32_t i = 0; i < s.o.qps; ++i) {
    NdkQpConnectParams p;
    p.remote_qpn = s.peer[i].qpn;
    p.remote_ip = s.peer[i].ipv4();
    std::memcpy(p.remote_mac, r.mac, 6);
    p.path_mtu = s.path_mtu;
    p.local_psn = s.mine[i].psn;
    p.remote_psn = s.peer[i].psn;
    p.local_ack_timeout = 14;
    p.min_rnr_timer = 12;
    p.inbound_read_limit = limit;
    p.outbound_read_limit = std::max<uint32_t>(1, std::min(limit, s.peer[i].out_reads));
    Pending pd;
    const NTSTATUS st =
        call_and_wait(*s.rt, pd, [&] { return s.qps[i]->connect(p, &on_request, &pd); });
    if (st != STATUS_SUCCESS) return fail("QP connect: " + std::string(status_name(st)));
  }
  return true;
}

// -R, server side: the first connection request is perftest's control connection.
bool accept_one(Session& s, uint32_t index, Qp* qp) {
  if (!s.rt->wait_until(
          [&] {
            return s.incoming.count.load(std::memory_order_acquire) > index || s.clock.past();
          },
          std::chrono::seconds(s.o.timeout_s)) ||
      s.incoming.count.load() <= index)
    return fail("rdma_cm: connection request " + std::to_string(index) + " did not come");
  Connector* c = Connector::from(s.incoming.slots[index]);
  s.connectors.push_back(c);
  const uint32_t limit = s.rt->config().limits.max_read_limit;
  Pending& p = s.pend_accept[index];
  const NTSTATUS st = call_and_wait(*s.rt, p, [&] {
    return c->accept_ex(qp, limit, limit, nullptr, 0, &on_disconnect, &s.gone[index], &on_request,
                        &p);
  });
  // accept completes on the RTU (or the peer's first packet); perftest's client sends at once.
  if (st != STATUS_SUCCESS) return fail("rdma_cm accept: " + std::string(status_name(st)));
  return true;
}

// -R, client side: connect (retrying while the server is not listening yet), then complete.
bool connect_one(Session& s, uint32_t index, Qp* qp) {
  const uint32_t limit = s.rt->config().limits.max_read_limit;
  const NdkSockAddr dst{0, s.o.port};
  NdkSockAddr to = dst;
  const auto ip = config::parse_ipv4(s.o.host);
  to.ip = ip->value;
  for (int attempt = 0;; ++attempt) {
    Connector* c = nullptr;
    Pending p;
    NTSTATUS st = call_and_wait(
        *s.rt, p,
        [&] {
          NTSTATUS x = create_connector(*s.rt->adapter(), nullptr, nullptr, &c);
          if (x == STATUS_SUCCESS)
            x = c->connect(qp, NdkSockAddr{0, 0}, to, limit, limit, nullptr, 0, &on_request, &p);
          return x;
        },
        30000);
    if (st == STATUS_SUCCESS) {
      Pending q;
      st = call_and_wait(*s.rt, q, [&] {
        return c->complete_connect_ex(&on_disconnect, &s.gone[index], &on_request, &q);
      });
      if (st == STATUS_SUCCESS) {
        s.connectors.push_back(c);
        return true;
      }
    }
    if (c != nullptr) s.rt->run_on_control([&] { c->close(nullptr, nullptr); });
    if (st != STATUS_CONNECTION_REFUSED || attempt >= 50 || s.clock.past())
      return fail("rdma_cm connect to " + s.o.host + ":" + std::to_string(s.o.port) + ": " +
                  std::string(status_name(st)));
    s.rt->wait_until([] { return false; }, std::chrono::milliseconds(200));
  }
}

void disconnect_all(Session& s) {
  std::vector<Pending> p(s.connectors.size());
  std::vector<NTSTATUS> st(s.connectors.size(), STATUS_SUCCESS);
  s.rt->run_on_control([&] {
    for (size_t i = 0; i < s.connectors.size(); ++i)
      st[i] = s.connectors[i]->disconnect(&on_request, &p[i]);
  });
  s.rt->wait_until(
      [&] {
        for (size_t i = 0; i < p.size(); ++i)
          if (st[i] == STATUS_PENDING && p[i].done.load(std::memory_order_acquire) == 0)
            return false;
        return true;
      },
      std::chrono::seconds(3));
  s.rt->run_on_control([&] {
    for (Connector* c : s.connectors) c->close(nullptr, nullptr);
    if (s.listener != nullptr) s.listener->close(nullptr, nullptr);
  });
  // A Disconnect still pending completes (CANCELLED) before its connector's close: `p` must
  // outlive it.
  s.rt->wait_until(
      [&] {
        for (size_t i = 0; i < p.size(); ++i)
          if (st[i] == STATUS_PENDING && p[i].done.load(std::memory_order_acquire) == 0)
            return false;
        return true;
      },
      std::chrono::seconds(3));
  s.connectors.clear();
  s.listener = nullptr;
}

// ------------------------------------------------------------------------------------------------
// The measured runs.

struct BwResult {
  uint64_t size = 0, iters = 0, messages = 0;
  double seconds = 0, peak_msgs_per_s = 0;
};

struct PeakMeter {
  uint64_t start = 0, count = 0, window = 0;
  double peak = 0;
  void begin(uint64_t now) {
    start = now;
    window = rte_get_tsc_hz() / 100;
  }
  void add(uint64_t n, uint64_t now) {
    count += n;
    if (now - start >= window) {
      peak = std::max(peak, static_cast<double>(count) * static_cast<double>(rte_get_tsc_hz()) /
                                static_cast<double>(now - start));
      start = now;
      count = 0;
    }
  }
};

// Client bandwidth: up to tx_depth requests in flight per QP, iters per QP (or -D seconds).
bool run_bw_client(Session& s, uint64_t size, BwResult* out) {
  const uint32_t nq = s.o.qps;
  std::vector<uint32_t> inflight(nq, 0);
  std::vector<uint64_t> posted(nq, 0);
  uint64_t total_posted = 0, done = 0;
  NdkResultEx r[64];
  PeakMeter peak;
  const uint64_t t0 = rte_rdtsc();
  peak.begin(t0);
  const uint64_t stop = s.o.duration_s ? t0 + s.o.duration_s * rte_get_tsc_hz() : UINT64_MAX;
  bool posting = true;
  const uint64_t raddr_base = 0;
  while (posting || done < total_posted) {
    s.rt->poll();
    if (posting) {
      for (uint32_t q = 0; q < nq; ++q) {
        while (inflight[q] < s.qp_depth && (s.o.duration_s || posted[q] < s.o.iters)) {
          NdkSge sge{s.buf.data(), static_cast<uint32_t>(size), s.mr->get_local_token()};
          const uint64_t raddr = s.peer[q].vaddr + raddr_base;
          NTSTATUS st =
              s.o.op == Op::kWrite  ? s.qps[q]->write(nullptr, &sge, 1, raddr, s.peer[q].rkey, 0)
              : s.o.op == Op::kRead ? s.qps[q]->read(nullptr, &sge, 1, raddr, s.peer[q].rkey, 0)
                                    : s.qps[q]->send(nullptr, &sge, 1, 0);
          if (st == STATUS_INSUFFICIENT_RESOURCES) break;
          if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
          ++inflight[q];
          ++posted[q];
          ++total_posted;
        }
      }
      if (s.o.duration_s ? rte_rdtsc() >= stop : total_posted == s.o.iters * nq) posting = false;
    }
    const uint32_t n = s.cq->get_results_ex(r, 64);
    for (uint32_t k = 0; k < n; ++k) {
      if (r[k].status != STATUS_SUCCESS)
        return fail("completion error " + std::string(status_name(r[k].status)));
      const auto q = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r[k].qp_context));
      if (r[k].type == NdkOperationType::kReceive) continue;
      --inflight[q];
      ++done;
    }
    if (n) peak.add(n, rte_rdtsc());
    if (s.clock.past())
      return fail("time limit reached with " + std::to_string(total_posted - done) +
                  " requests outstanding");
  }
  out->size = size;
  out->iters = s.o.duration_s ? done / nq : s.o.iters;
  out->messages = done;
  out->seconds = tsc_us(rte_rdtsc() - t0) / 1e6;
  out->peak_msgs_per_s = peak.peak;
  return true;
}

// SEND bandwidth, server: count the messages of every QP, keeping receives posted.
bool run_bw_server_send(Session& s, uint64_t size, BwResult* out) {
  const uint64_t want = s.o.iters * s.o.qps;
  uint64_t got = 0, t0 = 0, t_last = 0;
  NdkResultEx r[64];
  PeakMeter peak;
  const uint64_t quiet = rte_get_tsc_hz();  // -D: one second without a message ends the run
  uint64_t last_seen = rte_rdtsc();
  while (s.o.duration_s ? true : got < want) {
    s.rt->poll();
    const uint32_t n = s.cq->get_results_ex(r, 64);
    const uint64_t now = rte_rdtsc();
    for (uint32_t k = 0; k < n; ++k) {
      if (r[k].status != STATUS_SUCCESS)
        return fail("completion error " + std::string(status_name(r[k].status)));
      if (r[k].type != NdkOperationType::kReceive) continue;
      if (got++ == 0) {
        t0 = now;
        peak.begin(now);
      }
      t_last = now;
      last_seen = now;
      peak.add(1, now);
      const auto q = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r[k].qp_context));
      NdkSge sge{s.buf.data() + s.half, static_cast<uint32_t>(max_size(s.o)),
                 s.mr->get_local_token()};
      s.qps[q]->receive(nullptr, &sge, 1);
    }
    if (s.o.duration_s && got > 0 && now - last_seen > quiet) break;
    if (s.clock.past())
      return fail("time limit reached after " + std::to_string(got) + " of " +
                  std::to_string(want) + " messages");
  }
  out->size = size;
  out->iters = s.o.duration_s ? got / s.o.qps : s.o.iters;
  out->messages = got;
  out->seconds =
      got > 1 ? tsc_us(t_last - t0) / 1e6 * static_cast<double>(got) / static_cast<double>(got - 1)
              : 0;
  out->peak_msgs_per_s = peak.peak;
  return true;
}

// Latency ping-pongs, as perftest runs them. WRITE: the server writes first; each side waits for
// the last byte of the peer's message to turn to the iteration number before it writes back.
// SEND: the client sends first. READ: the client alone, one READ at a time.
bool run_lat(Session& s, uint64_t size, std::vector<double>* samples) {
  const uint64_t iters = s.o.iters;
  std::vector<uint64_t> posted;
  posted.reserve(iters + 1);
  std::vector<double>& out = *samples;
  out.clear();
  out.reserve(iters);
  Qp* qp = s.qps[0];
  NdkResultEx r[16];
  uint64_t sends_done = 0, recvs = 0;
  const uint64_t stop =
      s.o.duration_s ? rte_rdtsc() + s.o.duration_s * rte_get_tsc_hz() : UINT64_MAX;
  bool failed = false;
  auto drain = [&] {
    s.rt->poll();
    const uint32_t n = s.cq->get_results_ex(r, 16);
    for (uint32_t k = 0; k < n; ++k) {
      if (r[k].status != STATUS_SUCCESS) {
        failed = fail("completion error " + std::string(status_name(r[k].status)));
        continue;
      }
      if (r[k].type == NdkOperationType::kReceive) {
        ++recvs;
        NdkSge sge{s.buf.data() + s.half, static_cast<uint32_t>(max_size(s.o)),
                   s.mr->get_local_token()};
        qp->receive(nullptr, &sge, 1);
      } else {
        ++sends_done;
      }
    }
  };
  NdkSge sge{s.buf.data(), static_cast<uint32_t>(size), s.mr->get_local_token()};
  if (s.o.op == Op::kRead) {
    if (!s.client) return true;  // perftest's READ latency server only takes part in the exchange
    for (uint64_t i = 0; s.o.duration_s ? rte_rdtsc() < stop : i < iters; ++i) {
      const uint64_t t0 = rte_rdtsc();
      const NTSTATUS st = qp->read(nullptr, &sge, 1, s.peer[0].vaddr, s.peer[0].rkey, 0);
      if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
      while (sends_done <= i && !failed) {
        drain();
        if (s.clock.past()) return fail("time limit reached");
      }
      if (failed) return false;
      out.push_back(tsc_us(rte_rdtsc() - t0));
    }
    return true;
  }
  volatile uint8_t* poll_byte = s.buf.data() + s.half + size - 1;
  uint8_t* post_byte = s.buf.data() + size - 1;
  const bool sender_first = s.o.op == Op::kWrite ? !s.client : s.client;
  uint64_t scnt = 0, rcnt = 0;
  const uint64_t wait_limit = s.o.duration_s ? stop + 2 * rte_get_tsc_hz() : UINT64_MAX;
  while (s.o.duration_s ? rte_rdtsc() < stop : (scnt < iters || rcnt < iters)) {
    if ((s.o.duration_s || rcnt < iters) && !(scnt == 0 && sender_first)) {
      ++rcnt;
      if (s.o.op == Op::kWrite) {
        while (*poll_byte != static_cast<uint8_t>(rcnt) && !failed) {
          drain();
          if (s.clock.past() || rte_rdtsc() > wait_limit) break;
        }
      } else {
        while (recvs < rcnt && !failed) {
          drain();
          if (s.clock.past() || rte_rdtsc() > wait_limit) break;
        }
      }
      if (failed) return false;
      if (s.clock.past())
        return fail("time limit reached waiting for message " + std::to_string(rcnt));
      if (rte_rdtsc() > wait_limit) break;
    }
    if (s.o.duration_s || scnt < iters) {
      *post_byte = static_cast<uint8_t>(++scnt);
      posted.push_back(rte_rdtsc());
      NTSTATUS st;
      do {
        st = s.o.op == Op::kWrite ? qp->write(nullptr, &sge, 1, s.peer[0].vaddr, s.peer[0].rkey, 0)
                                  : qp->send(nullptr, &sge, 1, 0);
        if (st == STATUS_INSUFFICIENT_RESOURCES) drain();
      } while (st == STATUS_INSUFFICIENT_RESOURCES && !s.clock.past());
      if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
    }
    drain();
    if (failed) return false;
  }
  // Let the last requests complete (their ACKs), so the exchange that follows finds a quiet QP.
  while (sends_done < scnt && !failed && !s.clock.past()) drain();
  if (failed) return false;
  // perftest: half of the time between two consecutive posts of this side (one round trip).
  for (size_t i = 1; i < posted.size(); ++i) out.push_back(tsc_us(posted[i] - posted[i - 1]) / 2);
  return true;
}

// ------------------------------------------------------------------------------------------------
// perftest's output.

const char* kLine =
    "---------------------------------------------------------------------------------------\n";

void print_banner(const Session& s) {
  const char* op = s.o.op == Op::kWrite ? "Write" : s.o.op == Op::kRead ? "Read" : "Send";
  std::printf("%s", kLine);
  std::printf("                    %s %s Test\n",
              s.o.op == Op::kSend ? "Send" : (std::string("RDMA_") + op).c_str(),
              s.o.kind == Kind::kBw ? "BW" : "Latency");
  std::printf(" Dual-port       : OFF\t\tDevice         : rocedp\n");
  std::printf(" Number of qps   : %u\t\tTransport type : IB\n", s.o.qps);
  std::printf(" Connection type : RC\t\tUsing SRQ      : OFF\n");
  std::printf(" TX depth        : %u\n", s.o.tx_depth);
  if (s.o.op == Op::kSend) std::printf(" RX depth        : %u\n", s.rx_depth);
  std::printf(" Mtu             : %u[B]\n", s.path_mtu);
  std::printf(" Link type       : Ethernet\n");
  if (s.o.op == Op::kRead)
    std::printf(" Outstand reads  : %u\n", s.mine.empty() ? 0 : s.mine[0].out_reads);
  std::printf(" rdma_cm QPs\t : %s\n", s.o.rdma_cm ? "ON" : "OFF");
  std::printf(" Data ex. method : %s\n", s.o.rdma_cm ? "rdma_cm" : "Ethernet");
  std::printf("%s", kLine);
  auto addr = [&](const char* side, const PerftestKey& k) {
    std::printf(" %s address: LID %04x QPN %#06x PSN %#06x", side, k.lid, k.qpn, k.psn);
    if (s.o.op == Op::kRead) std::printf(" OUT %#04x", k.out_reads);
    if (s.o.op != Op::kSend)
      std::printf(" RKey %#08x VAddr %#016llx", k.rkey, static_cast<unsigned long long>(k.vaddr));
    std::printf("\n GID:");
    for (int i = 0; i < 16; ++i) std::printf("%s%02d", i ? ":" : " ", k.gid[i]);
    std::printf("\n");
  };
  for (const auto& k : s.mine) addr("local", k);
  for (const auto& k : s.peer) addr("remote", k);
  std::printf("%s", kLine);
  if (s.o.kind == Kind::kBw)
    std::printf(
        s.o.report_gbits
            ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  else
    std::printf(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   "
        "99%% percentile[usec]   99.9%% percentile[usec] \n");
  std::fflush(stdout);
}

BwReport make_report(const Session& s, const BwResult& r) {
  BwReport rep;
  rep.size = r.size;
  rep.iterations = r.iters;
  const double bytes = static_cast<double>(r.size) * static_cast<double>(r.messages);
  const double avg = r.seconds > 0 ? bytes / r.seconds : 0;
  const double peak = std::max(avg, r.peak_msgs_per_s * static_cast<double>(r.size));
  const double div =
      s.o.report_gbits ? 1e9 / 8 : 1048576.0;  // perftest: MB = 2^20 bytes, Gb = 10^9 bits
  rep.bw_peak = peak / div;
  rep.bw_avg = avg / div;
  rep.msg_rate = r.seconds > 0 ? static_cast<double>(r.messages) / r.seconds / 1e6 : 0;
  return rep;
}

void print_bw_row(const BwReport& r) {
  std::printf(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n",
              static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations),
              r.bw_peak, r.bw_avg, r.msg_rate);
  std::fflush(stdout);
}

void print_lat_row(uint64_t size, uint64_t iters, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double avg = n ? sum / static_cast<double>(n) : 0;
  for (double x : v) sq += (x - avg) * (x - avg);
  auto pct = [&](double p) {
    if (n == 0) return 0.0;
    const size_t i = std::min(n - 1, static_cast<size_t>(std::ceil(p * static_cast<double>(n))) -
                                         (p * static_cast<double>(n) >= 1 ? 1 : 0));
    return v[i];
  };
  std::printf(
      " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
      "\t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
      static_cast<unsigned long>(size), static_cast<unsigned long>(iters), n ? v.front() : 0.0,
      n ? v.back() : 0.0, n ? v[n / 2] : 0.0, avg, n ? std::sqrt(sq / static_cast<double>(n)) : 0.0,
      pct(0.99), pct(0.999));
  std::fflush(stdout);
}

std::vector<uint64_t> sizes_of(const Options& o) {
  if (!o.all_sizes) return {o.size};
  std::vector<uint64_t> v;
  for (uint64_t x = 2; x <= (1ull << 23); x *= 2) v.push_back(x);
  return v;
}

// ------------------------------------------------------------------------------------------------

bool run_session(Session& s, int* status) {
  std::string err;
  const bool bw = s.o.kind == Kind::kBw;
  const bool send = s.o.op == Op::kSend;
  *status = 1;
  if (!setup_objects(s)) return false;
  s.gone = std::make_unique<std::atomic<int>[]>(s.o.qps + 1);  // value-initialized: all 0
  s.pend_accept = std::vector<Pending>(s.o.qps + 1);

  // The exchange channel.
  if (s.o.rdma_cm) {
    if (!s.qch->post_receives()) return fail("control QP receives");
    if (!s.client) {
      NTSTATUS st = STATUS_PENDING;
      s.rt->run_on_control([&] {
        st = create_listener(*s.rt->adapter(), &on_connect_event, &s.incoming, nullptr, nullptr,
                             &s.listener);
        if (st == STATUS_SUCCESS)
          st = s.listener->listen(NdkSockAddr{0, s.o.port}, nullptr, nullptr);
      });
      if (st != STATUS_SUCCESS)
        return fail("rdma_cm listen on port " + std::to_string(s.o.port) + ": " +
                    std::string(status_name(st)));
      if (!accept_one(s, 0, s.cqp)) return false;
    } else if (!connect_one(s, 0, s.cqp)) {
      return false;
    }
    s.ch = s.qch.get();
  } else {
    s.tch = std::make_unique<TcpChannel>(*s.rt, s.clock);
    if (!(s.client ? s.tch->connect_to(s.o.host, s.o.port, &err)
                   : s.tch->listen_and_accept(s.o.port, &err)))
      return fail("TCP exchange: " + err);
    s.ch = s.tch.get();
  }

  // Versions, system data, MTU.
  uint8_t v_mine[kVersionSize], v_peer[kVersionSize];
  encode_version(v_mine);
  if (!exchange(*s.ch, s.client, v_mine, v_peer, kVersionSize, &err))
    return fail("version exchange: " + err);
  std::string pv;
  if (!version_compatible(v_peer, &pv))
    return fail("the peer's perftest version " + pv + " is older than 5.70");
  uint8_t sys_mine[4], sys_peer[4];
  put_be32(sys_mine, 4096);  // cycle buffer: the page size
  if (!exchange(*s.ch, s.client, sys_mine, sys_peer, 4, &err))
    return fail("system data exchange: " + err);
  put_be32(sys_mine, 64);  // cache line
  if (!exchange(*s.ch, s.client, sys_mine, sys_peer, 4, &err))
    return fail("system data exchange: " + err);
  uint8_t mtu_mine[2], mtu_peer[2];
  s.path_mtu = path_mtu_for(s.rt->port().mtu());
  encode_mtu(s.path_mtu, mtu_mine);
  if (!exchange(*s.ch, s.client, mtu_mine, mtu_peer, 2, &err)) return fail("MTU exchange: " + err);
  if (const uint32_t pm = decode_mtu(mtu_peer); pm != 0) s.path_mtu = std::min(s.path_mtu, pm);

  if (!post_data_receives(s)) return false;
  if (s.o.rdma_cm) {
    uint8_t z_mine[kKeyStructSize] = {}, z_peer[kKeyStructSize];
    if (!exchange(*s.ch, s.client, z_mine, z_peer, sizeof(z_mine), &err))
      return fail("rdma_cm sync: " + err);
    for (uint32_t i = 0; i < s.o.qps; ++i)
      if (!(s.client ? connect_one(s, i + 1, s.qps[i]) : accept_one(s, i + 1, s.qps[i])))
        return false;
    if (!exchange(*s.ch, s.client, z_mine, z_peer, sizeof(z_mine), &err))
      return fail("rdma_cm sync: " + err);
  }
  fill_keys(s);
  s.peer.assign(s.o.qps, PerftestKey{});
  for (uint32_t i = 0; i < s.o.qps; ++i)
    if (!xchg_key(s, i, &s.peer[i], &err)) return fail("key exchange: " + err);
  if (!s.o.rdma_cm && !connect_qps_oob(s)) return false;
  PerftestKey scratch;
  for (int k = 0; k < pre_run_syncs(bw, send); ++k)
    if (!xchg_key(s, 0, &scratch, &err)) return fail("sync: " + err);
  print_banner(s);

  // The run(s).
  bool ok = true;
  std::vector<double> lat;
  BwResult last;
  for (uint64_t size : sizes_of(s.o)) {
    if (bw) {
      BwResult r;
      if (s.client)
        ok = run_bw_client(s, size, &r);
      else if (send)
        ok = run_bw_server_send(s, size, &r);
      else
        continue;  // WRITE/READ bandwidth server: passive, the client reports
      if (!ok) break;
      last = r;
      if (s.client || send) print_bw_row(make_report(s, r));
    } else {
      ok = run_lat(s, size, &lat);
      if (!ok) break;
      if (s.client || s.o.op != Op::kRead) print_lat_row(size, s.o.iters, lat);
    }
  }
  if (!ok) {
    *status = s.clock.timed_out ? 3 : 1;
    return false;
  }
  if (exchanges_report(bw, send)) {
    if (!xchg_key(s, 0, &scratch, &err)) return fail("sync: " + err);
    BwReport mine = s.client ? make_report(s, last) : BwReport{};
    uint8_t m[5][8], p[5][8];
    put_be64(m[0], mine.size);
    put_be64(m[1], mine.iterations);
    put_be_double(m[2], mine.bw_peak);
    put_be_double(m[3], mine.bw_avg);
    put_be_double(m[4], mine.msg_rate);
    for (int i = 0; i < 5; ++i)
      if (!exchange(*s.ch, s.client, m[i], p[i], 8, &err)) return fail("report exchange: " + err);
    if (!s.client) {
      BwReport peer;
      peer.size = get_be64(p[0]);
      peer.iterations = get_be64(p[1]);
      peer.bw_peak = get_be_double(p[2]);
      peer.bw_avg = get_be_double(p[3]);
      peer.msg_rate = get_be_double(p[4]);
      print_bw_row(peer);  // as perftest's server: the client's measurement
    }
  }
  const bool closing = closes_with_key(bw, s.o.op == Op::kWrite);
  if (closing && !xchg_key(s, 0, &scratch, &err)) return fail("closing sync: " + err);
  if (closing && !s.o.rdma_cm) {
    uint8_t done[5] = {'d', 'o', 'n', 'e', 0}, peer_done[5];
    if (!s.tch->write(done, 5, &err) || !s.tch->read(peer_done, 5, &err))
      return fail("closing exchange: " + err);
  }
  std::printf("%s", kLine);
  std::fflush(stdout);
  if (!s.o.dump_file.empty()) {
    if (std::FILE* f = std::fopen(s.o.dump_file.c_str(), "wb")) {
      // Where the peer's bytes landed: a READ client's own buffer, otherwise the target region.
      const uint8_t* region =
          s.client && s.o.op == Op::kRead ? s.buf.data() : s.buf.data() + s.half;
      std::fwrite(region, 1, max_size(s.o), f);
      std::fclose(f);
    } else {
      return fail("cannot write " + s.o.dump_file);
    }
  }
  *status = 0;
  return true;
}

void close_session(Session& s) {
  if (s.o.rdma_cm) disconnect_all(s);
  // Let the DREPs and the last ACKs leave.
  s.rt->wait_until([] { return false; }, std::chrono::milliseconds(200));
  std::vector<Qp*> qps = s.qps;
  if (s.cqp != nullptr) qps.push_back(s.cqp);
  for (Qp* qp : qps) {
    if (qp == nullptr) continue;
    Pending p;
    call_and_wait(
        *s.rt, p,
        [&] { return qp->close([](void* c) { static_cast<Pending*>(c)->done.store(1); }, &p); },
        3000);
  }
  for (Cq* cq : {s.cq, s.ccq}) {
    if (cq == nullptr) continue;
    Pending p;
    call_and_wait(
        *s.rt, p,
        [&] { return cq->close([](void* c) { static_cast<Pending*>(c)->done.store(1); }, &p); },
        3000);
  }
  // The buffers are freed after this: wait until no core touches them (MR close barrier).
  for (Mr* mr : {s.mr, s.cmr}) {
    if (mr == nullptr) continue;
    Pending p;
    const NTSTATUS st = call_and_wait(
        *s.rt, p,
        [&] { return mr->close([](void* c) { static_cast<Pending*>(c)->done.store(1); }, &p); },
        3000);
    (void)st;
  }
  s.rt->run_on_control([&] {
    if (s.pd != nullptr) s.pd->close(nullptr, nullptr);
  });
}

}  // namespace

int perftest_main(int argc, char** argv) {
  Session s;
  s.o = parse(argc, argv);
  s.client = !s.o.server;
  using pmd::LogLevel;
  const LogLevel level = s.o.log_level == "debug"   ? LogLevel::kDebug
                         : s.o.log_level == "info"  ? LogLevel::kInfo
                         : s.o.log_level == "error" ? LogLevel::kError
                                                    : LogLevel::kWarning;
  pmd::log_configure(level, "");
  if (s.client && !config::parse_ipv4(s.o.host)) {
    std::fprintf(stderr, "rocedp-perf --perftest: HOST must be an IPv4 address, got %s\n",
                 s.o.host.c_str());
    return 2;
  }
  std::string err;
  config::Config cfg = build_config(s.o, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "rocedp-perf --perftest: %s\n", err.c_str());
    return 2;
  }
  control::RuntimeOptions ro;
  ro.program = "rocedp-perf";
  ro.launch_cores = false;
  ro.open_adapter = true;
  ro.connection_manager = true;
  ro.telemetry = false;
  auto rt = Runtime::start(std::move(cfg), ro, &err);
  if (!rt) {
    std::fprintf(stderr, "rocedp-perf --perftest: start: %s\n", err.c_str());
    return 1;
  }
  s.rt = rt.get();
  s.clock.deadline = rte_rdtsc() + static_cast<uint64_t>(s.o.timeout_s) * rte_get_tsc_hz();
  int status = 1;
  if (!rt->wait_until([&] { return rt->port().link().up; }, std::chrono::seconds(30))) {
    fail("link of port " + rt->port().name() + " did not come up");
  } else {
    run_session(s, &status);
    if (status != 0 && s.clock.timed_out) status = 3;
    close_session(s);
  }
  rt->detach_ports();
  s.rt = nullptr;
  if (!rt->stop() && status == 0) status = 1;
  return status;
}

}  // namespace rocedp::perf
