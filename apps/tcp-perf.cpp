// tcp-perf: the kernel TCP baseline for rocedp-perf's SEND tests. The same test shapes over
// kernel TCP sockets on loopback (127.0.0.1), so the two can be run alternately in one benchmark
// run (DESIGN.md section 8) and compared as ratios.
//
//   tcp-perf --server [--bind A.B.C.D] [--port 18600] [--timeout S]
//   tcp-perf --client [HOST] [--port 18600] [send] bw|lat [-s SIZE] [-n ITERS] [-D SECONDS]
//            [-q CONNS] [-t TX_DEPTH] [--poll] [--json] [--timeout S]
//
// bw:  the client writes SIZE-byte messages, one send() per message (a message is what one
//      rocedp post_send is), on -q connections with TCP_NODELAY, keeping at most TX_DEPTH
//      messages per connection unacknowledged. The server reads them and returns a cumulative
//      count (8 bytes) every TX_DEPTH/2 messages: that count is TCP's "completion", as the RC ACK
//      is rocedp's. Message rate = acknowledged messages / time from first send to last ack.
// lat: one connection, ping-pong of SIZE bytes; reports half the round trip like perftest's
//      send_lat (t_typical = p50/2) and the full round trip p50/p99 (rtt_*).
// --poll: spin on non-blocking sockets (the process never sleeps, like a polling core); without
//      it the sockets block in the kernel as ordinary TCP programs do.
//
// The client decides the test and sends it to the server on a control connection; the server
// serves that one test and exits. The end of the data is a half-close (shutdown SHUT_WR) of each
// data connection; the server then reports what it received on the control connection.
// Exit status: 0 success, 1 failure (lost or extra bytes, a socket error), 2 usage, 3 time limit
// (including no peer to connect to or to accept before --timeout).
// No DPDK here: it is a plain Linux program, pinned from outside (taskset) like rocedp-perf.

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/perf/perf_util.hpp"

namespace {

using rocedp::perf::parse_u64;

enum class Kind : uint32_t { kBw = 0, kLat = 1 };

struct Options {
  bool server = false, client = false;
  std::string host = "127.0.0.1";
  uint16_t port = 18600;
  Kind kind = Kind::kBw;
  uint64_t size = 65536;
  bool size_set = false;
  uint64_t iters = 0;  // 0: default (5000 bw, 1000 lat, like perftest)
  uint32_t duration_s = 0;
  uint32_t conns = 1;
  uint32_t tx_depth = 128;
  bool poll = false;
  bool json = false;
  uint32_t timeout_s = 60;
};

[[noreturn]] void usage(int status) {
  std::fprintf(
      status == 0 ? stdout : stderr,
      "usage: tcp-perf --server [--bind A.B.C.D] [--port N] [--timeout S]\n"
      "       tcp-perf --client [HOST] [--port N] [send] bw|lat [-s SIZE] [-n ITERS] [-D SECONDS]\n"
      "                [-q CONNS] [-t TX_DEPTH] [--poll] [--json] [--timeout S]\n");
  std::exit(status);
}


Options parse_args(int argc, char** argv) {
  Options o;
  auto need = [&](int& i) -> const char* {
    if (i + 1 >= argc) usage(2);
    return argv[++i];
  };
  auto num = [&](int& i, uint64_t max) -> uint64_t {
    uint64_t v = 0;
    if (!parse_u64(need(i), &v) || v > max) usage(2);
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
    } else if (a == "--bind")
      o.host = need(i);
    else if (a == "--port")
      o.port = static_cast<uint16_t>(num(i, 65535));
    else if (a == "-s" || a == "--size")
      o.size = num(i, 1u << 30), o.size_set = true;
    else if (a == "-n" || a == "--iters")
      o.iters = num(i, UINT64_MAX);
    else if (a == "-D" || a == "--duration")
      o.duration_s = static_cast<uint32_t>(num(i, 3600));
    else if (a == "-q" || a == "--qp" || a == "--conns")
      o.conns = static_cast<uint32_t>(num(i, 1024));
    else if (a == "-t" || a == "--tx-depth")
      o.tx_depth = static_cast<uint32_t>(num(i, 1u << 20));
    else if (a == "--poll")
      o.poll = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--timeout")
      o.timeout_s = static_cast<uint32_t>(num(i, 86400));
    else if (a == "-h" || a == "--help")
      usage(0);
    else if (a == "send")
      continue;  // the only operation TCP has; accepted for rocedp-perf's syntax
    else if (a == "bw")
      o.kind = Kind::kBw;
    else if (a == "lat")
      o.kind = Kind::kLat;
    else
      usage(2);
  }
  if (o.server == o.client) usage(2);
  if (!o.size_set && o.kind == Kind::kLat) o.size = 2;
  if (o.iters == 0) o.iters = o.kind == Kind::kBw ? 5000 : 1000;
  if (o.conns == 0 || o.tx_depth == 0 || o.size == 0) usage(2);
  if (o.kind == Kind::kLat && o.conns != 1) {
    std::fprintf(stderr, "tcp-perf: latency tests use one connection (as perftest)\n");
    usage(2);
  }
  return o;
}

