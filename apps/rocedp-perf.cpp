// rocedp-perf: a perftest-style benchmark and check tool for rocedp. One process is one endpoint:
// its own EAL (unique file prefix), one port, one polling core, the control thread and the NDK
// adapter (control/runtime.hpp). Two processes meet over an out-of-band TCP exchange on loopback
// (like perftest's port 18515: QPN, PSN, MAC, IP, MR address and token per QP), then run
// write|read|send x bw|lat over their port.
//
//   rocedp-perf --server [PORT OPTIONS] [--oob-port 18515]
//   rocedp-perf --client [HOST] [PORT OPTIONS] write|read|send bw|lat [-s SIZE] [-n ITERS]
//               [-D SECONDS] [-q QPS] [-t TX_DEPTH] [-a] [--report_gbits] [--raw] [--verify]
//               [--json]
//   rocedp-perf --perftest [HOST] [PORT OPTIONS] write|read|send bw|lat [perftest options]
//               (one end of a Linux perftest pair: apps/perf/perftest_mode.hpp)
//
// The client decides the test; the server adopts it from the exchange (so the server command
// line only names its port). --raw is the baseline: the same number of frames of the same sizes
// over the same PMD with no RDMA processing (client -> server for bw, bounced for lat).
// Exit status: 0 success, 1 failure (a completion error, a verify mismatch, lost frames),
// 2 usage, 3 time limit (--timeout) reached.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_udp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/perf_util.hpp"
#include "apps/perf/perftest_mode.hpp"
#include "config/config.hpp"
#include "control/runtime.hpp"
#include "control/services.hpp"
#include "dataplane/core_rdma.hpp"
#include "dataplane/polling_core.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/port.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"

namespace {

using rocedp::perf::parse_u64;
using rocedp::perf::path_mtu_for;

using rocedp::Adapter;
using rocedp::Cq;
using rocedp::Mr;
using rocedp::NdkResultEx;
using rocedp::NdkSge;
using rocedp::NTSTATUS;
using rocedp::Pd;
using rocedp::Qp;
using rocedp::control::Runtime;

// ------------------------------------------------------------------------------------------------
// Options

enum class Op : uint32_t { kWrite = 0, kRead = 1, kSend = 2 };
enum class Kind : uint32_t { kBw = 0, kLat = 1 };
const char* op_name(Op o) {
  return o == Op::kWrite ? "write" : o == Op::kRead ? "read" : "send";
}

struct Options {
  bool server = false, client = false;
  // Through the IB CM instead of the out-of-band exchange (see "Through the IB CM" below).
  bool connect = false, listen = false;
  uint32_t connect_ip = 0;
  uint16_t connect_port = 0, listen_port = 0;
  std::string host = "127.0.0.1";
  uint16_t oob_port = 18515;
  // The endpoint.
  std::string config_file;
  std::string devargs;
  std::string ip_cidr;
  std::string mac;
  uint16_t mtu = 1500;
  unsigned lcore = 0;
  int worker_lcore = -1;  // --lcore-mode: the polling core on its own worker lcore
  std::string file_prefix;
  unsigned memory_mb = 512;
  std::string log_level = "warning";
  // The test (the client's choice; the server adopts it).
  Op op = Op::kWrite;
  Kind kind = Kind::kBw;
  uint64_t size = 65536;
  bool size_set = false;
  uint64_t iters = 0;  // 0: default (5000 bw, 1000 lat, like perftest)
  uint32_t duration_s = 0;
  uint32_t qps = 1;
  uint32_t tx_depth = 128;
  bool tx_depth_set = false;
  bool all_sizes = false;
  bool report_gbits = false;
  bool raw = false;
  bool verify = false;
  bool json = false;
  uint32_t timeout_s = 60;
  uint64_t verify_seed = 0;
  // --connect to a peer that is not rocedp (Linux rdma_server): it answers each SEND with a SEND
  // and may end the connection itself after the last one.
  bool peer_echoes = false;
  uint32_t recv_delay_ms =
      0;  // SEND lat: post each reply's receive this long after our SEND completed
  // Fault stage on this endpoint's port (its RX side; give both ends a rate for loss both ways).
  double fault_drop_pct = 0;
  uint64_t fault_seed = 0;  // 0: derived from the process id
};

[[noreturn]] void usage(int status) {
  std::fprintf(
      status == 0 ? stdout : stderr,
      "usage: rocedp-perf --server [endpoint] [--oob-port N]\n"
      "       rocedp-perf --client [HOST] [endpoint] write|read|send bw|lat [test options]\n"
      "       rocedp-perf --listen PORT [endpoint]            (IB CM; the client picks the test)\n"
      "       rocedp-perf --connect IP:PORT [endpoint] write|read|send bw|lat [test options]\n"
      "           (IB CM to a --listen peer or to rocedpd's memory (write|read) / echo (send) "
      "service)\n"
      "endpoint:  --config FILE | --port-devargs DEVARGS --ip A.B.C.D/NN [--mac MAC] [--mtu N]\n"
      "           [--lcore N] [--lcore-mode WORKER] [--file-prefix P] [--memory-mb MB] "
      "[--log-level L]\n"
      "test:      -s SIZE  -n ITERS  -D SECONDS  -q QPS  -t TX_DEPTH  -a  --report_gbits\n"
      "           --raw (baseline: same frames, no RDMA)  --verify (check every byte)  --json\n"
      "           --timeout SECONDS (whole run, default 60)\n"
      "           --peer-echoes (--connect: the peer answers each SEND with a SEND, e.g. Linux "
      "rdma_server)\n"
      "           --recv-delay-ms N (SEND lat: post each reply's receive N ms after our SEND "
      "completed: RNR)\n"
      "faults:    --fault-drop PCT (drop PCT %% of the frames this endpoint receives) "
      "[--fault-seed N]\n");
  std::exit(status);
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> words;
  auto need = [&](int& i) -> const char* {
    if (i + 1 >= argc) usage(2);
    return argv[++i];
  };
  auto num = [&](int& i) -> uint64_t {
    uint64_t v = 0;
    if (!parse_u64(need(i), &v)) usage(2);
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--server")
      o.server = true;
    else if (a == "--client") {
      o.client = true;
      if (i + 1 < argc && argv[i + 1][0] != '-' && std::strchr(argv[i + 1], '.') != nullptr)
        o.host = argv[++i];
    } else if (a == "--connect") {
      const std::string v = need(i);
      const auto colon = v.rfind(':');
      const auto ip = rocedp::config::parse_ipv4(v.substr(0, colon));
      uint64_t port = 0;
      if (colon == std::string::npos || !ip || !parse_u64(v.c_str() + colon + 1, &port) ||
          port == 0 || port > 65535) {
        std::fprintf(stderr, "rocedp-perf: --connect wants IP:PORT, got %s\n", v.c_str());
        usage(2);
      }
      o.connect = true;
      o.connect_ip = ip->value;
      o.connect_port = static_cast<uint16_t>(port);
    } else if (a == "--listen") {
      const uint64_t port = num(i);
      if (port == 0 || port > 65535) usage(2);
      o.listen = true;
      o.listen_port = static_cast<uint16_t>(port);
    } else if (a == "--oob-port")
      o.oob_port = static_cast<uint16_t>(num(i));
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
    else if (a == "--lcore-mode")
      o.worker_lcore = static_cast<int>(num(i));
    else if (a == "--file-prefix")
      o.file_prefix = need(i);
    else if (a == "--memory-mb")
      o.memory_mb = static_cast<unsigned>(num(i));
    else if (a == "--log-level")
      o.log_level = need(i);
    else if (a == "-s" || a == "--size")
      o.size = num(i), o.size_set = true;
    else if (a == "-n" || a == "--iters")
      o.iters = num(i);
    else if (a == "-D" || a == "--duration")
      o.duration_s = static_cast<uint32_t>(num(i));
    else if (a == "-q" || a == "--qp")
      o.qps = static_cast<uint32_t>(num(i));
    else if (a == "-t" || a == "--tx-depth")
      o.tx_depth = static_cast<uint32_t>(num(i)), o.tx_depth_set = true;
    else if (a == "-a" || a == "--all")
      o.all_sizes = true;
    else if (a == "--report_gbits")
      o.report_gbits = true;
    else if (a == "--raw")
      o.raw = true;
    else if (a == "--verify")
      o.verify = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--verify-seed")
      o.verify = true, o.verify_seed = num(i);
    else if (a == "--timeout")
      o.timeout_s = static_cast<uint32_t>(num(i));
    else if (a == "--peer-echoes")
      o.peer_echoes = true;
    else if (a == "--recv-delay-ms")
      o.recv_delay_ms = static_cast<uint32_t>(num(i));
    else if (a == "--fault-drop") {
      char* end = nullptr;
      o.fault_drop_pct = std::strtod(need(i), &end);
      if (end == nullptr || *end != '\0' || !(o.fault_drop_pct >= 0 && o.fault_drop_pct <= 100))
        usage(2);
    } else if (a == "--fault-seed")
      o.fault_seed = num(i);
    else if (a == "-h" || a == "--help")
      usage(0);
    else if (!a.empty() && a[0] != '-')
      words.push_back(a);
    else
      usage(2);
  }
  for (const auto& w : words) {
    if (w == "write")
      o.op = Op::kWrite;
    else if (w == "read")
      o.op = Op::kRead;
    else if (w == "send")
      o.op = Op::kSend;
    else if (w == "bw")
      o.kind = Kind::kBw;
    else if (w == "lat")
      o.kind = Kind::kLat;
    else
      usage(2);
  }
  if (int{o.server} + int{o.client} + int{o.connect} + int{o.listen} != 1) usage(2);
  if ((o.connect || o.listen) && o.raw) {
    std::fprintf(stderr, "rocedp-perf: --raw has no connection: use it with --server/--client\n");
    usage(2);
  }
  if (o.verify && o.duration_s != 0) {
    std::fprintf(stderr,
                 "rocedp-perf: --verify checks a known number of messages: use -n, not -D\n");
    usage(2);
  }
  // rocedpd's echo service keeps queue_depth (default 64) receives per connection: a deeper
  // window would only collect RNR NAKs.
  if (o.connect && o.op == Op::kSend && !o.tx_depth_set) o.tx_depth = 64;
  if (o.config_file.empty() && (o.devargs.empty() || o.ip_cidr.empty())) usage(2);
  if (!o.size_set && o.kind == Kind::kLat) o.size = 2;
  if (o.iters == 0) o.iters = o.kind == Kind::kBw ? 5000 : 1000;
  if (o.qps == 0 || o.tx_depth == 0 || o.size == 0 || o.size > (1ull << 30)) usage(2);
  if (o.kind == Kind::kLat && o.qps != 1) {
    std::fprintf(stderr, "rocedp-perf: latency tests use one QP (as perftest)\n");
    usage(2);
  }
  if (o.all_sizes && o.verify) {
    std::fprintf(stderr, "rocedp-perf: -a and --verify do not combine\n");
    usage(2);
  }
  if (o.file_prefix.empty()) o.file_prefix = "rocedp-perf-" + std::to_string(getpid());
  return o;
}

// ------------------------------------------------------------------------------------------------
// Out-of-band exchange: length-prefixed messages over one TCP connection on loopback.

enum MsgType : uint32_t {
  kHello = 1,
  kInfo,
  kReady,
  kSize,
  kSizeReady,
  kDone,
  kReport,
  kBye,
  kFail,
  kDetached
};

constexpr uint32_t kMagic = 0x52445046;  // "RDPF"

struct Hello {
  uint32_t magic = kMagic;
  uint32_t op = 0, kind = 0, raw = 0, verify = 0, qps = 1, tx_depth = 128, duration_s = 0;
  uint64_t size = 0, iters = 0;
};

struct QpInfo {  // per QP, as perftest exchanges it
  uint32_t qpn = 0, psn = 0, ip = 0, rkey = 0;
  uint8_t mac[6] = {};
  uint16_t mtu = 0;
  uint64_t addr = 0, len = 0;
};

struct SizeMsg {
  uint64_t size = 0, iters = 0;
};
struct DoneMsg {
  uint64_t messages = 0, frames = 0;
};
struct ReportMsg {
  uint64_t received = 0;   // messages (RDMA) or frames (raw) the server saw
  uint64_t bad_bytes = 0;  // --verify mismatches on the server side
  uint64_t span_ns = 0;    // raw bw: first to last frame received
  double peak_per_s = 0;   // raw bw: peak frame rate over 10 ms windows
  uint64_t errors = 0;     // completions with an error status
};

class Oob {
 public:
  ~Oob() {
    if (fd_ >= 0) close(fd_);
  }
  bool listen_and_accept(uint16_t port, int timeout_ms, std::string* err) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) return fail(err, "socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(ls, 1) != 0) {
      close(ls);
      return fail(err, "bind/listen 127.0.0.1:" + std::to_string(port));
    }
    pollfd p{ls, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) {
      close(ls);
      return fail(err, "no client connected in time");
    }
    fd_ = accept(ls, nullptr, nullptr);
    close(ls);
    if (fd_ < 0) return fail(err, "accept");
    return setup();
  }
  bool connect_to(const std::string& host, uint16_t port, int timeout_ms, std::string* err) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) return fail(err, "bad host " + host);
    for (int waited = 0; waited < timeout_ms; waited += 50) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      if (fd_ < 0) return fail(err, "socket");
      if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return setup();
      close(fd_);
      fd_ = -1;
      usleep(50000);
    }
    return fail(err, "cannot connect to " + host + ":" + std::to_string(port));
  }
  // Sends one message (loops over partial writes; the peer is always reading when we send).
  bool send(uint32_t type, const void* data, size_t len) {
    uint32_t head[2] = {type, static_cast<uint32_t>(len)};
    return write_all(head, sizeof(head)) && (len == 0 || write_all(data, len));
  }
  template <typename T>
  bool send(uint32_t type, const T& v) {
    return send(type, &v, sizeof(v));
  }
  // Non-blocking: true and the message when a whole one arrived.
  bool try_recv(uint32_t* type, std::vector<uint8_t>* payload) {
    uint8_t tmp[65536];
    for (;;) {
      const ssize_t n = recv(fd_, tmp, sizeof(tmp), MSG_DONTWAIT);
      if (n > 0) {
        buf_.insert(buf_.end(), tmp, tmp + n);
        continue;
      }
      if (n == 0) closed_ = true;
      break;
    }
    if (buf_.size() < 8) return false;
    uint32_t head[2];
    std::memcpy(head, buf_.data(), 8);
    if (buf_.size() < 8 + static_cast<size_t>(head[1])) return false;
    *type = head[0];
    payload->assign(buf_.begin() + 8, buf_.begin() + 8 + head[1]);
    buf_.erase(buf_.begin(), buf_.begin() + 8 + head[1]);
    return true;
  }
  bool peer_closed() const { return closed_; }

 private:
  bool setup() {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return true;
  }
  bool write_all(const void* p, size_t len) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (len > 0) {
      const ssize_t n = ::send(fd_, b, len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      b += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }
  static bool fail(std::string* err, const std::string& why) {
    *err = "oob: " + why + (errno ? std::string(": ") + std::strerror(errno) : "");
    return false;
  }
  int fd_ = -1;
  bool closed_ = false;
  std::vector<uint8_t> buf_;
};

// ------------------------------------------------------------------------------------------------
// Shared state of one run.

uint64_t g_deadline_tsc = 0;
// WRITE latency against a passive target (rocedpd's memory service): the completion time of one
// WRITE, a full round trip, reported whole like READ's.
bool g_full_rtt = false;
std::vector<std::string> g_header_notes;  // extra lines under the table's title (--connect)
bool g_timed_out = false;

