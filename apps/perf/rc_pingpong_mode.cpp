// rocedp-perf --rc-pingpong: one end of a Linux ibv_rc_pingpong pair (rc_pingpong_mode.hpp has
// the exchange). One adapter runtime with inline polling, as the rest of rocedp-perf: every wait
// keeps the core polling, so the peer's traffic is answered meanwhile.

#include "apps/perf/rc_pingpong_mode.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/perf_util.hpp"
#include "apps/perf/perftest_channel.hpp"
#include "rocedp/perftest.hpp"

namespace rocedp::perf {
namespace {

// The example's work request ids: a completion clears its bit of `pending`.
constexpr uintptr_t kRecv = 1, kSend = 2;
constexpr uint8_t kFill = 0x7b;  // what ibv_rc_pingpong's buffer holds
constexpr char kDone[] = "done";

bool fail(const std::string& what) {
  std::fprintf(stderr, "rocedp-perf --rc-pingpong: %s\n", what.c_str());
  return false;
}

struct Session {
  const RcPingpongOptions& o;
  AdapterRuntime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* mr = nullptr;
  Qp* qp = nullptr;
  // The first half is sent, the second receives (the example uses one buffer for both).
  std::vector<uint8_t> buf;
  uint32_t rx_depth = 0;
  PerftestKey mine, peer;
  uint32_t path_mtu = 1024;
  explicit Session(const RcPingpongOptions& options) : o(options) {}
};

NTSTATUS post_receive(Session& s) {
  const NdkSge sge{s.buf.data() + s.o.size, s.o.size, s.mr->get_local_token()};
  return s.qp->receive(reinterpret_cast<void*>(kRecv), &sge, 1);
}

bool setup(Session& s) {
  std::string err;
  AdapterRuntime& rt = *s.rt;
  const auto& lim = rt.config().limits;
  s.rx_depth = std::min(s.o.rx_depth, lim.max_qp_depth);
  if (s.rx_depth != s.o.rx_depth)
    std::fprintf(stderr, "rocedp-perf --rc-pingpong: -r %u above the adapter's %u: using %u\n",
                 s.o.rx_depth, lim.max_qp_depth, s.rx_depth);
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] { st = rt.adapter().create_pd(nullptr, nullptr, &s.pd); });
  if (st != STATUS_SUCCESS) return fail("create_pd: " + std::string(status_name(st)));
  s.buf.assign(2 * uint64_t{s.o.size}, 0);
  std::fill(s.buf.begin(), s.buf.begin() + s.o.size, kFill);
  std::vector<Qp*> qps;
  if (!create_cq(rt, std::min(lim.max_cq_depth, s.rx_depth + 2), &s.cq, &err) ||
      !register_buffer(rt, s.pd, s.buf.data(), s.buf.size(), &s.mr, &err) ||
      !create_qps(rt, s.pd, s.cq, 1, s.rx_depth, 1, &qps, &err))
    return fail(err);
  s.qp = qps[0];
  // As the example: every receive is posted before the exchange, so the peer may send at once.
  for (uint32_t k = 0; k < s.rx_depth; ++k)
    if (post_receive(s) != STATUS_SUCCESS) return fail("post receive");
  return true;
}

NTSTATUS post_send(Session& s) {
  const NdkSge sge{s.buf.data(), s.o.size, s.mr->get_local_token()};
  return s.qp->send(reinterpret_cast<void*>(kSend), &sge, 1, 0);
}

void print_address(const char* which, const PerftestKey& k) {
  std::printf("  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", which, k.lid, k.qpn, k.psn,
              format_gid(k.gid).c_str());
  std::fflush(stdout);
}

// RTR/RTS with the peer's QPN and PSN, as the example sets them (one READ each way, RNR timer 12,
// ACK timeout 14, 7 retries), to the MAC ARP (IPv4-mapped GID) or NDP (IPv6 GID) finds.
bool connect_qp(Session& s) {
  NdkQpConnectParams p;
  p.remote_qpn = s.peer.qpn;
  p.remote_ip = s.peer.ipv4();
  if (p.remote_ip == 0) std::memcpy(p.remote_ip6, s.peer.gid, 16);  // RoCEv2 over IPv6
  p.path_mtu = s.path_mtu;
  p.local_psn = s.mine.psn;
  p.remote_psn = s.peer.psn;
  p.retry_count = 7;
  p.rnr_retry = 7;
  p.local_ack_timeout = 14;
  p.min_rnr_timer = 12;
  p.inbound_read_limit = 1;
  p.outbound_read_limit = 1;
  std::string err;
  return connect_out_of_band(*s.rt, s.qp, p, &err) || fail(err);
}

bool exchange_and_connect(Session& s) {
  TcpChannel ch(*s.rt);
  std::string err;
  uint8_t mine[kPingpongTextSize], theirs[kPingpongTextSize];
  encode_pingpong_text(s.mine, mine);
  char done[sizeof(kDone)] = {};
  if (!s.o.host.empty()) {
    if (!ch.connect_to(s.o.host, s.o.port, &err) || !ch.write(mine, sizeof(mine), &err) ||
        !ch.read(theirs, sizeof(theirs), &err) || !ch.write(kDone, sizeof(kDone), &err))
      return fail("exchange: " + err);
  } else {
    if (!ch.listen_and_accept(s.o.port, &err) || !ch.read(theirs, sizeof(theirs), &err))
      return fail("exchange: " + err);
  }
  if (!decode_pingpong_text(theirs, sizeof(theirs), &s.peer))
    return fail("exchange: the peer's address is not ibv_rc_pingpong's LID:QPN:PSN:GID text");
  // The server is ready (RTR/RTS) before it answers; the client connects after the exchange.
  if (s.o.host.empty() &&
      (!connect_qp(s) || !ch.write(mine, sizeof(mine), &err) || !ch.read(done, sizeof(done), &err)))
    return err.empty() ? false : fail("exchange: " + err);
  print_address("remote address:", s.peer);
  return s.o.host.empty() || connect_qp(s);
}