// ------------------------------------------------------------------------------------------------
// Time and the run's deadline.

using Clock = std::chrono::steady_clock;
Clock::time_point g_deadline;
bool g_timed_out = false;

bool past_deadline() {
  if (Clock::now() > g_deadline) g_timed_out = true;
  return g_timed_out;
}
double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// ------------------------------------------------------------------------------------------------
// Sockets.

constexpr uint32_t kMagic = 0x54435046;  // "TCPF"

struct Hello {  // client -> server on the control connection
  uint32_t magic = kMagic;
  uint32_t kind = 0, conns = 1, tx_depth = 128, poll = 0, duration_s = 0;
  uint64_t size = 0, iters = 0;
};
struct Report {  // server -> client on the control connection, after every data connection ended
  uint64_t messages = 0, bytes = 0, errors = 0;
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool fail(std::string* err, const std::string& why) {
  *err = why + (errno ? std::string(": ") + std::strerror(errno) : "");
  return false;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Blocking calls still return every 200 ms so the run's deadline holds. Non-blocking is asked per
// call (MSG_DONTWAIT), so one socket serves both the blocking and the --poll mode.
void set_io_timeout(int fd) {
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool make_addr(const std::string& host, uint16_t port, sockaddr_in* sa, std::string* err) {
  *sa = sockaddr_in{};
  sa->sin_family = AF_INET;
  sa->sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa->sin_addr) != 1)
    return errno = 0, fail(err, "bad address " + host);
  return true;
}

bool connect_to(const std::string& host, uint16_t port, Fd* out, std::string* err) {
  sockaddr_in sa;
  if (!make_addr(host, port, &sa, err)) return false;
  // The server may start a moment after us: retry until the deadline.
  while (!past_deadline()) {
    Fd fd(socket(AF_INET, SOCK_STREAM, 0));
    if (fd.get() < 0) return fail(err, "socket");
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      set_nodelay(fd.get());
      *out = std::move(fd);
      return true;
    }
    usleep(20000);
  }
  return fail(err, "cannot connect to " + host + ":" + std::to_string(port));
}

// Blocking-style helpers that honour the deadline (sockets carry a 200 ms timeout).
bool write_all(int fd, const void* p, size_t len) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (len > 0) {
    const ssize_t n = ::send(fd, b, len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) && !past_deadline())
      continue;
    if (n <= 0) return false;
    b += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly len bytes; spins with MSG_DONTWAIT when `spin`, else blocks. 0 = EOF before any
// byte, -1 = error / deadline / EOF inside the message, 1 = done.
int read_exact(int fd, void* p, size_t len, bool spin) {
  auto* b = static_cast<uint8_t*>(p);
  size_t got = 0;
  uint32_t idle = 0;
  while (got < len) {
    const ssize_t n = ::recv(fd, b + got, len - got, spin ? MSG_DONTWAIT : 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return got == 0 ? 0 : -1;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if ((!spin || (++idle & 0xFFF) == 0) && past_deadline()) return -1;
  }
  return 1;
}

template <typename T>
bool read_struct(int fd, T* out) {
  return read_exact(fd, out, sizeof(T), false) == 1;
}

// Data segments this connection sent (RFC 4898 tcpEStatsDataSegsOut), 0 if the kernel has no count.
uint64_t data_segs_out(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_data_segs_out) + sizeof(ti.tcpi_data_segs_out))
    return 0;
  return ti.tcpi_data_segs_out;
}