bool past_deadline() {
  if (rte_rdtsc() > g_deadline_tsc) g_timed_out = true;
  return g_timed_out;
}

double tsc_to_ns(uint64_t cycles) {
  return static_cast<double>(cycles) * 1e9 / static_cast<double>(rte_get_tsc_hz());
}

// The byte pattern of --verify: every byte of every message slot is a function of (slot, offset),
// so a byte landing in the wrong place, a stale byte or a lost message all show.
// --verify-seed changes this process's pattern only: the negative test that proves a mismatch is
// reported.
uint64_t g_seed = 0;
inline uint8_t pattern(uint64_t slot, uint64_t k) {
  const uint64_t x = (slot + 1 + g_seed) * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint8_t>(x >> 56);
}
void fill_slot(uint8_t* p, uint64_t slot, uint64_t len) {
  for (uint64_t k = 0; k < len; ++k) p[k] = pattern(slot, k);
}
uint64_t check_slot(const uint8_t* p, uint64_t slot, uint64_t len) {
  uint64_t bad = 0;
  for (uint64_t k = 0; k < len; ++k) bad += p[k] != pattern(slot, k);
  return bad;
}

// Waits for one out-of-band message of `want` type, polling the runtime meanwhile.
bool recv_msg(Oob& oob, Runtime* rt, uint32_t want, std::vector<uint8_t>* payload,
              std::string* err) {
  uint32_t type = 0;
  uint64_t spins = 0;
  for (;;) {
    if (oob.try_recv(&type, payload)) {
      if (type == want) return true;
      if (type == kFail) {
        *err = "peer failed: " + std::string(payload->begin(), payload->end());
        return false;
      }
      *err =
          "unexpected message " + std::to_string(type) + " (wanted " + std::to_string(want) + ")";
      return false;
    }
    if (oob.peer_closed()) {
      *err = "peer closed the exchange";
      return false;
    }
    if (past_deadline()) {
      *err = "time limit reached waiting for the peer";
      return false;
    }
    // Inline cores keep running while we wait: the peer's traffic must be answered.
    for (int k = 0; k < 64; ++k)
      if (rt == nullptr || !rt->poll()) break;
    if (rt == nullptr || !rt->inline_cores()) usleep(20);
    ++spins;
  }
}

template <typename T>
bool recv_struct(Oob& oob, Runtime* rt, uint32_t want, T* out, std::string* err) {
  std::vector<uint8_t> p;
  if (!recv_msg(oob, rt, want, &p, err)) return false;
  if (p.size() != sizeof(T)) {
    *err = "bad message size";
    return false;
  }
  std::memcpy(out, p.data(), sizeof(T));
  return true;
}

// Frames per message and their sizes, as the RC requester cuts them (IBTA 9.7.2: every packet but
// the last carries exactly path-MTU payload). Headers: Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4;
// the first WRITE packet adds RETH (16); READ responses carry AETH (4) on the first and last.
std::vector<uint16_t> frame_sizes(Op op, uint64_t size, uint32_t pmtu) {
  const uint64_t n = std::max<uint64_t>(1, (size + pmtu - 1) / pmtu);
  std::vector<uint16_t> out;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t payload = i + 1 < n ? pmtu : size - i * pmtu;
    uint64_t len = 14 + 20 + 8 + 12 + 4 + payload;
    if (op == Op::kWrite && i == 0) len += 16;
    if (op == Op::kRead && (i == 0 || i + 1 == n)) len += 4;
    out.push_back(static_cast<uint16_t>(len));
  }
  return out;
}

// A peak-rate meter over 10 ms windows (perftest's "BW peak").
struct PeakMeter {
  uint64_t window_start = 0, window_count = 0, window_tsc = 0;
  double peak = 0;
  void start(uint64_t now) {
    window_start = now;
    window_count = 0;
    window_tsc = rte_get_tsc_hz() / 100;
    peak = 0;
  }
  void add(uint64_t n, uint64_t now) {
    window_count += n;
    if (now - window_start >= window_tsc) {
      peak =
          std::max(peak, static_cast<double>(window_count) * static_cast<double>(rte_get_tsc_hz()) /
                             static_cast<double>(now - window_start));
      window_start = now;
      window_count = 0;
    }
  }
};

struct Row {
  uint64_t size = 0, iterations = 0;
  double elapsed_s = 0, peak_msgs_per_s = 0;
  uint32_t frames_per_msg = 1;
  std::vector<double> lat_us;  // per-iteration round trips
  bool ok = true;
  std::string error;
};

// --json: this endpoint's RC engine counters (requester side for write/read, where the loss
// recovery runs), as one object; inline polling core only (the counters are the core's).
void print_rc_counters(Runtime& rt) {
  if (!rt.inline_cores() || rt.core_count() == 0) return;
  auto* rdma = dynamic_cast<rocedp::dataplane::CoreRdma*>(rt.core(0).roce_handler_st());
  if (rdma == nullptr) return;
  const auto& cnt = rdma->engine_st().counters();
  std::printf("{\"rc_counters\":{");
  for (size_t i = 0; i < rocedp::rc::kRcCounterCount; ++i)
    std::printf("%s\"%.*s\":%lu", i ? "," : "",
                static_cast<int>(rocedp::rc::kRcCounterNames[i].size()),
                rocedp::rc::kRcCounterNames[i].data(), static_cast<unsigned long>(cnt.v[i]));
  std::printf(",\"tx_no_room\":%lu}}\n", static_cast<unsigned long>(rdma->tx_no_room()));
}

void print_header(const Options& o) {
  std::FILE* out = o.json ? stderr : stdout;
  std::fprintf(
      out,
      "---------------------------------------------------------------------------------------\n");
  std::fprintf(out, "                    RDMA_%s %s Test%s\n",
               o.op == Op::kWrite  ? "Write"
               : o.op == Op::kRead ? "Read"
                                   : "Send",
               o.kind == Kind::kBw ? "BW" : "Latency",
               o.raw ? " (raw baseline: no RDMA processing)" : "");
  std::fprintf(out, " Number of qps   : %u\t\tTransport type : %s\n", o.qps,
               o.raw ? "raw frames" : "RoCEv2 RC (rocedp)");
  std::fprintf(out, " TX depth        : %u\n", o.tx_depth);
  for (const auto& line : g_header_notes) std::fprintf(out, " %s\n", line.c_str());
  std::fprintf(
      out,
      "---------------------------------------------------------------------------------------\n");
  if (o.kind == Kind::kBw) {
    if (o.report_gbits)
      std::fprintf(
          out,
          " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
    else
      std::fprintf(
          out,
          " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  } else {
    std::fprintf(out,
                 " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                 "t_avg[usec]    t_stdev[usec]   "
                 "99%% percentile[usec]   99.9%% percentile[usec]\n");
  }
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i =
      std::min(sorted.size() - 1,
               static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())) - 1));
  return sorted[i];
}