// --verify: message `index` (from 1) is SIZE bytes of 0x7b; false (the reason printed) if not.
bool check_message(Session& s, const NdkResultEx& r, uint64_t index) {
  if (!s.o.verify) return true;
  const uint8_t* got = s.buf.data() + s.o.size;
  const uint8_t* bad = std::find_if(got, got + s.o.size, [](uint8_t b) { return b != kFill; });
  if (r.bytes_transferred != s.o.size || bad != got + s.o.size)
    return fail("--verify: message " + std::to_string(index) + " of " +
                std::to_string(r.bytes_transferred) + " bytes, wanted " + std::to_string(s.o.size) +
                " bytes of 0x7b" +
                (bad != got + s.o.size ? " (byte " + std::to_string(bad - got) + " differs)" : ""));
  std::fill(s.buf.begin() + s.o.size, s.buf.end(), 0);  // the next message must write it again
  return true;
}

// The example's loop: a SEND goes once the last one completed and a message arrived; receives
// are topped up to -r whenever one or none is left.
bool ping_pong(Session& s) {
  uint32_t posted = s.rx_depth;  // by setup()
  uint32_t pending = kRecv;
  if (!s.o.host.empty()) {
    if (post_send(s) != STATUS_SUCCESS) return fail("post send");
    pending |= kSend;
  }
  const uint64_t start = clock::now();
  uint64_t sent = 0, received = 0;
  uint32_t idle = 0;
  while (received < s.o.iters || sent < s.o.iters) {
    s.rt->poll();
    NdkResultEx r[16];
    const uint32_t n = s.cq->get_results_ex(r, 16);
    if (n == 0 && (++idle & 0xFFF) == 0 && clock::deadline().passed())
      return fail("time limit reached after " + std::to_string(sent) + " messages sent, " +
                  std::to_string(received) + " received");
    for (uint32_t k = 0; k < n; ++k) {
      const auto id = reinterpret_cast<uintptr_t>(r[k].request_context);
      if (r[k].status != STATUS_SUCCESS)
        return fail("completion of " + std::string(id == kSend ? "a SEND" : "a receive") + ": " +
                    std::string(status_name(r[k].status)));
      if (id == kSend) {
        ++sent;
      } else {
        if (!check_message(s, r[k], ++received)) return false;
        if (--posted <= 1)
          for (; posted < s.rx_depth; ++posted)
            if (post_receive(s) != STATUS_SUCCESS) return fail("post receive");
      }
      pending &= ~static_cast<uint32_t>(id);
      if (sent < s.o.iters && pending == 0) {
        if (post_send(s) != STATUS_SUCCESS) return fail("post send");
        pending = kRecv | kSend;
      }
    }
  }
  const double usec = clock::to_ns(clock::now() - start) / 1000;
  const auto bytes = static_cast<long long>(s.o.size) * s.o.iters * 2;
  std::printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1e6, bytes * 8. / usec);
  std::printf("%u iters in %.2f seconds = %.2f usec/iter\n", s.o.iters, usec / 1e6,
              usec / s.o.iters);
  if (s.o.verify)
    std::fprintf(stderr, " verify: %lu messages of %u bytes checked byte for byte\n",
                 static_cast<unsigned long>(received), s.o.size);
  std::fflush(stdout);
  // The peer's last message is acknowledged by the core; give that ACK time to leave before the
  // QP closes (the example's kernel peer sends its ACKs without the process).
  s.rt->wait_until([] { return false; }, std::chrono::milliseconds(200));
  return true;
}

bool run_session(Session& s) {
  if (!setup(s)) return false;
  s.path_mtu = std::min(s.o.mtu, path_mtu_for(s.rt->port().mtu));
  s.mine.qpn = s.qp->qpn();
  s.mine.psn = static_cast<uint32_t>(
      (clock::now() * 2654435761u + s.mine.qpn + static_cast<uint32_t>(getpid())) & 0xFFFFFF);
  s.mine.set_ipv4(s.rt->port().ip);
  if (s.rt->port().has_ip6) std::memcpy(s.mine.gid, s.rt->port().ip6.data(), 16);  // --ip6
  print_address("local address: ", s.mine);
  return exchange_and_connect(s) && ping_pong(s);
}

}  // namespace

int run_rc_pingpong(const RcPingpongOptions& o) {
  return run_endpoint(o.endpoint, o.timeout_s, "rocedp-perf --rc-pingpong",
                      [&](AdapterRuntime& rt) {
                        Session s(o);
                        s.rt = &rt;
                        const bool ok = run_session(s);
                        close_objects(rt, {s.qp}, {s.cq}, {s.mr}, s.pd);
                        return ok ? 0 : 1;
                      });
}

}  // namespace rocedp::perf