// ------------------------------------------------------------------------------------------------
// Results, printed like rocedp-perf (perftest's table; --json: one object per line, same keys).

struct Row {
  uint64_t size = 0, iterations = 0;
  double elapsed_s = 0, peak_msgs_per_s = 0;
  double frames_per_msg = 0;  // TCP data segments per message (TCP_INFO), the analogue of frames
  std::vector<double> rtt_us;
};

// A peak-rate meter over 10 ms windows (perftest's "BW peak").
struct PeakMeter {
  Clock::time_point window_start;
  uint64_t count = 0;
  double peak = 0;
  void start(Clock::time_point now) { window_start = now, count = 0, peak = 0; }
  void add(uint64_t n, Clock::time_point now) {
    count += n;
    const double s = seconds(now - window_start);
    if (s >= 0.01) {
      peak = std::max(peak, static_cast<double>(count) / s);
      window_start = now;
      count = 0;
    }
  }
};

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i =
      std::min(sorted.size() - 1,
               static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())) - 1));
  return sorted[i];
}

void print_header(const Options& o) {
  std::FILE* out = o.json ? stderr : stdout;
  std::fprintf(
      out,
      "---------------------------------------------------------------------------------------\n");
  std::fprintf(out, "                    TCP_Send %s Test (kernel TCP, %s)\n",
               o.kind == Kind::kBw ? "BW" : "Latency",
               o.poll ? "busy-polling sockets" : "blocking sockets");
  std::fprintf(out, " Connections     : %u\t\tServer         : %s:%u\n", o.conns, o.host.c_str(),
               o.port);
  std::fprintf(out, " TX depth        : %u\n", o.tx_depth);
  std::fprintf(
      out,
      "---------------------------------------------------------------------------------------\n");
  if (o.kind == Kind::kBw)
    std::fprintf(
        out, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  else
    std::fprintf(out,
                 " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                 "t_avg[usec]    t_stdev[usec]   "
                 "99%% percentile[usec]   99.9%% percentile[usec]\n");
}

void print_row(const Options& o, const Row& r) {
  std::FILE* out = o.json ? stderr : stdout;
  const char* mode = o.poll ? "tcp-poll" : "tcp";
  if (o.kind == Kind::kBw) {
    const double bytes = static_cast<double>(r.size) * static_cast<double>(r.iterations);
    const double avg = r.elapsed_s > 0 ? bytes / r.elapsed_s : 0;
    const double peak = std::max(avg, r.peak_msgs_per_s * static_cast<double>(r.size));
    const double msg_rate = r.elapsed_s > 0 ? static_cast<double>(r.iterations) / r.elapsed_s : 0;
    std::fprintf(out, " %-7lu    %-10lu     %-9.2f          %-9.2f            %-9.6f\n",
                 static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations),
                 peak / 1048576.0, avg / 1048576.0, msg_rate / 1e6);
    if (o.json) {
      std::printf(
          "{\"test\":\"send_bw\",\"mode\":\"%s\",\"size\":%lu,\"iterations\":%lu,\"qps\":%u,\"tx_"
          "depth\":%u,"
          "\"elapsed_s\":%.6f,\"bw_peak_MBps\":%.3f,\"bw_avg_MBps\":%.3f,\"bw_avg_Gbps\":%.4f,"
          "\"msg_rate_Mpps\":%.6f,"
          "\"frames_per_msg\":%.4f,\"frame_rate_Mpps\":%.6f}\n",
          mode, static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations),
          o.conns, o.tx_depth, r.elapsed_s, peak / 1048576.0, avg / 1048576.0, avg * 8 / 1e9,
          msg_rate / 1e6, r.frames_per_msg, msg_rate * r.frames_per_msg / 1e6);
      std::fflush(stdout);
    }
    return;
  }
  std::vector<double> s = r.rtt_us;
  std::sort(s.begin(), s.end());
  // Half the round trip, as perftest's send_lat reports it.
  double sum = 0, sq = 0;
  for (double v : s) sum += v / 2;
  const double avg = s.empty() ? 0 : sum / static_cast<double>(s.size());
  for (double v : s) sq += (v / 2 - avg) * (v / 2 - avg);
  const double stdev = s.empty() ? 0 : std::sqrt(sq / static_cast<double>(s.size()));
  const double mn = s.empty() ? 0 : s.front() / 2, mx = s.empty() ? 0 : s.back() / 2;
  std::fprintf(out,
               " %-7lu %-10lu     %-9.2f      %-9.2f    %-9.2f        %-9.2f      %-9.2f          "
               "%-9.2f               %-9.2f\n",
               static_cast<unsigned long>(r.size), static_cast<unsigned long>(s.size()), mn, mx,
               percentile(s, 0.5) / 2, avg, stdev, percentile(s, 0.99) / 2,
               percentile(s, 0.999) / 2);
  if (o.json) {
    std::printf(
        "{\"test\":\"send_lat\",\"mode\":\"%s\",\"size\":%lu,\"iterations\":%lu,\"t_min_usec\":%."
        "3f,\"t_max_usec\":%.3f,"
        "\"t_typical_usec\":%.3f,\"t_avg_usec\":%.3f,\"t_stdev_usec\":%.3f,\"p99_usec\":%.3f,"
        "\"p999_usec\":%.3f,"
        "\"rtt_p50_usec\":%.3f,\"rtt_p99_usec\":%.3f,\"frames_per_msg\":%.4f}\n",
        mode, static_cast<unsigned long>(r.size), static_cast<unsigned long>(s.size()), mn, mx,
        percentile(s, 0.5) / 2, avg, stdev, percentile(s, 0.99) / 2, percentile(s, 0.999) / 2,
        percentile(s, 0.5), percentile(s, 0.99), r.frames_per_msg);
    std::fflush(stdout);
  }
}