void print_row(const Options& o, const Row& r) {
  std::FILE* out = o.json ? stderr : stdout;
  if (o.kind == Kind::kBw) {
    const double bytes = static_cast<double>(r.size) * static_cast<double>(r.iterations);
    const double avg = r.elapsed_s > 0 ? bytes / r.elapsed_s : 0;
    const double peak = std::max(avg, r.peak_msgs_per_s * static_cast<double>(r.size));
    const double msg_rate = r.elapsed_s > 0 ? static_cast<double>(r.iterations) / r.elapsed_s : 0;
    const double div = o.report_gbits ? 1e9 / 8 : 1048576.0;  // perftest: MB = 2^20, Gb = 10^9 bits
    std::fprintf(out, " %-7lu    %-10lu     %-9.2f          %-9.2f            %-9.6f\n",
                 static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations),
                 peak / div, avg / div, msg_rate / 1e6);
    if (o.json) {
      std::printf(
          "{\"test\":\"%s_bw\",\"mode\":\"%s\",\"size\":%lu,\"iterations\":%lu,\"qps\":%u,\"tx_"
          "depth\":%u,"
          "\"elapsed_s\":%.6f,\"bw_peak_MBps\":%.3f,\"bw_avg_MBps\":%.3f,\"bw_avg_Gbps\":%.4f,"
          "\"msg_rate_Mpps\":%.6f,"
          "\"frames_per_msg\":%u,\"frame_rate_Mpps\":%.6f}\n",
          op_name(o.op), o.raw ? "raw" : "rdma", static_cast<unsigned long>(r.size),
          static_cast<unsigned long>(r.iterations), o.qps, o.tx_depth, r.elapsed_s,
          peak / 1048576.0, avg / 1048576.0, avg * 8 / 1e9, msg_rate / 1e6, r.frames_per_msg,
          msg_rate * r.frames_per_msg / 1e6);
      std::fflush(stdout);
    }
  } else {
    std::vector<double> s = r.lat_us;
    std::sort(s.begin(), s.end());
    // perftest reports half the round trip for WRITE and SEND ping-pong, the full one for READ.
    const double f = o.op == Op::kRead || g_full_rtt ? 1.0 : 0.5;
    double sum = 0, sq = 0;
    for (double v : s) sum += v * f;
    const double avg = s.empty() ? 0 : sum / static_cast<double>(s.size());
    for (double v : s) sq += (v * f - avg) * (v * f - avg);
    const double stdev = s.empty() ? 0 : std::sqrt(sq / static_cast<double>(s.size()));
    const double mn = s.empty() ? 0 : s.front() * f, mx = s.empty() ? 0 : s.back() * f;
    std::fprintf(out,
                 " %-7lu %-10lu     %-9.2f      %-9.2f    %-9.2f        %-9.2f      %-9.2f         "
                 " %-9.2f               %-9.2f\n",
                 static_cast<unsigned long>(r.size), static_cast<unsigned long>(s.size()), mn, mx,
                 percentile(s, 0.5) * f, avg, stdev, percentile(s, 0.99) * f,
                 percentile(s, 0.999) * f);
    if (o.json) {
      std::printf(
          "{\"test\":\"%s_lat\",\"mode\":\"%s\",\"size\":%lu,\"iterations\":%lu,\"t_min_usec\":%."
          "3f,\"t_max_usec\":%.3f,"
          "\"t_typical_usec\":%.3f,\"t_avg_usec\":%.3f,\"t_stdev_usec\":%.3f,\"p99_usec\":%.3f,"
          "\"p999_usec\":%.3f,"
          "\"rtt_p50_usec\":%.3f,\"rtt_p99_usec\":%.3f,\"frames_per_msg\":%u}\n",
          op_name(o.op), o.raw ? "raw" : "rdma", static_cast<unsigned long>(r.size),
          static_cast<unsigned long>(s.size()), mn, mx, percentile(s, 0.5) * f, avg, stdev,
          percentile(s, 0.99) * f, percentile(s, 0.999) * f, percentile(s, 0.5),
          percentile(s, 0.99), r.frames_per_msg);
      std::fflush(stdout);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// The RDMA endpoint: PD, one CQ, QPs, one registered buffer (remote-accessible) per side.

struct Endpoint {
  Runtime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* mr = nullptr;
  std::vector<Qp*> qps;
  std::vector<uint8_t> buf;  // message slots (see slot_of)
  uint32_t cq_depth = 0;
  uint32_t qp_depth = 0;
  uint32_t rx_depth = 0;
  uint64_t rss_per_qp = 0;
};

struct Pending {  // one create/connect/close completion
  std::atomic<int> done{0};
  std::atomic<NTSTATUS> status{rocedp::STATUS_PENDING};
  rocedp::NdkObjectHeader* object = nullptr;
};

void on_created(void* c, NTSTATUS s, rocedp::NdkObjectHeader* o) {
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
void on_closed(void* c) {
  auto* p = static_cast<Pending*>(c);
  p->status.store(rocedp::STATUS_SUCCESS);
  p->done.store(1, std::memory_order_release);
}

uint64_t rss_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

constexpr uint32_t kBatch =
    256;  // objects per control-thread round (the core's request ring holds 1024)

// Runs `start(i)` for items [0, n) on the control thread, kBatch at a time, waiting for each
// batch's completions. start returns the inline status (STATUS_PENDING = a completion follows).
bool batched(Runtime& rt, size_t n, std::vector<Pending>& pend,
             const std::function<NTSTATUS(size_t)>& start, const char* what, std::string* err) {
  for (size_t base = 0; base < n; base += kBatch) {
    const size_t end = std::min(n, base + kBatch);
    std::vector<NTSTATUS> inline_status(end - base);
    rt.run_on_control([&] {
      for (size_t i = base; i < end; ++i) inline_status[i - base] = start(i);
    });
    for (size_t i = base; i < end; ++i) {
      const NTSTATUS st = inline_status[i - base];
      if (st == rocedp::STATUS_SUCCESS)
        pend[i].done = 1, pend[i].status = st;
      else if (st != rocedp::STATUS_PENDING) {
        *err = std::string(what) + " " + std::to_string(i) + ": " +
               std::string(rocedp::status_name(st));
        return false;
      }
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
    for (size_t i = base; i < end; ++i) {
      if (pend[i].status.load() != rocedp::STATUS_SUCCESS) {
        *err = std::string(what) + " " + std::to_string(i) + ": " +
               std::string(rocedp::status_name(pend[i].status.load()));
        return false;
      }
    }
  }
  return true;
}

bool create_endpoint(Runtime& rt, const Hello& h, uint64_t buf_len, Endpoint* ep,
                     std::string* err) {
  ep->rt = &rt;
  const auto& lim = rt.config().limits;
  const bool bw = h.kind == static_cast<uint32_t>(Kind::kBw);
  ep->qp_depth = std::min(h.tx_depth, lim.max_qp_depth);
  ep->rx_depth = h.op == static_cast<uint32_t>(Op::kSend) ? ep->qp_depth : 1;
  // One CQ for every QP's send and receive completions; outstanding work is capped to its depth.
  const uint64_t want = static_cast<uint64_t>(h.qps) * (ep->qp_depth + ep->rx_depth) + 64;
  ep->cq_depth =
      static_cast<uint32_t>(std::min<uint64_t>(lim.max_cq_depth, std::max<uint64_t>(want, 256)));
  (void)bw;
  NTSTATUS st = rocedp::STATUS_PENDING;
  rt.run_on_control([&] { st = rt.adapter()->create_pd(nullptr, nullptr, &ep->pd); });
  if (st != rocedp::STATUS_SUCCESS) {
    *err = "create_pd: " + std::string(rocedp::status_name(st));
    return false;
  }
  std::vector<Pending> one(1);
  if (!batched(
          rt, 1, one,
          [&](size_t) {
            return rt.adapter()->create_cq(ep->cq_depth, nullptr, nullptr, 0, &on_created, &one[0],
                                           &ep->cq);
          },
          "create_cq", err))
    return false;
  if (one[0].object != nullptr) ep->cq = rocedp::ndk_object_cast<Cq>(one[0].object);

  ep->buf.assign(std::max<uint64_t>(buf_len, 8), 0);
  rt.run_on_control([&] {
    st = ep->pd->create_mr(false, nullptr, nullptr, &ep->mr);
    if (st == rocedp::STATUS_SUCCESS)
      st = ep->mr->register_mr(ep->buf.data(), ep->buf.size(),
                               rocedp::NDK_MR_FLAG_ALLOW_LOCAL_WRITE |
                                   rocedp::NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                   rocedp::NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                               nullptr, nullptr);
  });
  if (st != rocedp::STATUS_SUCCESS) {
    *err = "register_mr: " + std::string(rocedp::status_name(st));
    return false;
  }

  const uint64_t rss0 = rss_bytes();
  ep->qps.assign(h.qps, nullptr);
  std::vector<Pending> pend(h.qps);
  if (!batched(
          rt, h.qps, pend,
          [&](size_t i) {
            return ep->pd->create_qp(ep->cq, ep->cq, reinterpret_cast<void*>(i), ep->rx_depth,
                                     ep->qp_depth, 1, 1, 0, &on_created, &pend[i], &ep->qps[i]);
          },
          "create_qp", err))
    return false;
  for (size_t i = 0; i < h.qps; ++i)
    if (pend[i].object != nullptr) ep->qps[i] = rocedp::ndk_object_cast<Qp>(pend[i].object);
  ep->rss_per_qp = (rss_bytes() - std::min(rss0, rss_bytes())) / h.qps;
  return true;
}

std::vector<QpInfo> local_info(Runtime& rt, const Endpoint& ep) {
  std::vector<QpInfo> out(ep.qps.size());
  const auto mac = rt.port().mac();
  for (size_t i = 0; i < ep.qps.size(); ++i) {
    QpInfo& q = out[i];
    q.qpn = ep.qps[i]->qpn();
    q.psn =
        static_cast<uint32_t>((q.qpn * 2654435761u + static_cast<uint32_t>(getpid())) & 0xFFFFFF);
    q.ip = rt.port().address().value;
    std::memcpy(q.mac, mac.bytes.data(), 6);
    q.mtu = rt.port().mtu();
    q.addr = reinterpret_cast<uint64_t>(ep.buf.data());
    q.len = ep.buf.size();
    q.rkey = ep.mr->get_remote_token();
  }
  return out;
}

bool connect_all(Runtime& rt, Endpoint& ep, const std::vector<QpInfo>& mine,
                 const std::vector<QpInfo>& peer, std::string* err) {
  std::vector<Pending> pend(ep.qps.size());
  const uint32_t pmtu = std::min(path_mtu_for(rt.port().mtu()), path_mtu_for(peer[0].mtu));
  return batched(
      rt, ep.qps.size(), pend,
      [&](size_t i) {
        rocedp::NdkQpConnectParams p;
        p.remote_qpn = peer[i].qpn;
        p.remote_ip = peer[i].ip;
        std::memcpy(p.remote_mac, peer[i].mac, 6);
        p.path_mtu = pmtu;
        p.local_psn = mine[i].psn;
        p.remote_psn = peer[i].psn;
        p.local_ack_timeout = 14;  // 67 ms: generous on a shared machine
        p.min_rnr_timer = 1;       // 0.01 ms: a SEND that finds no receive retries soon
        p.inbound_read_limit = rt.config().limits.max_read_limit;
        p.outbound_read_limit = rt.config().limits.max_read_limit;
        return ep.qps[i]->connect(p, &on_request, &pend[i]);
      },
      "connect", err);
}

void close_endpoint(Runtime& rt, Endpoint& ep) {
  std::string err;
  std::vector<Pending> pend(ep.qps.size());
  batched(
      rt, ep.qps.size(), pend,
      [&](size_t i) {
        return ep.qps[i] != nullptr ? ep.qps[i]->close(&on_closed, &pend[i])
                                    : rocedp::STATUS_SUCCESS;
      },
      "close qp", &err);
  if (ep.cq != nullptr) {
    std::vector<Pending> c(1);
    batched(
        rt, 1, c, [&](size_t) { return ep.cq->close(&on_closed, &c[0]); }, "close cq", &err);
  }
  if (ep.mr != nullptr) {
    // The buffer is freed after this: wait until no core touches it (MR close barrier).
    std::vector<Pending> m(1);
    batched(
        rt, 1, m, [&](size_t) { return ep.mr->close(&on_closed, &m[0]); }, "close mr", &err);
  }
  rt.run_on_control([&] {
    if (ep.pd != nullptr) ep.pd->close(nullptr, nullptr);
  });
  if (!err.empty())
    rocedp::pmd::log(rocedp::pmd::LogLevel::kWarning, "perf_close", {{"error", err}});
}

// The slot of message i on QP q: --verify gives every message its own slot; otherwise every
// message uses slot 0 (perftest reuses one buffer).
struct Slots {
  bool verify = false;
  uint64_t iters = 0, size = 0;
  uint64_t slot(uint64_t q, uint64_t i) const { return verify ? q * iters + i : 0; }
  uint64_t offset(uint64_t q, uint64_t i) const { return slot(q, i) * size; }
};

uint64_t total_of(const std::vector<uint64_t>& v) {
  uint64_t t = 0;
  for (uint64_t x : v) t += x;
  return t;
}

// Drains the CQ; counts completions per QP. Returns false on an error completion.
struct CqDrain {
  uint64_t sends = 0, recvs = 0, errors = 0;
  NTSTATUS first_error = rocedp::STATUS_SUCCESS;
  NdkResultEx r[64];
};

// ------------------------------------------------------------------------------------------------
// Client and server of the RDMA tests.

struct Ctx {
  Options o;
  Hello h;
  Runtime* rt = nullptr;
  Endpoint ep;
  std::vector<QpInfo> mine, peer;
  Oob oob;
  bool passive = false;   // --connect to a memory service: nobody writes back (WRITE latency)
  uint64_t recv_len = 0;  // SEND latency: receive length (0: the message size)
};

uint32_t poll_cq(Ctx& c, CqDrain& d, std::vector<uint32_t>& outstanding,
                 std::vector<uint64_t>* recv_done, std::vector<uint64_t>* recv_len) {
  const uint32_t n = c.ep.cq->get_results_ex(d.r, 64);
  for (uint32_t k = 0; k < n; ++k) {
    const NdkResultEx& x = d.r[k];
    const auto q = reinterpret_cast<uintptr_t>(x.qp_context);
    if (x.status != rocedp::STATUS_SUCCESS) {
      if (d.errors++ == 0) d.first_error = x.status;
      continue;
    }
    if (x.type == rocedp::NdkOperationType::kReceive) {
      ++d.recvs;
      if (recv_done != nullptr) {
        (*recv_done)[q]++;
        if (recv_len != nullptr && x.bytes_transferred != c.h.size) (*recv_len)[q]++;
      }
    } else {
      ++d.sends;
      if (q < outstanding.size() && outstanding[q] > 0) outstanding[q]--;
    }
  }
  return n;
}

NTSTATUS post_one(Ctx& c, uint32_t q, uint64_t i, const Slots& s, uint64_t size, Op op) {
  Qp* qp = c.ep.qps[q];
  NdkSge sge{c.ep.buf.data() + s.offset(q, i), static_cast<uint32_t>(size),
             c.ep.mr->get_local_token()};
  const uint64_t raddr = c.peer[q].addr + s.offset(q, i);
  void* ctx = reinterpret_cast<void*>(static_cast<uintptr_t>(i));
  switch (op) {
    case Op::kWrite:
      return qp->write(ctx, &sge, 1, raddr, c.peer[q].rkey, 0);
    case Op::kRead:
      return qp->read(ctx, &sge, 1, raddr, c.peer[q].rkey, 0);
    case Op::kSend:
      return qp->send(ctx, &sge, 1, 0);
  }
  return rocedp::STATUS_INVALID_PARAMETER;
}

// Client bandwidth: keep up to tx_depth requests outstanding per QP (and no more than the CQ holds
// overall), round-robin over the QPs, until every QP posted `iters` (or -D seconds passed).
Row client_bw(Ctx& c, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  const Op op = static_cast<Op>(c.h.op);
  const uint32_t nq = c.h.qps;
  Slots s{c.h.verify != 0, iters, size};
  std::vector<uint32_t> outstanding(nq, 0);
  std::vector<uint64_t> posted(nq, 0);
  uint64_t total_posted = 0, total_out = 0;
  // Outstanding requests overall: what the CQ holds, and no more than the wire's queues absorb
  // without dropping (a memif ring is 1024 frames; with 100,000 QPs x depth in flight every
  // drop costs a full ACK timeout).
  const uint64_t cap = std::min<uint64_t>(c.ep.cq_depth - 16, 1024);
  CqDrain d;
  PeakMeter peak;
  const uint64_t t0 = rte_rdtsc();
  peak.start(t0);
  const uint64_t stop_tsc = c.h.duration_s ? t0 + c.h.duration_s * rte_get_tsc_hz() : UINT64_MAX;
  bool posting = true;
  uint32_t cursor = 0;
  uint64_t last_sends = 0;
  while (true) {
    c.rt->poll();
    if (posting) {
      // Up to 64 posts per pass, visiting at most 2 x 64 QPs, so 100,000 QPs cost no full scan.
      unsigned budget = 64, visits = 128;
      while (budget > 0 && visits-- > 0 && total_out < cap) {
        const uint32_t q = cursor;
        cursor = cursor + 1 == nq ? 0 : cursor + 1;
        if (outstanding[q] >= c.ep.qp_depth || (!c.h.duration_s && posted[q] >= iters)) continue;
        const NTSTATUS st = post_one(c, q, posted[q], s, size, op);
        if (st == rocedp::STATUS_INSUFFICIENT_RESOURCES) continue;  // queue full: later
        if (st != rocedp::STATUS_SUCCESS) {
          r.ok = false;
          r.error = "post: " + std::string(rocedp::status_name(st));
          return r;
        }
        outstanding[q]++;
        posted[q]++;
        ++total_posted;
        ++total_out;
        --budget;
      }
      if (c.h.duration_s ? rte_rdtsc() >= stop_tsc : total_posted == iters * nq) posting = false;
    }
    poll_cq(c, d, outstanding, nullptr, nullptr);
    if (d.sends != last_sends) {
      total_out -= d.sends - last_sends;
      peak.add(d.sends - last_sends, rte_rdtsc());
      last_sends = d.sends;
    }
    if (d.errors > 0) {
      r.ok = false;
      r.error = "completion error " + std::string(rocedp::status_name(d.first_error));
      return r;
    }
    if (!posting && d.sends == total_posted) break;
    if (past_deadline()) {
      r.ok = false;
      r.error = "time limit reached with " + std::to_string(total_posted - d.sends) +
                " requests outstanding";
      return r;
    }
  }
  const uint64_t t1 = rte_rdtsc();
  r.iterations = d.sends;
  r.elapsed_s = tsc_to_ns(t1 - t0) / 1e9;
  r.peak_msgs_per_s = peak.peak;
  return r;
}

// Waits until the memory at p (last byte of a message) holds `want`; the core writes it.
bool wait_byte(Ctx& c, const uint8_t* p, uint8_t want, bool check_oob) {
  uint32_t n = 0;
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != want) {
    c.rt->poll();
    if ((++n & 0xFFF) == 0) {
      if (past_deadline()) return false;
      if (check_oob && c.oob.peer_closed()) return false;
    }
  }
  return true;
}

uint8_t marker(uint64_t i) {
  return static_cast<uint8_t>(i % 255 + 1);
}

// Client latency: one request in flight; a round trip per iteration.
Row client_lat(Ctx& c, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  const Op op = static_cast<Op>(c.h.op);
  std::vector<uint32_t> outstanding(1, 0);
  std::vector<uint64_t> recvd(1, 0), badlen(1, 0);
  CqDrain d;
  r.lat_us.reserve(iters);
  uint8_t* local = c.ep.buf.data();
  const uint64_t t_begin = rte_rdtsc();
  const uint64_t stop_tsc =
      c.h.duration_s ? t_begin + c.h.duration_s * rte_get_tsc_hz() : UINT64_MAX;
  Slots s{false, iters, size};
  uint64_t bad = 0;
  for (uint64_t i = 0; c.h.duration_s ? rte_rdtsc() < stop_tsc : i < iters; ++i) {
    if (c.h.verify) fill_slot(local, i, size);
    if (op != Op::kRead) local[size - 1] = marker(i);
    const uint64_t t0 = rte_rdtsc();
    NTSTATUS st;
    do {
      st = post_one(c, 0, i, s, size, op);
      if (st == rocedp::STATUS_INSUFFICIENT_RESOURCES) {
        c.rt->poll();
        poll_cq(c, d, outstanding, &recvd, &badlen);
      }
    } while (st == rocedp::STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
    if (st != rocedp::STATUS_SUCCESS) {
      r.ok = false;
      r.error = "post: " + std::string(rocedp::status_name(st));
      return r;
    }
    if (op == Op::kRead || (op == Op::kWrite && c.passive)) {
      const uint64_t want = d.sends + 1;
      while (d.sends < want && d.errors == 0 && !past_deadline()) {
        c.rt->poll();
        poll_cq(c, d, outstanding, &recvd, &badlen);
      }
    } else if (op == Op::kWrite) {
      // The server writes back into our buffer; the last byte turns to this iteration's marker.
      // Our own buffer was the source of the write: the echo must come from the peer, so clear
      // the byte once our write completed.
      while (d.sends < i + 1 && d.errors == 0 && !past_deadline()) {
        c.rt->poll();
        poll_cq(c, d, outstanding, &recvd, &badlen);
      }
      if (!wait_byte(c, local + size - 1, static_cast<uint8_t>(marker(i) ^ 0x80), false)) break;
    } else {
      if (c.o.recv_delay_ms != 0) {
        // The reply's receive goes up only after our SEND completed and a pause: a peer that
        // answers at once meets RNR NAKs and must retry.
        while (d.sends < i + 1 && d.errors == 0 && !past_deadline()) {
          c.rt->poll();
          poll_cq(c, d, outstanding, &recvd, &badlen);
        }
        const uint64_t until = rte_rdtsc() + c.o.recv_delay_ms * rte_get_tsc_hz() / 1000;
        while (rte_rdtsc() < until && d.errors == 0) {
          c.rt->poll();
          poll_cq(c, d, outstanding, &recvd, &badlen);
        }
        NdkSge sge{local + size, static_cast<uint32_t>(c.recv_len ? c.recv_len : size),
                   c.ep.mr->get_local_token()};
        c.ep.qps[0]->receive(nullptr, &sge, 1);
      }
      while (recvd[0] < i + 1 && d.errors == 0 && !past_deadline()) {
        c.rt->poll();
        poll_cq(c, d, outstanding, &recvd, &badlen);
      }
    }
    const uint64_t t1 = rte_rdtsc();
    if (d.errors > 0 || past_deadline()) break;
    r.lat_us.push_back(tsc_to_ns(t1 - t0) / 1e3);
    if (c.h.verify) {
      // READ: our buffer now holds the server's slot-0 pattern; SEND/WRITE: the echo of ours.
      if (op == Op::kRead)
        bad += check_slot(local, 0, size);
      else if (c.passive) {
      }  // nothing comes back; run_cm_client reads the region back after the run
      else if (op == Op::kSend)
        bad += check_slot(local + size, i, size - 1) + badlen[0];
      else
        bad += check_slot(local, i, size - 1);
    }
    if (op == Op::kSend && c.o.recv_delay_ms == 0) {
      // Re-arm the receive for the next echo (into the second half of the buffer).
      NdkSge sge{local + size, static_cast<uint32_t>(c.recv_len ? c.recv_len : size),
                 c.ep.mr->get_local_token()};
      c.ep.qps[0]->receive(nullptr, &sge, 1);
    }
  }
  if (d.errors > 0) {
    r.ok = false;
    r.error = "completion error " + std::string(rocedp::status_name(d.first_error));
  } else if (past_deadline()) {
    r.ok = false;
    r.error = "time limit reached";
  } else if (bad > 0) {
    r.ok = false;
    r.error = "verify: " + std::to_string(bad) + " bytes differ";
  }
  r.iterations = r.lat_us.size();
  return r;
}

// Server side of one size: passive for WRITE/READ bandwidth (the core answers), active for SEND
// (keeps receives posted) and for the latency ping-pongs (echoes).
ReportMsg server_size(Ctx& c, uint64_t size, uint64_t iters) {
  ReportMsg rep;
  const Op op = static_cast<Op>(c.h.op);
  const uint32_t nq = c.h.qps;
  Slots s{c.h.verify != 0, iters, size};
  std::vector<uint32_t> outstanding(nq, 0);
  std::vector<uint64_t> recvd(nq, 0), badlen(nq, 0), rposted(nq, 0);
  CqDrain d;
  uint8_t* local = c.ep.buf.data();
  const bool lat = c.h.kind == static_cast<uint32_t>(Kind::kLat);
  auto post_recv = [&](uint32_t q, uint64_t j) {
    const uint64_t off = lat ? size : s.offset(q, j);
    NdkSge sge{local + off, static_cast<uint32_t>(size), c.ep.mr->get_local_token()};
    return c.ep.qps[q]->receive(nullptr, &sge, 1);
  };
  if (op == Op::kSend) {
    for (uint32_t q = 0; q < nq; ++q)
      for (uint32_t k = 0; k < c.ep.rx_depth && (c.h.duration_s || rposted[q] < iters); ++k)
        if (post_recv(q, rposted[q]) == rocedp::STATUS_SUCCESS) rposted[q]++;
  }
  if (op == Op::kRead && c.h.verify) {
    for (uint32_t q = 0; q < nq; ++q)
      for (uint64_t i = 0; i < (lat ? 1 : iters); ++i)
        fill_slot(local + s.offset(q, i), s.slot(q, i), size);
  }
  c.oob.send(kSizeReady, nullptr, 0);

  DoneMsg done{};
  bool have_done = false;
  std::vector<uint8_t> payload;
  uint32_t type = 0;
  uint64_t polls = 0;
  for (uint64_t i = 0;; ++polls) {
    c.rt->poll();
    poll_cq(c, d, outstanding, &recvd, &badlen);
    if (op == Op::kSend && !lat) {
      for (uint32_t q = 0; q < nq; ++q)
        while (rposted[q] - recvd[q] < c.ep.rx_depth && (c.h.duration_s || rposted[q] < iters) &&
               post_recv(q, rposted[q]) == rocedp::STATUS_SUCCESS)
          rposted[q]++;
    }
    if (lat && op != Op::kRead) {
      // Echo iteration i back as soon as it arrived.
      bool arrived = false;
      if (op == Op::kWrite) {
        arrived = __atomic_load_n(local + size - 1, __ATOMIC_ACQUIRE) == marker(i);
      } else {
        arrived = recvd[0] > i;
      }
      if (arrived) {
        uint8_t* src = op == Op::kWrite ? local : local + size;
        if (c.h.verify) rep.bad_bytes += check_slot(src, i, size - 1) + badlen[0];
        if (op == Op::kSend) {
          post_recv(0, i + 1);
          rposted[0]++;
        }
        src[size - 1] = static_cast<uint8_t>(marker(i) ^ (op == Op::kWrite ? 0x80 : 0));
        NdkSge sge{src, static_cast<uint32_t>(size), c.ep.mr->get_local_token()};
        NTSTATUS st;
        do {
          st = op == Op::kWrite
                   ? c.ep.qps[0]->write(nullptr, &sge, 1, c.peer[0].addr, c.peer[0].rkey, 0)
                   : c.ep.qps[0]->send(nullptr, &sge, 1, 0);
          if (st == rocedp::STATUS_INSUFFICIENT_RESOURCES) {
            c.rt->poll();
            poll_cq(c, d, outstanding, &recvd, &badlen);
          }
        } while (st == rocedp::STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
        ++i;
        continue;
      }
    }
    if ((polls & 0x3FF) == 0) {
      if (!have_done && c.oob.try_recv(&type, &payload)) {
        if (type != kDone || payload.size() != sizeof(DoneMsg)) {
          rep.errors++;
          break;
        }
        std::memcpy(&done, payload.data(), sizeof(done));
        have_done = true;
      }
      if (c.oob.peer_closed() || past_deadline()) {
        rep.errors++;
        break;
      }
    }
    if (have_done) {
      // SEND bw: every message the client completed has been received (it was ACKed after
      // delivery, IBTA 9.7.5.1.1); the rest of the server's work is done.
      const uint64_t got = total_of(recvd);
      if (op != Op::kSend || lat || got >= done.messages) break;
    }
  }
  rep.received = op == Op::kSend ? total_of(recvd) : done.messages;
  rep.errors += d.errors;
  // Only a run the client finished is checked: after a time limit the unsent slots would
  // read as mismatches (the client reports the time limit itself).
  const bool finished = have_done && done.messages == uint64_t{nq} * iters;
  if (c.h.verify && !lat && finished) {
    if (op == Op::kWrite || op == Op::kSend) {
      for (uint32_t q = 0; q < nq; ++q)
        for (uint64_t i = 0; i < iters; ++i)
          rep.bad_bytes += check_slot(local + s.offset(q, i), s.slot(q, i), size);
      for (uint32_t q = 0; q < nq; ++q) rep.bad_bytes += badlen[q];
    }
  }
  return rep;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// --raw: the wire's ceiling. Frames of the RDMA run's sizes, built from a header template (the
// RDMA run also builds every frame's headers into a fresh mbuf), no RDMA processing at all.

namespace {

struct RawTemplate {
  uint8_t bytes[42] = {};  // Ethernet + IPv4 + UDP (destination 4791); BTH and payload left as is
};

RawTemplate raw_template(Runtime& rt, const QpInfo& peer) {
  RawTemplate t;
  auto* eth = reinterpret_cast<rte_ether_hdr*>(t.bytes);
  std::memcpy(eth->dst_addr.addr_bytes, peer.mac, 6);
  std::memcpy(eth->src_addr.addr_bytes, rt.port().mac().bytes.data(), 6);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(t.bytes + 14);
  ip->version_ihl = 0x45;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = rte_cpu_to_be_32(rt.port().address().value);
  ip->dst_addr = rte_cpu_to_be_32(peer.ip);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(t.bytes + 34);
  udp->dst_port = rte_cpu_to_be_16(4791);
  udp->src_port = rte_cpu_to_be_16(0xC000);
  return t;
}

// Sends `n` frames (sizes cycling through `sizes` from index `first`); false on time limit.
uint64_t g_raw_no_mbuf = 0, g_raw_tx_full = 0;
bool raw_send(Runtime& rt, const RawTemplate& t, const std::vector<uint16_t>& sizes, uint64_t first,
              uint64_t n) {
  rte_mbuf* m[32];
  rocedp::pmd::Port& port = rt.port();
  uint64_t sent = 0;
  while (sent < n) {
    const unsigned want = static_cast<unsigned>(std::min<uint64_t>(32, n - sent));
    if (rte_pktmbuf_alloc_bulk(rt.pool().get(), m, want) != 0) {
      ++g_raw_no_mbuf;
      if (past_deadline()) return false;
      continue;
    }
    for (unsigned k = 0; k < want; ++k) {
      const uint16_t len = sizes[(first + sent + k) % sizes.size()];
      m[k]->data_len = len;
      m[k]->pkt_len = len;
      std::memcpy(rte_pktmbuf_mtod(m[k], uint8_t*), t.bytes, sizeof(t.bytes));
    }
    unsigned done = 0;
    while (done < want) {
      const uint16_t k = port.tx_burst(0, m + done, static_cast<uint16_t>(want - done));
      if (k == 0) {
        // Ring full: back off instead of hammering the ring indices the receiver is reading
        // (the cache-line ping-pong would slow the receiver, i.e. the ceiling we measure).
        ++g_raw_tx_full;
        for (int p = 0; p < 256; ++p) rte_pause();
      }
      done += k;
      if (done < want && past_deadline()) {
        rte_pktmbuf_free_bulk(m + done, want - done);
        return false;
      }
    }
    sent += want;
  }
  return true;
}

unsigned raw_drain(Runtime& rt, rte_mbuf** m) {
  const uint16_t n = rt.port().rx_burst(0, m, 32);
  return n;
}

// Raw bw flow control, so the baseline is a fair wire ceiling rather than a flood: like RDMA's send
// window, the sender keeps at most min(tx_depth x QPs, 1024) messages' frames unacknowledged; the
// receiver returns a credit frame (cumulative frames received) every kCreditEvery frames, as an
// RC responder returns coalesced ACKs.
constexpr uint8_t kCreditMagic[4] = {'R', 'D', 'P', 'C'};
constexpr size_t kCreditLen = 42 + 4 + 8;  // Ethernet/IPv4/UDP template, magic, u64 frames

uint64_t raw_window_frames(const Hello& h, uint64_t fpm) {
  return std::min<uint64_t>(static_cast<uint64_t>(h.tx_depth) * h.qps, 1024) * fpm;
}
uint64_t raw_credit_every(uint64_t window_frames) {
  return std::max<uint64_t>(1, std::min<uint64_t>(32, window_frames / 4));
}

// Receiver: one credit frame; false if no mbuf or no TX room (the caller tries again later).
bool raw_send_credit(Runtime& rt, const RawTemplate& t, uint64_t frames) {
  rte_mbuf* m = rte_pktmbuf_alloc(rt.pool().get());
  if (m == nullptr) return false;
  uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(p, t.bytes, sizeof(t.bytes));
  std::memcpy(p + 42, kCreditMagic, 4);
  std::memcpy(p + 46, &frames, 8);
  m->data_len = m->pkt_len = 64;  // padded to Ethernet's minimum
  if (rt.port().tx_burst(0, &m, 1) == 1) return true;
  rte_pktmbuf_free(m);
  return false;
}

// Sender: drains RX; returns the highest credit seen (or `credited` if none came).
uint64_t raw_take_credits(Runtime& rt, uint64_t credited) {
  rte_mbuf* m[32];
  const unsigned n = rt.port().rx_burst(0, m, 32);
  for (unsigned k = 0; k < n; ++k) {
    const uint8_t* p = rte_pktmbuf_mtod(m[k], const uint8_t*);
    if (rte_pktmbuf_data_len(m[k]) >= kCreditLen && std::memcmp(p + 42, kCreditMagic, 4) == 0) {
      uint64_t v = 0;
      std::memcpy(&v, p + 46, 8);
      credited = std::max(credited, v);
    }
  }
  if (n) rte_pktmbuf_free_bulk(m, n);
  return credited;
}

Row raw_client(Ctx& c, uint64_t size, uint64_t iters, ReportMsg* rep, std::string* err) {
  Row r;
  r.size = size;
  const uint32_t pmtu = std::min(path_mtu_for(c.rt->port().mtu()), path_mtu_for(c.peer[0].mtu));
  const auto sizes = frame_sizes(static_cast<Op>(c.h.op), size, pmtu);
  const uint64_t fpm = sizes.size();
  r.frames_per_msg = static_cast<uint32_t>(fpm);
  const RawTemplate t = raw_template(*c.rt, c.peer[0]);
  rte_mbuf* m[32];
  const uint64_t t_begin = rte_rdtsc();
  const uint64_t stop_tsc =
      c.h.duration_s ? t_begin + c.h.duration_s * rte_get_tsc_hz() : UINT64_MAX;
  uint64_t msgs = 0;
  if (c.h.kind == static_cast<uint32_t>(Kind::kBw)) {
    // Messages in chunks of 32 frames' worth, so -D is checked often.
    const uint64_t chunk = std::max<uint64_t>(1, 32 / fpm);
    // The same number of messages as the RDMA run: iters per QP, over every QP.
    const uint64_t total = iters * c.h.qps;
    const uint64_t window = raw_window_frames(c.h, fpm);
    uint64_t credited = 0;  // frames the receiver said it has
    bool stalled = false;
    while (c.h.duration_s ? rte_rdtsc() < stop_tsc : msgs < total) {
      const uint64_t k = c.h.duration_s ? chunk : std::min(chunk, total - msgs);
      credited = raw_take_credits(*c.rt, credited);
      if ((msgs + k) * fpm - credited > window) {  // window full: wait for a credit
        if (past_deadline()) {
          stalled = true;
          break;
        }
        continue;
      }
      if (!raw_send(*c.rt, t, sizes, msgs * fpm, k * fpm)) break;
      msgs += k;
    }
    (void)m;
    (void)stalled;
    r.iterations = msgs;
  } else {
    r.lat_us.reserve(iters);
    for (uint64_t i = 0; c.h.duration_s ? rte_rdtsc() < stop_tsc : i < iters; ++i) {
      const uint64_t t0 = rte_rdtsc();
      if (!raw_send(*c.rt, t, sizes, 0, fpm)) break;
      uint64_t back = 0;
      while (back < fpm && !past_deadline()) {
        const unsigned n = raw_drain(*c.rt, m);
        back += n;
        if (n) rte_pktmbuf_free_bulk(m, n);
      }
      if (back < fpm) break;
      r.lat_us.push_back(tsc_to_ns(rte_rdtsc() - t0) / 1e3);
    }
    msgs = r.lat_us.size();
    r.iterations = msgs;
  }
  if (getenv("ROCEDP_PERF_DEBUG"))
    std::fprintf(stderr, "raw: no_mbuf %lu tx_full %lu\n", (unsigned long)g_raw_no_mbuf,
                 (unsigned long)g_raw_tx_full);
  DoneMsg d{msgs, msgs * fpm};
  c.oob.send(kDone, d);
  if (!recv_struct(c.oob, c.rt, kReport, rep, err)) {
    r.ok = false;
    r.error = *err;
    return r;
  }
  if (past_deadline()) {
    r.ok = false;
    r.error = "time limit reached";
  } else if (c.h.kind == static_cast<uint32_t>(Kind::kBw)) {
    if (rep->received != d.frames) {
      r.ok = false;
      r.error = "raw: the server received " + std::to_string(rep->received) + " of " +
                std::to_string(d.frames) + " frames";
    }
    // The wire's rate is what the receiver saw: first to last frame.
    r.elapsed_s = static_cast<double>(rep->span_ns) / 1e9;
    r.peak_msgs_per_s = rep->peak_per_s / static_cast<double>(fpm);
  }
  return r;
}

ReportMsg raw_server_size(Ctx& c, uint64_t size) {
  ReportMsg rep;
  const bool lat = c.h.kind == static_cast<uint32_t>(Kind::kLat);
  const uint32_t pmtu = std::min(path_mtu_for(c.rt->port().mtu()), path_mtu_for(c.peer[0].mtu));
  const uint64_t fpm = frame_sizes(static_cast<Op>(c.h.op), size, pmtu).size();
  c.oob.send(kSizeReady, nullptr, 0);
  rte_mbuf* m[32];
  uint64_t first = 0, last = 0, polls = 0, last_progress = rte_rdtsc();
  PeakMeter peak;
  DoneMsg done{};
  bool have_done = false;
  std::vector<uint8_t> payload;
  uint32_t type = 0;
  const RawTemplate credit_tpl = raw_template(*c.rt, c.peer[0]);
  const uint64_t credit_every = raw_credit_every(raw_window_frames(c.h, fpm));
  uint64_t credited = 0;
  for (;; ++polls) {
    const unsigned n = raw_drain(*c.rt, m);
    if (n > 0) {
      const uint64_t now = rte_rdtsc();
      if (rep.received == 0) {
        first = now;
        peak.start(now);
      }
      last = now;
      last_progress = now;
      rep.received += n;
      peak.add(n, now);
      if (lat) {
        unsigned sent = 0;
        while (sent < n && !past_deadline())
          sent += c.rt->port().tx_burst(0, m + sent, static_cast<uint16_t>(n - sent));
        if (sent < n) rte_pktmbuf_free_bulk(m + sent, n - sent);
      } else {
        rte_pktmbuf_free_bulk(m, n);
        if (rep.received - credited >= credit_every &&
            raw_send_credit(*c.rt, credit_tpl, rep.received))
          credited = rep.received;
      }
      continue;
    }
    // Idle: a credit owed for fewer than credit_every frames still goes out (the sender may be
    // waiting for it at the end of a window).
    if (!lat && rep.received != credited && raw_send_credit(*c.rt, credit_tpl, rep.received))
      credited = rep.received;
    if ((polls & 0xFF) == 0) {
      if (!have_done && c.oob.try_recv(&type, &payload) && type == kDone &&
          payload.size() == sizeof(DoneMsg)) {
        std::memcpy(&done, payload.data(), sizeof(done));
        have_done = true;
      }
      if (c.oob.peer_closed() || past_deadline()) {
        rep.errors++;
        break;
      }
      // Done when every frame the client sent is here, or nothing came for 0.5 s after its DONE.
      if (have_done && (lat || rep.received >= done.frames ||
                        rte_rdtsc() - last_progress > rte_get_tsc_hz() / 2))
        break;
    }
  }
  // The span from the first to the last frame covers received-1 inter-frame gaps.
  rep.span_ns = rep.received > 1 ? static_cast<uint64_t>(tsc_to_ns(last - first) *
                                                         static_cast<double>(rep.received) /
                                                         static_cast<double>(rep.received - 1))
                                 : 0;
  rep.peak_per_s = peak.peak;
  return rep;
}

// ------------------------------------------------------------------------------------------------

rocedp::config::Config build_config(const Options& o, std::string* err) {
  rocedp::config::Config cfg;
  if (!o.config_file.empty()) {
    try {
      cfg = rocedp::config::load_file(o.config_file);
    } catch (const rocedp::config::ConfigError& e) {
      *err = e.what();
      return cfg;
    }
    // Only virtual devices (net_memif, net_af_packet, ...): keep EAL's PCI scan off the machine's
    // own NICs, as the command-line endpoint does.
    bool vdevs_only = true;
    for (const auto& p : cfg.ports) vdevs_only &= p.devargs.rfind("net_", 0) == 0;
    if (vdevs_only && std::find(cfg.eal.extra_args.begin(), cfg.eal.extra_args.end(), "--no-pci") ==
                          cfg.eal.extra_args.end())
      cfg.eal.extra_args.push_back("--no-pci");
  } else {
    rocedp::config::PortConfig p;
    p.name = "perf0";
    p.devargs = o.devargs;
    const auto slash = o.ip_cidr.find('/');
    const auto ip = rocedp::config::parse_ipv4(o.ip_cidr.substr(0, slash));
    if (!ip) {
      *err = "bad --ip " + o.ip_cidr;
      return cfg;
    }
    p.address = *ip;
    p.prefix_len = slash == std::string::npos
                       ? 24
                       : static_cast<uint8_t>(std::atoi(o.ip_cidr.c_str() + slash + 1));
    if (!o.mac.empty()) {
      const auto mac = rocedp::config::parse_mac(o.mac);
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
  }
  // One polling core: inline on the main lcore, or on its own worker (--lcore-mode W).
  {
    cfg.eal.main_lcore = o.config_file.empty() ? o.lcore : cfg.eal.main_lcore;
    if (o.worker_lcore >= 0) {
      cfg.eal.lcores = {cfg.eal.main_lcore, static_cast<unsigned>(o.worker_lcore)};
      cfg.dataplane.lcores = {static_cast<unsigned>(o.worker_lcore)};
    } else {
      cfg.eal.lcores = {cfg.eal.main_lcore};
      cfg.dataplane.lcores = {cfg.eal.main_lcore};
    }
  }
  if (o.fault_drop_pct > 0 && !cfg.ports.empty()) {
    auto& f = cfg.ports[0].fault;
    f.direction = rocedp::config::FaultConfig::Direction::kRx;
    f.drop_pct = o.fault_drop_pct;
    f.seed = o.fault_seed != 0 ? o.fault_seed : static_cast<uint64_t>(getpid()) * 2654435761u + 1;
  }
  cfg.eal.extra_args.push_back("--no-telemetry");
  cfg.telemetry.enabled = false;
  // A control thread on a shared 2-CPU machine must not spin; stats rounds only every second.
  cfg.telemetry.stats_interval_ms = 1000;
  return cfg;
}

// A memif client port fails to start while the server's socket does not exist yet; the two
// processes start together, so the client side waits (bounded) for the socket to appear.
void wait_memif_socket(const rocedp::config::Config& cfg, uint32_t timeout_s) {
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

// Start-up of the two processes may be slow on a loaded machine; the memif link comes up once
// both EALs are running, so allow generously (the run's own --timeout still bounds everything).
constexpr uint32_t kStartupWaitS = 30;

bool wait_link(Runtime& rt) {
  return rt.wait_until([&] { return rt.port().link().up; }, std::chrono::seconds(kStartupWaitS));
}

std::vector<uint64_t> size_list(const Options& o) {
  std::vector<uint64_t> out;
  if (o.all_sizes)
    for (uint64_t s = 2; s <= (1ull << 23); s *= 2) out.push_back(s);
  else
    out.push_back(o.size);
  return out;
}

// -a keeps every size bounded: at most 1 GiB moved per size (perftest has no such cap).
uint64_t iters_for(const Hello& h, uint64_t size) {
  if (h.duration_s) return h.iters;
  const uint64_t cap = std::max<uint64_t>(5, (1ull << 30) / size / h.qps);
  return std::min<uint64_t>(h.iters, cap);
}

uint64_t buffer_len(const Hello& h, uint64_t max_size, std::string* err) {
  const bool lat = h.kind == static_cast<uint32_t>(Kind::kLat);
  if (lat) return 2 * max_size;
  if (!h.verify) return max_size;
  const uint64_t len = static_cast<uint64_t>(h.qps) * h.iters * max_size;
  if (len > (1ull << 30)) {
    *err = "--verify needs a slot per message: qps x iters x size must stay within 1 GiB";
    return 0;
  }
  return len;
}

bool send_infos(Oob& oob, const std::vector<QpInfo>& v) {
  return oob.send(kInfo, v.data(), v.size() * sizeof(QpInfo));
}

bool recv_infos(Ctx& c, std::vector<QpInfo>* out, std::string* err) {
  std::vector<uint8_t> p;
  if (!recv_msg(c.oob, c.rt, kInfo, &p, err)) return false;
  if (p.size() % sizeof(QpInfo) != 0 || p.empty()) {
    *err = "bad QP info";
    return false;
  }
  out->resize(p.size() / sizeof(QpInfo));
  std::memcpy(out->data(), p.data(), p.size());
  return true;
}

// Client: drives every size, prints the rows. Returns the exit status.
int run_client(Ctx& c) {
  std::string err;
  const auto sizes = size_list(c.o);
  const bool raw = c.h.raw != 0;
  const bool bw = c.h.kind == static_cast<uint32_t>(Kind::kBw);
  const uint64_t buf = buffer_len(c.h, sizes.back(), &err);
  if (buf == 0) return std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str()), 2;
  if (raw) {
    QpInfo me{};
    me.ip = c.rt->port().address().value;
    std::memcpy(me.mac, c.rt->port().mac().bytes.data(), 6);
    me.mtu = c.rt->port().mtu();
    if (!recv_infos(c, &c.peer, &err) || !send_infos(c.oob, {me}))
      return std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str()), g_timed_out ? 3 : 1;
  } else {
    if (!create_endpoint(*c.rt, c.h, buf, &c.ep, &err) || !recv_infos(c, &c.peer, &err)) {
      c.oob.send(kFail, err.data(), err.size());
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      return g_timed_out ? 3 : 1;  // exit status 3 for every time limit
    }
    c.mine = local_info(*c.rt, c.ep);
    if (c.peer.size() != c.mine.size() || !send_infos(c.oob, c.mine) ||
        !connect_all(*c.rt, c.ep, c.mine, c.peer, &err)) {
      if (err.empty()) err = "QP info exchange failed";
      c.oob.send(kFail, err.data(), err.size());
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      close_endpoint(*c.rt, c.ep);
      return 1;
    }
  }
  std::vector<uint8_t> p;
  if (!recv_msg(c.oob, c.rt, kReady, &p, &err)) {
    std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
    if (!raw) close_endpoint(*c.rt, c.ep);
    return g_timed_out ? 3 : 1;
  }
  if (!raw && !c.o.json && c.h.qps > 1)
    std::fprintf(stderr, " memory per QP (RSS growth while creating %u QPs): %lu bytes\n", c.h.qps,
                 static_cast<unsigned long>(c.ep.rss_per_qp));
  if (!raw && c.o.json)
    std::printf("{\"qp_memory\":{\"qps\":%u,\"rss_bytes_per_qp\":%lu}}\n", c.h.qps,
                static_cast<unsigned long>(c.ep.rss_per_qp));
  print_header(c.o);
  int status = 0;
  for (uint64_t size : sizes) {
    const uint64_t iters = iters_for(c.h, size);
    const Slots s{c.h.verify != 0, iters, size};
    if (!raw && c.h.verify && bw &&
        (c.h.op == static_cast<uint32_t>(Op::kWrite) || c.h.op == static_cast<uint32_t>(Op::kSend)))
      for (uint32_t q = 0; q < c.h.qps; ++q)
        for (uint64_t i = 0; i < iters; ++i)
          fill_slot(c.ep.buf.data() + s.offset(q, i), s.slot(q, i), size);
    const SizeMsg sm{size, iters};
    if (!c.oob.send(kSize, sm) || !recv_msg(c.oob, c.rt, kSizeReady, &p, &err)) {
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      status = g_timed_out ? 3 : 1;
      break;
    }
    Row r;
    ReportMsg rep;
    if (raw) {
      r = raw_client(c, size, iters, &rep, &err);
    } else {
      if (!bw && c.h.op == static_cast<uint32_t>(Op::kSend)) {
        NdkSge sge{c.ep.buf.data() + size, static_cast<uint32_t>(size), c.ep.mr->get_local_token()};
        c.ep.qps[0]->receive(nullptr, &sge, 1);
      }
      r = bw ? client_bw(c, size, iters) : client_lat(c, size, iters);
      DoneMsg d{r.iterations, 0};
      c.oob.send(kDone, d);
      if (!r.ok) {
        // The client's own failure (a time limit, a completion error) is the story: the server's
        // check of messages that never arrived would only blame their bytes.
      } else if (!recv_struct(c.oob, c.rt, kReport, &rep, &err)) {
        r.ok = false;
        r.error = err;
      } else if (rep.errors > 0) {
        r.ok = false;
        r.error = "server saw " + std::to_string(rep.errors) + " error(s)";
      } else if (rep.bad_bytes > 0) {
        r.ok = false;
        r.error = "verify: " + std::to_string(rep.bad_bytes) + " bytes differ on the server";
      } else if (bw && c.h.op == static_cast<uint32_t>(Op::kSend) &&
                 rep.received != r.iterations * 1) {
        r.ok = false;
        r.error = "server received " + std::to_string(rep.received) + " of " +
                  std::to_string(r.iterations) + " messages";
      }
      if (r.ok && c.h.verify && bw && c.h.op == static_cast<uint32_t>(Op::kRead)) {
        uint64_t bad = 0;
        for (uint32_t q = 0; q < c.h.qps; ++q)
          for (uint64_t i = 0; i < iters; ++i)
            bad += check_slot(c.ep.buf.data() + s.offset(q, i), s.slot(q, i), size);
        if (bad > 0) {
          r.ok = false;
          r.error = "verify: " + std::to_string(bad) + " bytes read differ";
        }
      }
      r.frames_per_msg = static_cast<uint32_t>(
          frame_sizes(static_cast<Op>(c.h.op), size,
                      std::min(path_mtu_for(c.rt->port().mtu()), path_mtu_for(c.peer[0].mtu)))
              .size());
    }
    if (!r.ok) {
      if (!raw && c.o.json) print_rc_counters(*c.rt);
      std::fprintf(stderr, "rocedp-perf: size %lu: %s\n", static_cast<unsigned long>(size),
                   r.error.c_str());
      status = g_timed_out ? 3 : 1;
      break;
    }
    print_row(c.o, r);
    if (!raw && c.o.json) print_rc_counters(*c.rt);
    if (c.h.verify && !c.o.json)
      std::fprintf(stderr, " verify: %lu messages of %lu bytes checked byte for byte\n",
                   static_cast<unsigned long>(r.iterations), static_cast<unsigned long>(size));
  }
  if (status == 0)
    c.oob.send(kBye, nullptr, 0);
  else
    c.oob.send(kFail, "client failed", 13);
  if (!raw) close_endpoint(*c.rt, c.ep);
  return status;
}

int run_server(Ctx& c) {
  std::string err;
  const bool raw = c.h.raw != 0;
  std::vector<uint64_t> sizes{c.h.size};
  if (c.h.size == 0) sizes = {2, 1ull << 23};  // -a: buffers for the largest size
  const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  const uint64_t buf = buffer_len(c.h, max_size, &err);
  if (buf == 0) {
    c.oob.send(kFail, err.data(), err.size());
    return 2;
  }
  if (raw) {
    QpInfo me{};
    me.ip = c.rt->port().address().value;
    std::memcpy(me.mac, c.rt->port().mac().bytes.data(), 6);
    me.mtu = c.rt->port().mtu();
    if (!send_infos(c.oob, {me}) || !recv_infos(c, &c.peer, &err))
      return std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str()), g_timed_out ? 3 : 1;
  } else {
    if (!create_endpoint(*c.rt, c.h, buf, &c.ep, &err)) {
      c.oob.send(kFail, err.data(), err.size());
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      return 1;
    }
    c.mine = local_info(*c.rt, c.ep);
    if (!send_infos(c.oob, c.mine) || !recv_infos(c, &c.peer, &err) ||
        c.peer.size() != c.mine.size() || !connect_all(*c.rt, c.ep, c.mine, c.peer, &err)) {
      if (err.empty()) err = "QP info exchange failed";
      c.oob.send(kFail, err.data(), err.size());
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      close_endpoint(*c.rt, c.ep);
      return 1;
    }
  }
  c.oob.send(kReady, nullptr, 0);
  int status = 0;
  std::vector<uint8_t> p;
  uint32_t type = 0;
  for (;;) {
    if (!c.oob.try_recv(&type, &p)) {
      if (c.oob.peer_closed() || past_deadline()) {
        std::fprintf(stderr, "rocedp-perf: %s\n",
                     g_timed_out ? "time limit reached" : "client went away");
        status = g_timed_out ? 3 : 1;
        break;
      }
      for (int k = 0; k < 64 && c.rt->poll(); ++k) {
      }
      if (!c.rt->inline_cores() || raw) usleep(10);
      continue;
    }
    if (type == kBye) break;
    if (type == kFail) {
      std::fprintf(stderr, "rocedp-perf: client failed: %s\n",
                   std::string(p.begin(), p.end()).c_str());
      status = 1;
      break;
    }
    if (type != kSize || p.size() != sizeof(SizeMsg)) {
      status = 1;
      break;
    }
    SizeMsg sm;
    std::memcpy(&sm, p.data(), sizeof(sm));
    const ReportMsg rep = raw ? raw_server_size(c, sm.size) : server_size(c, sm.size, sm.iters);
    c.oob.send(kReport, rep);
    if (rep.errors > 0 || rep.bad_bytes > 0) status = 1;
  }
  if (!raw) close_endpoint(*c.rt, c.ep);
  return status;
}

// ------------------------------------------------------------------------------------------------
// Through the IB CM (--connect IP:PORT, --listen PORT): no out-of-band exchange. Each of the -q
// connections is an NDK Connect (REQ) / Accept (REP) / CompleteConnect (RTU) on its own QP
// (include/rocedp/connector.hpp). What the client needs to know about the target comes in the
// Accept private data:
//   * rocedpd's memory service: control::MemoryServiceInfo ("RMEM": region address, length,
//     token), the target of write|read; nobody writes back, so WRITE latency is the completion
//     time of one WRITE (a full round trip, reported whole);
//   * rocedpd's echo service: no private data; every SEND comes back as a SEND of the same bytes
//     (bw keeps receives posted for the echoes; lat is a ping-pong);
//   * a rocedp-perf --listen: the same 32-byte layout with magic "RDPF" and flags saying whether
//     it sinks SENDs (bw), echoes them (lat) or writes back (WRITE latency ping-pong).
// The client's REQ private data (CmHello) tells a --listen peer the test; rocedpd's services
// ignore it. The client learns everything from its own completions: an RC SEND, WRITE or READ
// completes successfully only after the peer acknowledged it (IBTA 9.7.5.1.1).

constexpr uint16_t kRegionRead = 1, kRegionWrite = 2;     // MemoryServiceInfo flags
constexpr uint16_t kPerfEchoes = 4, kPerfWritesBack = 8;  // rocedp-perf --listen's extra flags
constexpr uint8_t kPerfMagic[4] = {'R', 'D', 'P', 'F'};
constexpr uint32_t kMaxCmConnections = 1024;
constexpr uint64_t kEchoMaxSize =
    4096;  // rocedpd's echo service default message_bytes (-a stops here)

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
  rocedp::control::MemoryServiceInfo m;
  if (pd.size() >= m.kWireSize && std::memcmp(pd.data(), kPerfMagic, 4) == 0) {
    std::vector<uint8_t> copy(pd.begin(), pd.begin() + m.kWireSize);
    const uint32_t magic = rocedp::control::MemoryServiceInfo::kMagic;
    for (int k = 0; k < 4; ++k) copy[k] = static_cast<uint8_t>(magic >> (24 - 8 * k));
    if (rocedp::control::MemoryServiceInfo::decode(copy.data(), copy.size(), &m))
      t.kind = TargetInfo::Kind::kPerf;
  } else if (rocedp::control::MemoryServiceInfo::decode(pd.data(), pd.size(), &m)) {
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

void encode_perf_accept(const TargetInfo& t,
                        uint8_t out[rocedp::control::MemoryServiceInfo::kWireSize]) {
  rocedp::control::MemoryServiceInfo m;
  m.flags = t.flags;
  m.address = t.address;
  m.length = t.length;
  m.token = t.token;
  m.encode(out);
  std::memcpy(out, kPerfMagic, 4);
}

// One CM connection's state, shared with the control thread's callbacks.
struct CmLink {
  rocedp::Connector* conn = nullptr;
  std::atomic<int> disconnected{0};  // the peer disconnected (or died)
  std::atomic<NTSTATUS> reason{rocedp::STATUS_SUCCESS};
  std::vector<uint8_t> private_data;  // the peer's (REQ or REP)
  CmHello hello;                      // listener: this connection's REQ
};

void on_cm_disconnect(void* ctx, NTSTATUS reason) {
  auto* l = static_cast<CmLink*>(ctx);
  l->reason.store(reason);
  l->disconnected.store(1, std::memory_order_release);
}

// Control thread: the peer's private data of `conn` (REQ on the listener, REP on the client).
std::vector<uint8_t> connection_data(rocedp::Connector* conn) {
  uint32_t len = 0;
  conn->get_connection_data(nullptr, nullptr, nullptr, &len);
  std::vector<uint8_t> out(len);
  if (len != 0 &&
      conn->get_connection_data(nullptr, nullptr, out.data(), &len) != rocedp::STATUS_SUCCESS)
    out.clear();
  return out;
}

// Disconnects (DREQ) every link still connected, waits for the DREPs (bounded), closes the
// connectors. Returns false if a disconnect failed.
bool cm_disconnect_all(Runtime& rt, std::vector<std::unique_ptr<CmLink>>& links) {
  std::vector<Pending> pend(links.size());
  std::vector<NTSTATUS> inline_status(links.size(), rocedp::STATUS_SUCCESS);
  rt.run_on_control([&] {
    for (size_t i = 0; i < links.size(); ++i)
      if (links[i]->conn != nullptr && links[i]->disconnected.load() == 0)
        inline_status[i] = links[i]->conn->disconnect(&on_request, &pend[i]);
  });
  bool ok = true;
  rt.wait_until(
      [&] {
        for (size_t i = 0; i < links.size(); ++i)
          if (inline_status[i] == rocedp::STATUS_PENDING &&
              pend[i].done.load(std::memory_order_acquire) == 0)
            return false;
        return true;
      },
      std::chrono::seconds(5));
  for (size_t i = 0; i < links.size(); ++i) {
    const NTSTATUS st =
        inline_status[i] == rocedp::STATUS_PENDING
            ? (pend[i].done.load() ? pend[i].status.load() : rocedp::STATUS_IO_TIMEOUT)
            : inline_status[i];
    if (st != rocedp::STATUS_SUCCESS &&
        st != rocedp::STATUS_CONNECTION_INVALID) {  // INVALID: never connected
      std::fprintf(stderr, "rocedp-perf: disconnect %zu: %s\n", i,
                   std::string(rocedp::status_name(st)).c_str());
      ok = false;
    }
  }
  rt.run_on_control([&] {
    for (auto& l : links)
      if (l->conn != nullptr) l->conn->close(nullptr, nullptr), l->conn = nullptr;
  });
  // A Disconnect still pending completes (CANCELLED) before its connector's close does: `pend`
  // must outlive those completions.
  rt.wait_until(
      [&] {
        for (size_t i = 0; i < links.size(); ++i)
          if (inline_status[i] == rocedp::STATUS_PENDING &&
              pend[i].done.load(std::memory_order_acquire) == 0)
            return false;
        return true;
      },
      std::chrono::seconds(5));
  return ok;
}

// Moves [local_off, local_off + len) of our buffer to (WRITE) or from (READ) the target's region
// at remote_off over QP 0, in 64 KiB requests; waits for every completion. Used around the timed
// runs: --verify's pre-fill and read-back.
bool cm_transfer(Ctx& c, Op op, uint64_t local_off, uint64_t remote_off, uint64_t len,
                 std::string* err) {
  constexpr uint64_t kChunk = 65536;
  const uint64_t n = (len + kChunk - 1) / kChunk;
  const uint64_t window = std::min<uint64_t>(c.ep.qp_depth, 8);
  uint64_t posted = 0, done = 0;
  NdkResultEx r[16];
  while (done < n) {
    while (posted < n && posted - done < window) {
      const uint64_t off = posted * kChunk, k = std::min(kChunk, len - off);
      NdkSge sge{c.ep.buf.data() + local_off + off, static_cast<uint32_t>(k),
                 c.ep.mr->get_local_token()};
      const uint64_t raddr = c.peer[0].addr + remote_off + off;
      const NTSTATUS st = op == Op::kWrite
                              ? c.ep.qps[0]->write(nullptr, &sge, 1, raddr, c.peer[0].rkey, 0)
                              : c.ep.qps[0]->read(nullptr, &sge, 1, raddr, c.peer[0].rkey, 0);
      if (st == rocedp::STATUS_INSUFFICIENT_RESOURCES) break;
      if (st != rocedp::STATUS_SUCCESS) {
        *err = "post: " + std::string(rocedp::status_name(st));
        return false;
      }
      ++posted;
    }
    c.rt->poll();
    const uint32_t k = c.ep.cq->get_results_ex(r, 16);
    for (uint32_t j = 0; j < k; ++j) {
      if (r[j].status != rocedp::STATUS_SUCCESS) {
        *err = std::string(op == Op::kWrite ? "WRITE" : "READ") +
               " of the region: " + std::string(rocedp::status_name(r[j].status));
        return false;
      }
      if (r[j].type != rocedp::NdkOperationType::kReceive) ++done;
    }
    if (past_deadline()) {
      *err = "time limit reached";
      return false;
    }
  }
  return true;
}

// The echo SEND test's state that lives across sizes (-a): per QP, messages sent and completed,
// echoes received. The k-th receive completion of a QP holds the echo of its k-th SEND (RC
// delivers in order and the echo service answers in arrival order).
struct EchoState {
  std::vector<uint64_t> sent, send_done, echoed;
  uint64_t max_size = 0, window = 0, recv_base = 0;
};

uint64_t echo_pattern_slot(uint64_t q, uint64_t k) {
  return (q << 32) | k;
}

// SEND bandwidth against an echoing target: up to `window` messages per QP between post and echo,
// a receive always posted for each of them. Bandwidth counts the bytes sent (the same come back).
Row cm_send_bw_echo(Ctx& c, EchoState& es, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  const uint32_t nq = c.h.qps;
  const bool verify = c.h.verify != 0;
  std::vector<uint64_t> posted(nq, 0);
  uint64_t total_posted = 0, total_echoed = 0, total_sends = 0, bad = 0;
  PeakMeter peak;
  const uint64_t t0 = rte_rdtsc();
  peak.start(t0);
  const uint64_t stop_tsc = c.h.duration_s ? t0 + c.h.duration_s * rte_get_tsc_hz() : UINT64_MAX;
  bool posting = true;
  NdkResultEx res[64];
  auto send_off = [&](uint64_t q, uint64_t k) {
    return verify ? (q * es.window + k % es.window) * es.max_size : 0;
  };
  auto recv_off = [&](uint64_t q, uint64_t k) {
    return es.recv_base + (q * es.window + k % es.window) * es.max_size;
  };
  while (true) {
    c.rt->poll();
    if (posting) {
      for (uint32_t q = 0; q < nq; ++q) {
        while (es.sent[q] - std::min(es.send_done[q], es.echoed[q]) < es.window &&
               (c.h.duration_s || posted[q] < iters)) {
          uint8_t* p = c.ep.buf.data() + send_off(q, es.sent[q]);
          if (verify) fill_slot(p, echo_pattern_slot(q, es.sent[q]), size);
          NdkSge sge{p, static_cast<uint32_t>(size), c.ep.mr->get_local_token()};
          const NTSTATUS st = c.ep.qps[q]->send(nullptr, &sge, 1, 0);
          if (st == rocedp::STATUS_INSUFFICIENT_RESOURCES) break;
          if (st != rocedp::STATUS_SUCCESS) {
            r.ok = false;
            r.error = "post: " + std::string(rocedp::status_name(st));
            return r;
          }
          ++es.sent[q];
          ++posted[q];
          ++total_posted;
        }
      }
      if (c.h.duration_s ? rte_rdtsc() >= stop_tsc : total_posted == iters * nq) posting = false;
    }
    const uint32_t n = c.ep.cq->get_results_ex(res, 64);
    for (uint32_t j = 0; j < n; ++j) {
      const NdkResultEx& x = res[j];
      const auto q = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(x.qp_context));
      if (x.status != rocedp::STATUS_SUCCESS) {
        r.ok = false;
        r.error = "completion error " + std::string(rocedp::status_name(x.status));
        return r;
      }
      if (x.type == rocedp::NdkOperationType::kReceive) {
        const uint64_t k = es.echoed[q]++;
        uint8_t* p = c.ep.buf.data() + recv_off(q, k);
        if (verify)
          bad +=
              check_slot(p, echo_pattern_slot(q, k), size) + (x.bytes_transferred != size ? 1 : 0);
        NdkSge sge{p, static_cast<uint32_t>(es.max_size), c.ep.mr->get_local_token()};
        c.ep.qps[q]->receive(nullptr, &sge, 1);  // the slot takes echo k + window
        ++total_echoed;
      } else {
        ++es.send_done[q];
        ++total_sends;
        peak.add(1, rte_rdtsc());
      }
    }
    if (!posting && total_sends == total_posted && total_echoed == total_posted) break;
    if (past_deadline()) {
      r.ok = false;
      r.error = "time limit reached with " + std::to_string(total_posted - total_echoed) +
                " echoes missing";
      return r;
    }
  }
  r.iterations = total_posted;
  r.elapsed_s = tsc_to_ns(rte_rdtsc() - t0) / 1e9;
  r.peak_msgs_per_s = peak.peak;
  if (bad > 0) {
    r.ok = false;
    r.error = "verify: " + std::to_string(bad) + " bytes of the echoes differ";
  }
  return r;
}

std::vector<uint64_t> cm_size_list(const Options& o) {
  if (!o.all_sizes) return {o.size};
  const uint64_t max = o.op == Op::kSend ? kEchoMaxSize : (1ull << 20);
  std::vector<uint64_t> out;
  for (uint64_t s = 2; s <= max; s *= 2) out.push_back(s);
  return out;
}

// Connects QP i through links[i] (REQ with `hello`, index i). A REFUSED connection is tried
// again, a few times over ~2 s: a target that still holds our previous run's connection in
// TimeWait answers a REQ from the same QPN with a stale-connection REJ (IBTA 12.9.8.3.1), and this
// process's QPNs are the same on every run.
bool cm_connect(Runtime& rt, Endpoint& ep, std::vector<std::unique_ptr<CmLink>>& links,
                const CmHello& hello, const rocedp::NdkSockAddr& dst, uint32_t limit,
                std::string* err) {
  constexpr int kAttempts = 5;
  std::vector<size_t> todo(links.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<Pending[]> pend(new Pending[links.size()]);
    std::vector<NTSTATUS> inline_status(links.size(), rocedp::STATUS_PENDING);
    for (size_t base = 0; base < todo.size(); base += kBatch) {
      const size_t end = std::min(todo.size(), base + kBatch);
      rt.run_on_control([&] {
        for (size_t k = base; k < end; ++k) {
          const size_t i = todo[k];
          NTSTATUS st = rocedp::create_connector(*rt.adapter(), nullptr, nullptr, &links[i]->conn);
          if (st == rocedp::STATUS_SUCCESS) {
            CmHello h = hello;
            h.index = static_cast<uint32_t>(i);
            st = links[i]->conn->connect(ep.qps[i], rocedp::NdkSockAddr{0, 0}, dst, limit, limit,
                                         &h, sizeof(h), &on_request, &pend[i]);
          }
          inline_status[i] = st;
        }
      });
      rt.wait_until(
          [&] {
            for (size_t k = base; k < end; ++k)
              if (inline_status[todo[k]] == rocedp::STATUS_PENDING &&
                  pend[todo[k]].done.load(std::memory_order_acquire) == 0)
                return false;
            return true;
          },
          std::chrono::seconds(30));
    }
    std::vector<size_t> refused;
    for (size_t i : todo) {
      const NTSTATUS st = inline_status[i] != rocedp::STATUS_PENDING ? inline_status[i]
                          : pend[i].done.load()                      ? pend[i].status.load()
                                                                     : rocedp::STATUS_IO_TIMEOUT;
      if (st == rocedp::STATUS_SUCCESS) continue;
      if (st == rocedp::STATUS_CONNECTION_REFUSED && attempt < kAttempts) {
        refused.push_back(i);
        continue;
      }
      *err = "connect " + std::to_string(i) + ": " + std::string(rocedp::status_name(st));
      if (st == rocedp::STATUS_CONNECTION_REFUSED)
        *err += " (" + std::to_string(kAttempts) + " attempts in 2 s)";
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

// --connect: the client. Returns the exit status.
int run_cm_client(Ctx& c) {
  std::string err;
  Runtime& rt = *c.rt;
  const Options& o = c.o;
  const auto sizes = cm_size_list(o);
  const uint64_t max_size = sizes.back();
  const bool bw = o.kind == Kind::kBw;
  const uint32_t nq = o.qps;
  if (nq > kMaxCmConnections)
    return std::fprintf(stderr, "rocedp-perf: at most %u connections\n", kMaxCmConnections), 2;
  // Our buffer: message slots in the lower half, the other direction (echoes, read-back) in the
  // upper half.
  const uint32_t depth = std::min(o.tx_depth, rt.config().limits.max_qp_depth);
  uint64_t half = max_size;
  if (bw && o.verify) half = static_cast<uint64_t>(nq) * o.iters * max_size;  // a slot per message
  if (bw && o.op == Op::kSend)
    half = std::max<uint64_t>(half, static_cast<uint64_t>(nq) * depth * max_size);
  if (half > (1ull << 29))
    return std::fprintf(stderr, "rocedp-perf: qps x depth (or iters) x size above 512 MiB\n"), 2;
  if (!create_endpoint(rt, c.h, 2 * half, &c.ep, &err)) {
    std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
    return 1;
  }

  // Connect every QP (REQ carries the test), then complete each connection (RTU).
  std::vector<std::unique_ptr<CmLink>> links;
  for (uint32_t i = 0; i < nq; ++i) links.push_back(std::make_unique<CmLink>());
  CmHello hello;
  hello.op = static_cast<uint8_t>(o.op);
  hello.kind = static_cast<uint8_t>(o.kind);
  hello.flags = o.verify ? 1 : 0;
  hello.qps = nq;
  hello.tx_depth = depth;
  hello.duration_s = o.duration_s;
  hello.size = o.all_sizes ? 0 : o.size;
  hello.iters = o.iters;
  hello.addr = reinterpret_cast<uint64_t>(c.ep.buf.data());
  hello.rkey = c.ep.mr->get_remote_token();
  const uint32_t limit = rt.config().limits.max_read_limit;
  const rocedp::NdkSockAddr dst{o.connect_ip, o.connect_port};
  const std::string target =
      rocedp::config::format_ipv4(rocedp::config::Ipv4Address{o.connect_ip}) + ":" +
      std::to_string(o.connect_port);
  std::vector<Pending> completed(nq);
  std::unique_ptr<EchoState> es;
  bool ok = cm_connect(rt, c.ep, links, hello, dst, limit, &err);
  TargetInfo t;
  if (ok) {
    rt.run_on_control([&] {
      for (auto& l : links) l->private_data = connection_data(l->conn);
    });
    t = decode_target(links[0]->private_data);
    for (uint32_t i = 1; i < nq && ok; ++i) {
      const TargetInfo u = decode_target(links[i]->private_data);
      if (u.kind != t.kind || u.address != t.address)
        ok = false, err = "the connections reached different targets";
    }
  }
  const bool echoing =
      o.peer_echoes || t.kind == TargetInfo::Kind::kEchoService || (t.flags & kPerfEchoes) != 0;
  if (ok && o.op == Op::kSend && bw && echoing) {
    es = std::make_unique<EchoState>();
    es->sent.assign(nq, 0);
    es->send_done.assign(nq, 0);
    es->echoed.assign(nq, 0);
    es->max_size = max_size;
    es->window = depth;
    es->recv_base = half;
    for (uint32_t q = 0; q < nq; ++q)
      for (uint64_t k = 0; k < depth; ++k) {
        NdkSge sge{c.ep.buf.data() + half + (q * depth + k) * max_size,
                   static_cast<uint32_t>(max_size), c.ep.mr->get_local_token()};
        c.ep.qps[q]->receive(nullptr, &sge, 1);
      }
  }
  if (ok && o.op == Op::kSend && !bw) {
    if (!echoing)
      ok = false,
      err = "SEND latency needs an echoing target (rocedpd's echo service or a --listen peer)";
    if (t.kind == TargetInfo::Kind::kMemoryService)
      ok = false, err = "a memory service (no receives): use write or read";
    c.recv_len = max_size;
    NdkSge sge{c.ep.buf.data() + max_size, static_cast<uint32_t>(max_size),
               c.ep.mr->get_local_token()};
    if (o.recv_delay_ms == 0) c.ep.qps[0]->receive(nullptr, &sge, 1);
  }
  if (ok)
    ok = batched(
        rt, nq, completed,
        [&](size_t i) {
          return links[i]->conn->complete_connect_ex(&on_cm_disconnect, links[i].get(), &on_request,
                                                     &completed[i]);
        },
        "complete_connect", &err);
  if (ok && o.op != Op::kSend && t.kind == TargetInfo::Kind::kEchoService)
    ok = false, err = "an echo service (no memory region): use send";
  if (ok && o.op == Op::kSend && t.kind == TargetInfo::Kind::kMemoryService)
    ok = false, err = "a memory service (no receives): use write or read";
  if (ok && o.op == Op::kWrite && (t.flags & kRegionWrite) == 0)
    ok = false, err = "the target's region takes no remote WRITE";
  if (ok && o.op == Op::kRead && (t.flags & kRegionRead) == 0)
    ok = false, err = "the target's region takes no remote READ";
  if (!ok) {
    std::fprintf(stderr, "rocedp-perf: %s: %s\n", target.c_str(), err.c_str());
    cm_disconnect_all(rt, links);
    close_endpoint(rt, c.ep);
    return g_timed_out ? 3 : 1;
  }
  c.peer.assign(nq, QpInfo{});
  for (uint32_t q = 0; q < nq; ++q) {
    c.peer[q].addr = t.address;
    c.peer[q].rkey = t.token;
    c.peer[q].mtu = rt.port().mtu();
  }
  c.passive = o.op == Op::kWrite && (t.flags & kPerfWritesBack) == 0;
  g_full_rtt = !bw && c.passive;
  // A region that outlives runs (rocedpd's) may still hold a previous run's pattern: a fresh seed
  // per run makes a lost WRITE show.
  if (t.kind == TargetInfo::Kind::kMemoryService && o.verify && o.verify_seed == 0)
    g_seed = (rte_rdtsc() ^ static_cast<uint64_t>(getpid())) | 1;

  g_header_notes.push_back(
      "Connections     : " + std::to_string(nq) + " through the IB CM to " + target + " (" +
      (o.peer_echoes ? std::string("a peer that answers each SEND") : t.name()) + ")");
  if (c.passive && !bw)
    g_header_notes.push_back(
        "WRITE latency   : completion of each WRITE (nobody writes back): full round trip");
  if (es)
    g_header_notes.push_back(
        "SEND            : every message comes back (echo); BW counts one direction");
  print_header(o);
  int status = 0;
  for (uint64_t size : sizes) {
    const uint64_t iters = bw ? iters_for(c.h, size) : o.iters;
    c.h.size = size;
    const Slots s{o.verify, iters, size};
    const uint64_t used = o.verify && bw ? static_cast<uint64_t>(nq) * iters * size : size;
    if (o.op != Op::kSend && used > t.length) {
      if (o.all_sizes) break;  // -a: the region ends here
      std::fprintf(stderr, "rocedp-perf: %s bytes needed, the target's region has %lu%s\n",
                   std::to_string(used).c_str(), static_cast<unsigned long>(t.length),
                   o.verify ? " (--verify: qps x iters x size)" : "");
      status = 2;
      break;
    }
    Row r;
    // --verify set-up: WRITE and SEND fill their message slots; READ first stores the pattern in
    // the target's region (WRITE from the upper half), then reads it back into the lower half.
    if (o.verify && o.op == Op::kSend && bw && !es) {
      // A sink (--listen) checks message i of QP q against slot q x iters + i.
      for (uint32_t q = 0; q < nq; ++q)
        for (uint64_t i = 0; i < iters; ++i)
          fill_slot(c.ep.buf.data() + s.offset(q, i), s.slot(q, i), size);
    }
    if (o.verify && o.op != Op::kSend) {
      for (uint32_t q = 0; q < (bw ? nq : 1); ++q)
        for (uint64_t i = 0; i < (bw ? iters : 1); ++i)
          fill_slot(c.ep.buf.data() + (o.op == Op::kRead ? half : 0) + s.offset(q, i), s.slot(q, i),
                    size);
      if (o.op == Op::kRead) {
        if (!cm_transfer(c, Op::kWrite, half, 0, used, &err)) r.ok = false, r.error = err;
        std::memset(c.ep.buf.data(), 0, used);
      }
    }
    if (r.ok) {
      if (!bw)
        r = client_lat(c, size, iters);
      else if (es)
        r = cm_send_bw_echo(c, *es, size, iters);
      else
        r = client_bw(c, size, iters);
    }
    if (r.ok && o.verify && o.op != Op::kSend) {
      // WRITE: read the region back into the upper half and check every slot; READ: check what
      // arrived. Passive WRITE latency: the region holds the last message.
      uint64_t bad = 0;
      if (o.op == Op::kWrite && (bw || c.passive)) {
        if (!cm_transfer(c, Op::kRead, half, 0, used, &err)) r.ok = false, r.error = err;
        for (uint32_t q = 0; r.ok && q < (bw ? nq : 1); ++q)
          for (uint64_t i = 0; i < (bw ? iters : 1); ++i)
            bad += bw ? check_slot(c.ep.buf.data() + half + s.offset(q, i), s.slot(q, i), size)
                      : static_cast<uint64_t>(
                            std::memcmp(c.ep.buf.data() + half, c.ep.buf.data(), size) != 0);
      } else if (o.op == Op::kRead && bw) {
        for (uint32_t q = 0; q < nq; ++q)
          for (uint64_t i = 0; i < iters; ++i)
            bad += check_slot(c.ep.buf.data() + s.offset(q, i), s.slot(q, i), size);
      }
      if (r.ok && bad > 0)
        r.ok = false,
        r.error = "verify: " + std::to_string(bad) + " bytes differ in the target's region";
    }
    r.frames_per_msg =
        static_cast<uint32_t>(frame_sizes(o.op, size, path_mtu_for(rt.port().mtu())).size());
    if (!r.ok) {
      std::fprintf(stderr, "rocedp-perf: size %lu: %s\n", static_cast<unsigned long>(size),
                   r.error.c_str());
      status = g_timed_out ? 3 : 1;
      break;
    }
    print_row(o, r);
    if (o.verify && !o.json)
      std::fprintf(stderr, " verify: %lu messages of %lu bytes checked byte for byte\n",
                   static_cast<unsigned long>(r.iterations), static_cast<unsigned long>(size));
  }
  if (o.peer_echoes && status == 0) {
    // rdma_server-style peers end the connection after their last answer: let them (2 s at most),
    // so the disconnect is theirs whatever the timing.
    rt.wait_until(
        [&] {
          for (auto& l : links)
            if (l->disconnected.load(std::memory_order_acquire) == 0) return false;
          return true;
        },
        std::chrono::milliseconds(2000));
  }
  for (uint32_t q = 0; q < nq; ++q)
    if (links[q]->disconnected.load() != 0 && status == 0 && o.peer_echoes) {
      // rdma_server-style peers end the connection after their last answer.
      std::fprintf(stderr, "rocedp-perf: connection %u: the peer disconnected after the run (%s)\n",
                   q, std::string(rocedp::status_name(links[q]->reason.load())).c_str());
    } else if (links[q]->disconnected.load() != 0 && status == 0) {
      std::fprintf(stderr, "rocedp-perf: connection %u: the peer disconnected (%s)\n", q,
                   std::string(rocedp::status_name(links[q]->reason.load())).c_str());
      status = 1;
    }
  if (!cm_disconnect_all(rt, links) && status == 0) status = 1;
  close_endpoint(rt, c.ep);
  return status;
}

// --listen's connect events: the control thread appends, the main thread reads up to `count`.
struct Incoming {
  std::array<rocedp::NdkConnector*, kMaxCmConnections> slots{};
  std::atomic<uint32_t> count{0};
  std::atomic<uint32_t> refused{0};
};

void on_connect_event(void* ctx, rocedp::NdkConnector* nc) {
  auto* in = static_cast<Incoming*>(ctx);
  rocedp::Connector* conn = rocedp::Connector::from(nc);
  const uint32_t n = in->count.load(std::memory_order_relaxed);
  if (n >= kMaxCmConnections) {
    conn->reject(nullptr, 0);
    conn->close(nullptr, nullptr);
    in->refused.fetch_add(1);
    return;
  }
  in->slots[n] = nc;
  in->count.store(n + 1, std::memory_order_release);
}

// --listen: accepts one test's -q connections (the first REQ says the test), serves it like
// --server until the client disconnects, prints a summary. Returns the exit status.
int run_cm_listener(Ctx& c) {
  Runtime& rt = *c.rt;
  std::string err;
  Incoming in;
  rocedp::Listener* listener = nullptr;
  NTSTATUS st = rocedp::STATUS_PENDING;
  rt.run_on_control([&] {
    st =
        rocedp::create_listener(*rt.adapter(), &on_connect_event, &in, nullptr, nullptr, &listener);
    if (st == rocedp::STATUS_SUCCESS)
      st = listener->listen(rocedp::NdkSockAddr{0, c.o.listen_port}, nullptr, nullptr);
  });
  const std::string where =
      rocedp::config::format_ipv4(rt.port().address()) + ":" + std::to_string(c.o.listen_port);
  auto close_listener = [&] {
    rt.run_on_control([&] {
      if (listener != nullptr) listener->close(nullptr, nullptr), listener = nullptr;
    });
  };
  if (st != rocedp::STATUS_SUCCESS) {
    std::fprintf(stderr, "rocedp-perf: listen on %s: %s\n", where.c_str(),
                 std::string(rocedp::status_name(st)).c_str());
    close_listener();
    return 1;
  }
  std::printf("rocedp-perf: listening on %s (IB CM)\n", where.c_str());
  std::fflush(stdout);
  std::vector<std::unique_ptr<CmLink>> links;
  std::vector<rocedp::Connector*> rejected;
  // Requests that are not part of the test (a second client, or left after a failure): REJ.
  std::vector<bool> handled(kMaxCmConnections, false);  // slot accepted, or rejected and closed
  auto reject_strays = [&] {
    rt.run_on_control([&] {
      const uint32_t n = in.count.load(std::memory_order_acquire);
      for (uint32_t k = 0; k < n; ++k) {
        if (handled[k]) continue;
        handled[k] = true;
        rocedp::Connector* conn = rocedp::Connector::from(in.slots[k]);
        conn->reject(nullptr, 0);
        conn->close(nullptr, nullptr);
      }
    });
  };
  auto fail = [&](const std::string& why, int code) {
    std::fprintf(stderr, "rocedp-perf: %s\n", why.c_str());
    reject_strays();
    cm_disconnect_all(rt, links);
    if (!c.ep.qps.empty() || c.ep.pd != nullptr) close_endpoint(rt, c.ep);
    close_listener();
    return code;
  };
  // The first connection request says the test.
  if (!rt.wait_until(
          [&] { return in.count.load(std::memory_order_acquire) > 0 || past_deadline(); },
          std::chrono::seconds(c.o.timeout_s)) ||
      in.count.load() == 0)
    return fail("no connection request in time", 3);
  CmHello first;
  {
    std::vector<uint8_t> pd;
    rt.run_on_control([&] { pd = connection_data(rocedp::Connector::from(in.slots[0])); });
    if (pd.size() < sizeof(CmHello))
      return fail("the first request is not from rocedp-perf --connect", 1);
    std::memcpy(&first, pd.data(), sizeof(first));
    if (first.magic != kMagic || first.version != 1 || first.qps == 0 ||
        first.qps > kMaxCmConnections || first.op > 2 || first.kind > 1 || first.tx_depth == 0)
      return fail("the first request is not from rocedp-perf --connect", 1);
  }
  Hello& h = c.h;
  h.op = first.op;
  h.kind = first.kind;
  h.verify = first.flags & 1;
  h.qps = first.qps;
  h.tx_depth = first.tx_depth;
  h.duration_s = first.duration_s;
  h.size = first.size;
  h.iters = first.iters;
  c.o.op = static_cast<Op>(h.op);
  c.o.kind = static_cast<Kind>(h.kind);
  const Op op = c.o.op;
  const bool lat = c.o.kind == Kind::kLat;
  const uint64_t max_size = h.size != 0 ? h.size : op == Op::kSend ? kEchoMaxSize : (1ull << 20);
  // What this side does: WRITE/READ bw and READ lat: a passive region; WRITE lat: writes every
  // message back (ping-pong; one size, so not with -a); SEND bw: sink; SEND lat: echo.
  TargetInfo me;
  me.kind = TargetInfo::Kind::kPerf;
  const bool writes_back = op == Op::kWrite && lat && h.size != 0;
  const bool echoes = op == Op::kSend && lat;
  me.flags =
      static_cast<uint16_t>(kRegionRead | kRegionWrite | (writes_back ? kPerfWritesBack : 0) |
                            (echoes ? kPerfEchoes : 0));
  uint64_t buf = max_size;
  if (op == Op::kSend)
    buf = static_cast<uint64_t>(h.qps) * std::min(h.tx_depth, rt.config().limits.max_qp_depth) *
          max_size;
  else if (lat)
    buf = 2 * max_size;
  else if (h.verify)
    buf = static_cast<uint64_t>(h.qps) * h.iters * max_size;
  if (buf > (1ull << 30)) return fail("the test needs more than 1 GiB of buffer", 1);
  if (!create_endpoint(rt, h, buf, &c.ep, &err)) return fail(err, 1);
  me.address = reinterpret_cast<uint64_t>(c.ep.buf.data());
  me.length = c.ep.buf.size();
  me.token = c.ep.mr->get_remote_token();
  uint8_t accept_pd[rocedp::control::MemoryServiceInfo::kWireSize];
  encode_perf_accept(me, accept_pd);

  // SEND: every QP gets its receives before its Accept (RQ slots of max_size; request context =
  // slot << 1, bit 0 set on an echo's SEND).
  const uint32_t rx = c.ep.rx_depth;
  auto post_recv = [&](uint32_t q, uint64_t slot) {
    NdkSge sge{c.ep.buf.data() + (q * rx + slot) * max_size, static_cast<uint32_t>(max_size),
               c.ep.mr->get_local_token()};
    return c.ep.qps[q]->receive(reinterpret_cast<void*>(static_cast<uintptr_t>(slot << 1)), &sge,
                                1);
  };
  if (op == Op::kSend)
    for (uint32_t q = 0; q < h.qps; ++q)
      for (uint64_t k = 0; k < rx; ++k)
        if (post_recv(q, k) != rocedp::STATUS_SUCCESS) return fail("posting receives failed", 1);

  // Accept each request on the QP of its index.
  for (uint32_t i = 0; i < h.qps; ++i) links.push_back(std::make_unique<CmLink>());
  std::vector<Pending> accepted(h.qps);
  std::vector<bool> used(h.qps, false);
  const uint32_t limit = rt.config().limits.max_read_limit;
  for (uint32_t k = 0; k < h.qps; ++k) {
    if (!rt.wait_until(
            [&] { return in.count.load(std::memory_order_acquire) > k || past_deadline(); },
            std::chrono::seconds(c.o.timeout_s)) ||
        in.count.load() <= k)
      return fail("only " + std::to_string(k) + " of " + std::to_string(h.qps) +
                      " connection requests came",
                  3);
    NTSTATUS ast = rocedp::STATUS_SUCCESS;
    std::string why;
    rt.run_on_control([&] {
      rocedp::Connector* conn = rocedp::Connector::from(in.slots[k]);
      std::vector<uint8_t> pd = connection_data(conn);
      CmHello hh;
      if (pd.size() >= sizeof(hh)) std::memcpy(&hh, pd.data(), sizeof(hh));
      if (pd.size() < sizeof(hh) || hh.magic != kMagic || hh.index >= h.qps || used[hh.index] ||
          hh.op != first.op || hh.kind != first.kind || hh.size != first.size) {
        conn->reject(nullptr, 0);
        conn->close(nullptr, nullptr);
        handled[k] = true;
        why = "request " + std::to_string(k) + " does not belong to this test";
        return;
      }
      used[hh.index] = true;
      handled[k] = true;
      CmLink& l = *links[hh.index];
      l.conn = conn;
      l.hello = hh;
      ast = conn->accept_ex(c.ep.qps[hh.index], limit, limit, accept_pd, sizeof(accept_pd),
                            &on_cm_disconnect, &l, &on_request, &accepted[hh.index]);
      if (ast == rocedp::STATUS_SUCCESS)
        accepted[hh.index].status = ast, accepted[hh.index].done = 1;
    });
    if (!why.empty()) return fail(why, 1);
    if (ast != rocedp::STATUS_PENDING && ast != rocedp::STATUS_SUCCESS)
      return fail("accept: " + std::string(rocedp::status_name(ast)), 1);
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
    if (a.status.load() != rocedp::STATUS_SUCCESS)
      return fail("accept: " + std::string(rocedp::status_name(a.status.load())), 1);
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
  NTSTATUS first_error = rocedp::STATUS_SUCCESS;
  uint8_t* local = c.ep.buf.data();
  const CmHello& client = links[0]->hello;
  NdkResultEx res[64];
  auto all_gone = [&] {
    for (auto& l : links)
      if (l->disconnected.load(std::memory_order_acquire) == 0) return false;
    return true;
  };
  uint64_t polls = 0;
  for (;; ++polls) {
    c.rt->poll();
    const uint32_t n = c.ep.cq->get_results_ex(res, 64);
    for (uint32_t j = 0; j < n; ++j) {
      const NdkResultEx& x = res[j];
      const auto q = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(x.qp_context));
      if (x.status != rocedp::STATUS_SUCCESS) {
        // Work flushed when the client disconnects is expected.
        if (x.status != rocedp::STATUS_CANCELLED || links[q]->disconnected.load() == 0) {
          if (errors++ == 0) first_error = x.status;
        }
        continue;
      }
      const auto ctx = reinterpret_cast<uintptr_t>(x.request_context);
      const uint64_t slot = ctx >> 1;
      uint8_t* p = local + (q * rx + slot) * max_size;
      if (x.type == rocedp::NdkOperationType::kReceive) {
        const uint64_t k = received[q]++;
        ++messages;
        if (echoes) {
          NdkSge sge{p, x.bytes_transferred, c.ep.mr->get_local_token()};
          if (c.ep.qps[q]->send(reinterpret_cast<void*>(ctx | 1), &sge,
                                x.bytes_transferred != 0 ? 1 : 0, 0) == rocedp::STATUS_SUCCESS)
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
      NdkSge sge{local, static_cast<uint32_t>(h.size), c.ep.mr->get_local_token()};
      NTSTATUS wst;
      do {
        wst = c.ep.qps[0]->write(nullptr, &sge, 1, client.addr, client.rkey, 0);
        if (wst == rocedp::STATUS_INSUFFICIENT_RESOURCES) {
          c.rt->poll();
          c.ep.cq->get_results_ex(res, 64);
        }
      } while (wst == rocedp::STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
      ++written_back;
    }
    if ((polls & 0x3FF) == 0 && (all_gone() || past_deadline())) break;
  }
  if (!all_gone()) ++errors, first_error = rocedp::STATUS_IO_TIMEOUT;
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
  if (bad > 0)
    std::fprintf(stderr, "rocedp-perf: verify: %lu bytes differ\n",
                 static_cast<unsigned long>(bad)),
        status = 1;
  if (errors > 0)
    std::fprintf(stderr, "rocedp-perf: %lu error(s), first %s\n",
                 static_cast<unsigned long>(errors),
                 std::string(rocedp::status_name(first_error)).c_str()),
        status = g_timed_out ? 3 : 1;
  reject_strays();
  cm_disconnect_all(rt, links);
  close_endpoint(rt, c.ep);
  close_listener();
  return status;
}

// --connect / --listen: the endpoint with a connection manager, then the test. The client leaves
// first; the listener detaches its port and waits (bounded) for the client's side of the link to
// go away before it closes (DPDK 22.11 memif: neither side may poll while the other closes).
int main_cm(Ctx& c) {
  std::string err;
  rocedp::config::Config cfg = build_config(c.o, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
    return 2;
  }
  cfg.listeners.clear();  // a --config file of rocedpd's: its services are not ours
  wait_memif_socket(cfg, std::min<uint32_t>(c.o.timeout_s, kStartupWaitS));
  rocedp::control::RuntimeOptions ro;
  ro.program = "rocedp-perf";
  ro.launch_cores = c.o.worker_lcore >= 0;
  ro.open_adapter = true;
  ro.connection_manager = true;
  ro.telemetry = false;
  auto rt = Runtime::start(std::move(cfg), ro, &err);
  if (!rt) {
    std::fprintf(stderr, "rocedp-perf: start: %s\n", err.c_str());
    return 1;
  }
  c.rt = rt.get();
  g_deadline_tsc = rte_rdtsc() + static_cast<uint64_t>(c.o.timeout_s) * rte_get_tsc_hz();
  int status = 0;
  if (c.o.listen) {
    status = run_cm_listener(c);
  } else if (!wait_link(*rt)) {
    std::fprintf(stderr, "rocedp-perf: link of port %s did not come up in %u s\n",
                 rt->port().name().c_str(), kStartupWaitS);
    status = 1;
  } else {
    c.h.op = static_cast<uint32_t>(c.o.op);
    c.h.kind = static_cast<uint32_t>(c.o.kind);
    c.h.verify = c.o.verify;
    c.h.qps = c.o.qps;
    c.h.tx_depth = c.o.tx_depth;
    c.h.duration_s = c.o.duration_s;
    c.h.size = c.o.all_sizes ? 0 : c.o.size;
    c.h.iters = c.o.iters;
    status = run_cm_client(c);
  }
  rt->detach_ports();
  if (c.o.listen && rt->wait_until([&] { return !rt->port().link().up; }, std::chrono::seconds(5)))
    usleep(200000);
  c.rt = nullptr;
  if (!rt->stop() && status == 0) status = 1;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--perftest") == 0) return rocedp::perf::perftest_main(argc, argv);
  Ctx c;
  c.o = parse_args(argc, argv);
  using rocedp::pmd::LogLevel;
  const LogLevel level = c.o.log_level == "debug"   ? LogLevel::kDebug
                         : c.o.log_level == "info"  ? LogLevel::kInfo
                         : c.o.log_level == "error" ? LogLevel::kError
                                                    : LogLevel::kWarning;
  rocedp::pmd::log_configure(level, "");
  g_seed = c.o.verify_seed;
  g_deadline_tsc = UINT64_MAX;
  if (c.o.connect || c.o.listen) return main_cm(c);
  std::string err;
  const int oob_timeout_ms = static_cast<int>(std::min<uint32_t>(c.o.timeout_s, 30) * 1000);
  if (c.o.server) {
    if (!c.oob.listen_and_accept(c.o.oob_port, oob_timeout_ms, &err) ||
        !recv_struct(c.oob, nullptr, kHello, &c.h, &err)) {
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      return 1;
    }
    if (c.h.magic != kMagic)
      return std::fprintf(stderr, "rocedp-perf: not a rocedp-perf peer\n"), 1;
    c.o.op = static_cast<Op>(c.h.op);
    c.o.kind = static_cast<Kind>(c.h.kind);
    c.o.raw = c.h.raw != 0;
  } else {
    c.h.op = static_cast<uint32_t>(c.o.op);
    c.h.kind = static_cast<uint32_t>(c.o.kind);
    c.h.raw = c.o.raw;
    c.h.verify = c.o.verify;
    c.h.qps = c.o.qps;
    c.h.tx_depth = c.o.tx_depth;
    c.h.duration_s = c.o.duration_s;
    c.h.size = c.o.all_sizes ? 0 : c.o.size;
    c.h.iters = c.o.iters;
    if (!c.oob.connect_to(c.o.host, c.o.oob_port, oob_timeout_ms, &err) ||
        !c.oob.send(kHello, c.h)) {
      std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
      return 1;
    }
  }
  rocedp::config::Config cfg = build_config(c.o, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
    return 2;
  }
  wait_memif_socket(cfg, std::min<uint32_t>(c.o.timeout_s, kStartupWaitS));
  rocedp::control::RuntimeOptions ro;
  ro.program = "rocedp-perf";
  ro.launch_cores = c.o.worker_lcore >= 0;
  ro.open_adapter = !c.o.raw;
  ro.telemetry = false;
  ro.ports_only = c.o.raw;
  auto rt = Runtime::start(std::move(cfg), ro, &err);
  if (!rt) {
    std::fprintf(stderr, "rocedp-perf: start: %s\n", err.c_str());
    c.oob.send(kFail, err.data(), err.size());
    return 1;
  }
  c.rt = rt.get();
  g_deadline_tsc = rte_rdtsc() + static_cast<uint64_t>(c.o.timeout_s) * rte_get_tsc_hz();
  int status = 0;
  if (!wait_link(*rt)) {
    err = "link of port " + rt->port().name() + " did not come up in " +
          std::to_string(kStartupWaitS) + " s";
    std::fprintf(stderr, "rocedp-perf: %s\n", err.c_str());
    c.oob.send(kFail, err.data(), err.size());
    status = 1;
  } else {
    status = c.o.server ? run_server(c) : run_client(c);
  }
  // Neither side may poll its port while the other closes (DPDK 22.11 memif unmaps the shared
  // rings on its interrupt thread when the peer leaves): both detach, then tell each other.
  rt->detach_ports();
  if (status == 0) {
    std::vector<uint8_t> p;
    if (c.o.server) {
      c.oob.send(kDetached, nullptr, 0);
      recv_msg(c.oob, nullptr, kDetached, &p, &err);
    } else {
      recv_msg(c.oob, nullptr, kDetached, &p, &err);
      c.oob.send(kDetached, nullptr, 0);
    }
  }
  if (rt->config().ports[0].devargs.find("role=client") != std::string::npos) {
    // One side at a time (tests/pmd/test_port.cpp): DPDK 22.11's memif interrupt thread can crash
    // when the server end sees its client leave while it closes too. The memif server closes
    // first; the memif client waits (bounded) until its link went down, then closes.
    // The disconnect is handled on EAL's interrupt thread, which unregisters the control
    // channel's handler after the link went down: give it time before the port is closed here.
    if (rt->wait_until([&] { return !rt->port().link().up; }, std::chrono::seconds(3)))
      usleep(200000);
  }
  c.rt = nullptr;
  if (!rt->stop() && status == 0) status = 1;
  return status;
}