// ------------------------------------------------------------------------------------------------
// Client.

// One data connection of the bandwidth test.
struct Conn {
  Fd fd;
  uint64_t sent = 0;     // whole messages written
  uint64_t acked = 0;    // the server's cumulative count
  uint64_t partial = 0;  // bytes of the current message already written
  uint8_t ack_buf[8] = {};
  uint32_t ack_have = 0;  // bytes of the next count already read
  bool closed = false;    // SHUT_WR done
};

// Sends as many messages as the window allows; false on a socket error.
// Messages are started while `may_start`, the window has room and fewer than `limit` were sent.
bool pump(Conn& c, const std::vector<uint8_t>& msg, uint64_t window, bool may_start, uint64_t limit,
          uint32_t* budget) {
  while (*budget > 0 &&
         (c.partial > 0 || (may_start && c.sent - c.acked < window && c.sent < limit))) {
    const ssize_t n = ::send(c.fd.get(), msg.data() + c.partial, msg.size() - c.partial,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.partial += static_cast<uint64_t>(n);
    if (c.partial == msg.size()) {
      c.partial = 0;
      ++c.sent;
      --*budget;
    }
  }
  return true;
}

// Reads the acknowledgement counts that arrived; false on EOF or an error.
bool read_acks(Conn& c) {
  for (;;) {
    const ssize_t n =
        ::recv(c.fd.get(), c.ack_buf + c.ack_have, sizeof(c.ack_buf) - c.ack_have, MSG_DONTWAIT);
    if (n > 0) {
      c.ack_have += static_cast<uint32_t>(n);
      if (c.ack_have == sizeof(c.ack_buf)) {
        std::memcpy(&c.acked, c.ack_buf, sizeof(c.acked));
        c.ack_have = 0;
      }
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

bool client_bw(const Options& o, const std::string& host, Row* r, std::string* err) {
  std::vector<Conn> conns(o.conns);
  for (auto& c : conns)
    if (!connect_to(host, o.port, &c.fd, err)) return false;
  Fd ep(epoll_create1(0));
  if (ep.get() < 0) return fail(err, "epoll_create1");
  for (uint32_t i = 0; i < o.conns; ++i) {
    // Edge-triggered in and out: an ack arrived, or a full send buffer drained (so a blocked
    // sender in blocking mode wakes up without a timeout).
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    ev.data.u32 = i;
    if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, conns[i].fd.get(), &ev) != 0)
      return fail(err, "epoll_ctl");
  }
  std::vector<uint8_t> msg(o.size, 0xA5);
  std::vector<epoll_event> evs(std::min<uint32_t>(o.conns, 256));
  PeakMeter peak;
  const auto t0 = Clock::now();
  peak.start(t0);
  const auto stop = t0 + std::chrono::seconds(o.duration_s);
  bool posting = true;
  uint64_t total_sent = 0, total_acked = 0;
  for (;;) {
    // Post: up to 64 messages per connection per pass, like a polling core's burst.
    bool progress = false;
    for (auto& c : conns) {
      if (c.closed) continue;
      const uint64_t limit = o.duration_s ? UINT64_MAX : o.iters;
      uint32_t budget = 64;
      const uint64_t before = c.sent;
      if (!pump(c, msg, o.tx_depth, posting, limit, &budget)) return fail(err, "send");
      total_sent += c.sent - before;
      progress |= c.sent != before;
      // Done posting and no half-written message left: end the stream (the server acks the rest).
      if (c.partial == 0 && !(posting && c.sent < limit)) {
        if (shutdown(c.fd.get(), SHUT_WR) != 0) return fail(err, "shutdown");
        c.closed = true;
      }
    }
    if (posting && (o.duration_s ? Clock::now() >= stop : total_sent == o.iters * o.conns))
      posting = false;
    // Acknowledgements. Blocking mode sleeps in epoll_wait when nothing could be sent.
    const int timeout = (o.poll || progress) ? 0 : 100;
    const int n = epoll_wait(ep.get(), evs.data(), static_cast<int>(evs.size()), timeout);
    if (n < 0 && errno != EINTR) return fail(err, "epoll_wait");
    uint64_t acked_now = 0;
    for (int k = 0; k < n; ++k) {
      if (!(evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) continue;
      Conn& c = conns[evs[k].data.u32];
      const uint64_t before = c.acked;
      if (!read_acks(c) && c.acked < c.sent)
        return errno = 0, fail(err, "server closed a connection early");
      acked_now += c.acked - before;
    }
    if (acked_now) {
      total_acked += acked_now;
      peak.add(acked_now, Clock::now());
    }
    if (!posting && total_acked == total_sent) {
      bool all_closed = true;
      for (auto& c : conns) all_closed &= c.closed;
      if (all_closed) break;
    }
    if (past_deadline())
      return errno = 0,
             fail(err, "time limit reached with " + std::to_string(total_sent - total_acked) +
                           " messages unacknowledged");
  }
  const auto t1 = Clock::now();
  uint64_t segs = 0;
  for (auto& c : conns) segs += data_segs_out(c.fd.get());
  r->size = o.size;
  r->iterations = total_acked;
  r->elapsed_s = seconds(t1 - t0);
  r->peak_msgs_per_s = peak.peak;
  r->frames_per_msg =
      total_acked ? static_cast<double>(segs) / static_cast<double>(total_acked) : 0;
  return true;
}

bool client_lat(const Options& o, const std::string& host, Row* r, std::string* err) {
  Fd fd;
  if (!connect_to(host, o.port, &fd, err)) return false;
  set_io_timeout(fd.get());
  std::vector<uint8_t> out(o.size, 0x5A), in(o.size);
  r->size = o.size;
  r->rtt_us.reserve(o.duration_s ? 1u << 20
                                 : std::min<uint64_t>(o.iters, 1u << 24));  // grows past that
  const auto t_begin = Clock::now();
  const auto stop = t_begin + std::chrono::seconds(o.duration_s);
  for (uint64_t i = 0; o.duration_s ? Clock::now() < stop : i < o.iters; ++i) {
    out[o.size - 1] = static_cast<uint8_t>(i);
    const auto t0 = Clock::now();
    if (!write_all(fd.get(), out.data(), out.size())) return fail(err, "send");
    if (read_exact(fd.get(), in.data(), in.size(), o.poll) != 1)
      return past_deadline() ? (errno = 0, fail(err, "time limit reached"))
                             : fail(err, "recv of the echo");
    const auto t1 = Clock::now();
    if (in[o.size - 1] != out[o.size - 1])
      return errno = 0, fail(err, "echo carries the wrong message");
    r->rtt_us.push_back(seconds(t1 - t0) * 1e6);
  }
  const uint64_t segs = data_segs_out(fd.get());
  r->iterations = r->rtt_us.size();
  r->frames_per_msg =
      r->iterations ? static_cast<double>(segs) / static_cast<double>(r->iterations) : 0;
  if (shutdown(fd.get(), SHUT_WR) != 0) return fail(err, "shutdown");
  // Wait for the server's close so its report below covers the whole stream.
  uint8_t tmp;
  while (read_exact(fd.get(), &tmp, 1, false) == 1) {
  }
  return true;
}

int run_client(Options& o) {
  std::string err;
  Fd ctl;
  if (!connect_to(o.host, o.port, &ctl, &err))
    return std::fprintf(stderr, "tcp-perf: %s\n", err.c_str()), 3;
  set_io_timeout(ctl.get());
  Hello h;
  h.kind = static_cast<uint32_t>(o.kind);
  h.conns = o.conns;
  h.tx_depth = o.tx_depth;
  h.poll = o.poll;
  h.duration_s = o.duration_s;
  h.size = o.size;
  h.iters = o.iters;
  if (!write_all(ctl.get(), &h, sizeof(h)))
    return std::fprintf(stderr, "tcp-perf: control: send\n"), 1;
  print_header(o);
  Row r;
  const bool ok =
      o.kind == Kind::kBw ? client_bw(o, o.host, &r, &err) : client_lat(o, o.host, &r, &err);
  if (!ok) {
    std::fprintf(stderr, "tcp-perf: %s\n", err.c_str());
    return g_timed_out ? 3 : 1;
  }
  Report rep;
  if (!read_struct(ctl.get(), &rep)) {
    std::fprintf(stderr, "tcp-perf: no report from the server\n");
    return g_timed_out ? 3 : 1;
  }
  // What the server counted must be what we saw acknowledged (bw) or echoed (lat), byte for byte.
  if (rep.errors != 0 || rep.messages != r.iterations || rep.bytes != r.iterations * o.size) {
    std::fprintf(
        stderr,
        "tcp-perf: server counted %lu messages / %lu bytes (%lu errors), client %lu messages\n",
        static_cast<unsigned long>(rep.messages), static_cast<unsigned long>(rep.bytes),
        static_cast<unsigned long>(rep.errors), static_cast<unsigned long>(r.iterations));
    return 1;
  }
  print_row(o, r);
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Server.

struct ServerConn {
  Fd fd;
  uint64_t bytes = 0, acked = 0;
  bool eof = false;
};

bool send_ack(ServerConn& c, uint64_t msgs) {
  c.acked = msgs;
  return write_all(c.fd.get(), &msgs, sizeof(msgs));
}

bool server_bw(const Hello& h, std::vector<ServerConn>& conns, Report* rep, std::string* err) {
  Fd ep(epoll_create1(0));
  if (ep.get() < 0) return fail(err, "epoll_create1");
  for (uint32_t i = 0; i < conns.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = i;
    if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, conns[i].fd.get(), &ev) != 0)
      return fail(err, "epoll_ctl");
  }
  // Acknowledge every half window so the client's window never runs dry while an ack is on its way.
  const uint64_t ack_every = std::max<uint64_t>(1, h.tx_depth / 2);
  std::vector<uint8_t> buf(256 * 1024);
  std::vector<epoll_event> evs(std::min<size_t>(conns.size(), 256));
  size_t open = conns.size();
  while (open > 0) {
    const int n = epoll_wait(ep.get(), evs.data(), static_cast<int>(evs.size()), h.poll ? 0 : 100);
    if (n < 0 && errno != EINTR) return fail(err, "epoll_wait");
    for (int k = 0; k < n; ++k) {
      ServerConn& c = conns[evs[k].data.u32];
      const ssize_t got = ::recv(c.fd.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return fail(err, "recv");
      }
      if (got == 0) {
        // The client's half-close: acknowledge the tail, and count a torn message as an error.
        if (c.bytes % h.size != 0) ++rep->errors;
        if (!send_ack(c, c.bytes / h.size)) return fail(err, "send ack");
        epoll_ctl(ep.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
        c.eof = true;
        --open;
        continue;
      }
      c.bytes += static_cast<uint64_t>(got);
      const uint64_t msgs = c.bytes / h.size;
      if (msgs - c.acked >= ack_every && !send_ack(c, msgs)) return fail(err, "send ack");
    }
    if (past_deadline()) return errno = 0, fail(err, "time limit reached");
  }
  for (auto& c : conns) {
    rep->messages += c.bytes / h.size;
    rep->bytes += c.bytes;
  }
  return true;
}

bool server_lat(const Hello& h, ServerConn& c, Report* rep, std::string* err) {
  set_io_timeout(c.fd.get());
  std::vector<uint8_t> buf(h.size);
  for (;;) {
    const int st = read_exact(c.fd.get(), buf.data(), buf.size(), h.poll != 0);
    if (st == 0) break;  // the client's half-close
    if (st < 0)
      return past_deadline() ? (errno = 0, fail(err, "time limit reached")) : fail(err, "recv");
    if (!write_all(c.fd.get(), buf.data(), buf.size())) return fail(err, "send echo");
    ++rep->messages;
    rep->bytes += h.size;
  }
  shutdown(c.fd.get(), SHUT_WR);
  return true;
}

int run_server(const Options& o) {
  std::string err;
  sockaddr_in sa;
  if (!make_addr(o.host, o.port, &sa, &err))
    return std::fprintf(stderr, "tcp-perf: %s\n", err.c_str()), 2;
  Fd ls(socket(AF_INET, SOCK_STREAM, 0));
  int one = 1;
  setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(ls.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      listen(ls.get(), 1024) != 0)
    return std::fprintf(stderr, "tcp-perf: bind/listen %s:%u: %s\n", o.host.c_str(), o.port,
                        std::strerror(errno)),
           1;
  // accept() wakes every 200 ms to check the deadline.
  timeval tv{0, 200000};
  setsockopt(ls.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto accept_one = [&](Fd* out) {
    while (!past_deadline()) {
      const int fd = accept(ls.get(), nullptr, nullptr);
      if (fd >= 0) {
        set_nodelay(fd);
        *out = Fd(fd);
        return true;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    }
    return false;
  };
  Fd ctl;
  Hello h;
  if (!accept_one(&ctl)) return std::fprintf(stderr, "tcp-perf: no client connected in time\n"), 3;
  set_io_timeout(ctl.get());
  if (!read_struct(ctl.get(), &h) || h.magic != kMagic || h.size == 0 || h.conns == 0 ||
      h.conns > 1024 || h.tx_depth == 0)
    return std::fprintf(stderr, "tcp-perf: not a tcp-perf client\n"), 1;
  std::vector<ServerConn> conns(h.conns);
  for (auto& c : conns)
    if (!accept_one(&c.fd))
      return std::fprintf(stderr, "tcp-perf: data connections did not arrive\n"), 3;
  Report rep;
  const bool ok = h.kind == static_cast<uint32_t>(Kind::kBw) ? server_bw(h, conns, &rep, &err)
                                                             : server_lat(h, conns[0], &rep, &err);
  if (!ok) {
    std::fprintf(stderr, "tcp-perf: %s\n", err.c_str());
    return g_timed_out ? 3 : 1;
  }
  if (!write_all(ctl.get(), &rep, sizeof(rep)))
    return std::fprintf(stderr, "tcp-perf: control: send report\n"), 1;
  return rep.errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  g_deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  return o.server ? run_server(o) : run_client(o);
}
