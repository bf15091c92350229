// rocedp-perf --perftest: the session and its runs (perftest_exchange.hpp has the exchange,
// perftest_channel.hpp its carriers, report.hpp perftest's output). The endpoint is one adapter
// runtime with inline polling (as the rest of rocedp-perf): every wait below keeps the core
// polling, so the peer's traffic is answered meanwhile.

#include "apps/perf/perftest_mode.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/loops.hpp"
#include "apps/perf/perf_util.hpp"
#include "apps/perf/perftest_channel.hpp"
#include "apps/perf/perftest_exchange.hpp"
#include "apps/perf/report.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"

namespace rocedp::perf {
namespace {

bool past_deadline() {
  return clock::deadline().passed();
}

double ticks_us(uint64_t ticks) {
  return clock::to_ns(ticks) / 1e3;
}

bool fail(const std::string& what) {
  std::fprintf(stderr, "rocedp-perf --perftest: %s\n", what.c_str());
  return false;
}

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
  const PerftestOptions& o;
  AdapterRuntime* rt = nullptr;
  bool client = false;
  Pd* pd = nullptr;
  Cq* cq = nullptr;  // data QPs
  Mr* mr = nullptr;
  Srq* srq = nullptr;        // --use-srq: every QP's receives
  std::vector<uint8_t> buf;  // [0, half): what we send / READ into; [half, ...): the peer's target
  uint64_t half = 0;
  std::vector<Qp*> qps;
  uint32_t rx_depth = 1;
  uint32_t qp_depth = 1;
  uint32_t path_mtu = 1024;
  std::vector<PerftestKey> mine, peer;
  std::vector<uint64_t> words;  // CMP_AND_SWAP client: each peer word's value before the run
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
  explicit Session(const PerftestOptions& options) : o(options), client(!options.server) {}
};

uint64_t max_size(const PerftestOptions& o) {
  return o.all_sizes ? (1ull << 23) : o.size;
}

bool setup_objects(Session& s) {
  std::string err;
  AdapterRuntime& rt = *s.rt;
  const auto& lim = rt.config().limits;
  const bool bw = s.o.kind == Kind::kBw;
  s.qp_depth = std::min(std::max<uint32_t>(s.o.tx_depth, 2), lim.max_qp_depth);
  s.rx_depth = s.o.op == Op::kSend ? std::min<uint32_t>(bw ? 512 : 16, lim.max_qp_depth) : 1;
  // --use-srq: one SRQ of rx_depth receives for every QP, as perftest sizes it.
  if (s.o.use_srq) s.rx_depth = std::min(s.rx_depth, lim.max_srq_depth);
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] { st = rt.adapter().create_pd(nullptr, nullptr, &s.pd); });
  if (st != STATUS_SUCCESS) return fail("create_pd: " + std::string(status_name(st)));
  const uint64_t want = static_cast<uint64_t>(s.o.qps) * (s.qp_depth + s.rx_depth) + 64;
  const auto depth =
      static_cast<uint32_t>(std::min<uint64_t>(lim.max_cq_depth, std::max<uint64_t>(want, 256)));
  if (!create_cq(rt, depth, &s.cq, &err)) return fail(err);
  // Page-rounded halves; the upper one has room for perftest's cycling through its cycle buffer.
  s.half = (max_size(s.o) + 4095) / 4096 * 4096;
  s.buf.assign(2 * s.half + 8192, 0);
  for (uint64_t k = 0; k < s.half; ++k)
    s.buf[k] = static_cast<uint8_t>(k * 131 + 7);  // what we send
  // --dump-recv: the peer's target starts as a pattern no perftest buffer holds, so a byte the
  // peer never wrote shows in the dump.
  if (!s.o.dump_file.empty())
    std::fill(s.buf.begin() + s.half, s.buf.begin() + s.half + max_size(s.o), 0x5A);
  // Atomics: the words of the target's even cache lines start at 0, of its odd lines at 1, so
  // perftest's CMP_AND_SWAP (compare 0) meets both outcomes: it succeeds on every other line.
  if (s.o.op == Op::kAtomic)
    for (uint64_t off = 0; off < s.half; off += 8) {
      const uint64_t v = (off / 64) % 2;
      std::memcpy(s.buf.data() + s.half + off, &v, 8);
    }
  if (!register_buffer(rt, s.pd, s.buf.data(), s.buf.size(), &s.mr, &err) ||
      (s.o.use_srq && !create_srq(rt, s.pd, s.rx_depth, &s.srq, &err)) ||
      !create_qps(rt, s.pd, s.cq, s.o.qps, s.rx_depth, s.qp_depth, &s.qps, &err, s.srq))
    return fail(err);
  if (s.o.rdma_cm) {
    std::vector<Qp*> control;
    s.qch = std::make_unique<QpChannel>(rt);
    if (!create_cq(rt, 64, &s.ccq, &err) ||
        !register_buffer(rt, s.pd, s.qch->buffer().data(), s.qch->buffer().size(), &s.cmr, &err) ||
        !create_qps(rt, s.pd, s.ccq, 1, QpChannel::kRecvSlots, 4, &control, &err))
      return fail(err);
    s.cqp = control[0];
    s.qch->attach(s.cqp, s.ccq, s.cmr);
  }
  return true;
}

// One receive of a SEND test into the target half: on QP q's receive queue, or on the SRQ.
NTSTATUS post_receive(Session& s, uint32_t q) {
  const NdkSge sge{s.buf.data() + s.half, static_cast<uint32_t>(max_size(s.o)),
                   s.mr->get_local_token()};
  return s.srq != nullptr ? s.srq->receive(nullptr, &sge, 1) : s.qps[q]->receive(nullptr, &sge, 1);
}

// Receives of SEND tests, posted before the peer may send.
bool post_data_receives(Session& s) {
  if (s.o.op != Op::kSend) return true;
  for (uint32_t q = 0; q < (s.srq != nullptr ? 1 : s.o.qps); ++q)
    for (uint32_t k = 0; k < s.rx_depth; ++k)
      if (post_receive(s, q) != STATUS_SUCCESS) return fail("posting receives failed");
  return true;
}

void fill_keys(Session& s) {
  const uint32_t irl = s.rt->config().limits.max_read_limit;
  const uint32_t ip = s.rt->port().ip;
  s.mine.assign(s.o.qps, PerftestKey{});
  for (uint32_t i = 0; i < s.o.qps; ++i) {
    PerftestKey& k = s.mine[i];
    k.out_reads = s.o.op == Op::kRead || s.o.op == Op::kAtomic ? irl : 1;
    k.qpn = s.qps[i]->qpn();
    k.psn = static_cast<uint32_t>(
        (clock::now() * 2654435761u + k.qpn + static_cast<uint32_t>(getpid())) & 0xFFFFFF);
    k.rkey = s.mr->get_remote_token();
    k.vaddr = reinterpret_cast<uint64_t>(s.buf.data() + s.half);
    k.set_ipv4(ip);
    if (s.rt->port().has_ip6) std::memcpy(k.gid, s.rt->port().ip6.data(), 16);  // --ip6
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

// One of perftest's syncs after the per-QP keys: the first carries every QP's key again, in QP
// order; the others QP 0's alone (with -q 1 every sync is one key).
bool sync_keys(Session& s, bool every_qp, std::string* err) {
  PerftestKey scratch;
  for (uint32_t i = 0; i < (every_qp ? s.o.qps : 1); ++i)
    if (!xchg_key(s, i, &scratch, err)) return false;
  return true;
}

// TCP exchange: the QPs go to RTR/RTS with the peer's QPN and PSN (perftest: our sq_psn is the PSN
// we sent, the peer's is our rq_psn), to the MAC ARP (IPv4-mapped GID) or NDP (IPv6 GID) finds.
bool connect_qps_oob(Session& s) {
  const uint32_t limit = s.rt->config().limits.max_read_limit;
  for (uint32_t i = 0; i < s.o.qps; ++i) {
    NdkQpConnectParams p;
    p.remote_qpn = s.peer[i].qpn;
    p.remote_ip = s.peer[i].ipv4();
    if (p.remote_ip == 0) std::memcpy(p.remote_ip6, s.peer[i].gid, 16);  // RoCEv2 over IPv6
    p.path_mtu = s.path_mtu;
    p.local_psn = s.mine[i].psn;
    p.remote_psn = s.peer[i].psn;
    p.local_ack_timeout = 14;
    p.min_rnr_timer = 12;
    p.inbound_read_limit = limit;
    p.outbound_read_limit = std::max<uint32_t>(1, std::min(limit, s.peer[i].out_reads));
    std::string err;
    if (!connect_out_of_band(*s.rt, s.qps[i], p, &err)) return fail(err);
  }
  return true;
}

// -R, server side: the first connection request is perftest's control connection.
bool accept_one(Session& s, uint32_t index, Qp* qp) {
  if (!s.rt->wait_until(
          [&] {
            return s.incoming.count.load(std::memory_order_acquire) > index || past_deadline();
          },
          std::chrono::seconds(s.o.timeout_s)) ||
      s.incoming.count.load() <= index)
    return fail("rdma_cm: connection request " + std::to_string(index) + " did not come");
  Connector* c = Connector::from(s.incoming.slots[index]);
  s.connectors.push_back(c);
  const NTSTATUS st = accept_connection(*s.rt, c, qp, s.rt->config().limits.max_read_limit,
                                        &on_disconnect, &s.gone[index], s.pend_accept[index]);
  // accept completes on the RTU (or the peer's first packet); perftest's client sends at once.
  if (st != STATUS_SUCCESS) return fail("rdma_cm accept: " + std::string(status_name(st)));
  return true;
}

// -R, client side: connect (retrying while the server is not listening yet), then complete.
bool connect_one(Session& s, uint32_t index, Qp* qp) {
  Connector* c = nullptr;
  const NTSTATUS st =
      connect_retrying(*s.rt, qp, NdkSockAddr{*parse_ipv4(s.o.host), s.o.port},
                       s.rt->config().limits.max_read_limit, &on_disconnect, &s.gone[index], &c);
  if (st != STATUS_SUCCESS)
    return fail("rdma_cm connect to " + s.o.host + ":" + std::to_string(s.o.port) + ": " +
                std::string(status_name(st)));
  s.connectors.push_back(c);
  return true;
}

void disconnect_all(Session& s) {
  disconnect_and_close(*s.rt, s.connectors, std::vector<bool>(s.connectors.size(), true), [&] {
    if (s.listener != nullptr) s.listener->close(nullptr, nullptr);
  });
  s.connectors.clear();
  s.listener = nullptr;
}

// ------------------------------------------------------------------------------------------------
// The measured runs.

// Atomics go where perftest puts them: one 8-byte word per cache line of the peer's 4096-byte
// cycle buffer, request k to word k mod 64; the original value lands in the same word of ours.
// FETCH_AND_ADD adds 1 (perftest's value). CMP_AND_SWAP counts up: request k expects the value
// its word held before the run (learn_words) plus the swaps before it, and swaps in one more, so
// every swap succeeds while nothing else writes the words. (perftest swaps 0 for 0.)
constexpr uint64_t kAtomicWords = 4096 / 64;

NTSTATUS post_atomic(Session& s, uint32_t q, uint64_t k, bool learning = false) {
  const uint64_t w = k % kAtomicWords;
  const NdkSge result{s.buf.data() + w * 64, 8, s.mr->get_local_token()};
  const uint64_t raddr = s.peer[q].vaddr + w * 64;
  if (!s.o.cmp_swap || learning)
    return s.qps[q]->fetch_add(nullptr, result, raddr, s.peer[q].rkey, learning ? 0 : 1, 0);
  const uint64_t expect = s.words[q * kAtomicWords + w] + k / kAtomicWords;
  return s.qps[q]->compare_swap(nullptr, result, raddr, s.peer[q].rkey, expect, expect + 1, 0);
}

// CMP_AND_SWAP client: reads every word's value with a FETCH_AND_ADD of 0, one at a time.
bool learn_words(Session& s) {
  s.words.assign(s.o.qps * kAtomicWords, 0);
  NdkResultEx r[16];
  for (uint32_t q = 0; q < s.o.qps; ++q)
    for (uint64_t w = 0; w < kAtomicWords; ++w) {
      const NTSTATUS st = post_atomic(s, q, w, /*learning=*/true);
      if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
      uint32_t n = 0;
      while (n == 0) {
        s.rt->poll();
        n = s.cq->get_results_ex(r, 16);
        if (past_deadline()) return fail("time limit reached reading the peer's words");
      }
      if (r[0].status != STATUS_SUCCESS)
        return fail("completion error " + std::string(status_name(r[0].status)));
      std::memcpy(&s.words[q * kAtomicWords + w], s.buf.data() + w * 64, 8);
    }
  return true;
}

struct BwResult {
  uint64_t size = 0, iters = 0, messages = 0;
  double seconds = 0, peak_msgs_per_s = 0;
};

// Client bandwidth: up to tx_depth requests in flight per QP, iters per QP (or -D seconds).
bool run_bw_client(Session& s, uint64_t size, BwResult* out) {
  const uint32_t nq = s.o.qps;
  std::vector<uint32_t> inflight(nq, 0);
  std::vector<uint64_t> posted(nq, 0);
  uint64_t total_posted = 0, done = 0;
  NdkResultEx r[64];
  PeakMeter peak;
  const uint64_t t0 = clock::now();
  peak.start(t0);
  const uint64_t stop = s.o.duration_s ? t0 + s.o.duration_s * clock::hz() : UINT64_MAX;
  bool posting = true;
  while (posting || done < total_posted) {
    s.rt->poll();
    if (posting) {
      for (uint32_t q = 0; q < nq; ++q) {
        while (inflight[q] < s.qp_depth && (s.o.duration_s || posted[q] < s.o.iters)) {
          NdkSge sge{s.buf.data(), static_cast<uint32_t>(size), s.mr->get_local_token()};
          const uint64_t raddr = s.peer[q].vaddr;
          NTSTATUS st =
              s.o.op == Op::kWrite    ? s.qps[q]->write(nullptr, &sge, 1, raddr, s.peer[q].rkey, 0)
              : s.o.op == Op::kRead   ? s.qps[q]->read(nullptr, &sge, 1, raddr, s.peer[q].rkey, 0)
              : s.o.op == Op::kAtomic ? post_atomic(s, q, posted[q])
                                      : s.qps[q]->send(nullptr, &sge, 1, 0);
          if (st == STATUS_INSUFFICIENT_RESOURCES) break;
          if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
          ++inflight[q];
          ++posted[q];
          ++total_posted;
        }
      }
      if (s.o.duration_s ? clock::now() >= stop : total_posted == s.o.iters * nq) posting = false;
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
    if (n) peak.add(n, clock::now());
    if (past_deadline())
      return fail("time limit reached with " + std::to_string(total_posted - done) +
                  " requests outstanding");
  }
  out->size = size;
  out->iters = s.o.duration_s ? done / nq : s.o.iters;
  out->messages = done;
  out->seconds = ticks_us(clock::now() - t0) / 1e6;
  out->peak_msgs_per_s = peak.peak;
  return true;
}

// SEND bandwidth, server: count the messages of every QP, keeping receives posted.
bool run_bw_server_send(Session& s, uint64_t size, BwResult* out) {
  const uint64_t want = s.o.iters * s.o.qps;
  uint64_t got = 0, t0 = 0, t_last = 0;
  NdkResultEx r[64];
  PeakMeter peak;
  const uint64_t quiet = clock::hz();  // -D: one second without a message ends the run
  uint64_t last_seen = clock::now();
  while (s.o.duration_s ? true : got < want) {
    s.rt->poll();
    const uint32_t n = s.cq->get_results_ex(r, 64);
    const uint64_t now = clock::now();
    bool received = false;
    for (uint32_t k = 0; k < n; ++k) {
      if (r[k].status != STATUS_SUCCESS)
        return fail("completion error " + std::string(status_name(r[k].status)));
      if (r[k].type != NdkOperationType::kReceive) continue;
      if (got++ == 0) {
        t0 = now;
        peak.start(now);
      }
      received = true;
      last_seen = now;
      peak.add(1, now);
      post_receive(s, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r[k].qp_context)));
    }
    // The last message counts as received once its batch is handled (as perftest stamps each
    // completion as it takes it): a run that arrives in one poll still has a duration.
    if (received) t_last = clock::now();
    if (s.o.duration_s && got > 0 && now - last_seen > quiet) break;
    if (past_deadline())
      return fail("time limit reached after " + std::to_string(got) + " of " +
                  std::to_string(want) + " messages");
  }
  out->size = size;
  out->iters = s.o.duration_s ? got / s.o.qps : s.o.iters;
  out->messages = got;
  out->seconds = got > 1 ? ticks_us(t_last - t0) / 1e6 * static_cast<double>(got) /
                               static_cast<double>(got - 1)
                         : 0;
  out->peak_msgs_per_s = peak.peak;
  return true;
}

// Latency ping-pongs, as perftest runs them. WRITE: the server writes first; each side waits for
// the last byte of the peer's message to turn to the iteration number before it writes back.
// SEND: the client sends first. READ and atomics: the client alone, one request at a time.
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
  const uint64_t stop = s.o.duration_s ? clock::now() + s.o.duration_s * clock::hz() : UINT64_MAX;
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
        post_receive(s, 0);
      } else {
        ++sends_done;
      }
    }
  };
  NdkSge sge{s.buf.data(), static_cast<uint32_t>(size), s.mr->get_local_token()};
  if (s.o.op == Op::kRead || s.o.op == Op::kAtomic) {
    if (!s.client)
      return true;  // perftest's READ/atomic latency server only takes part in the exchange
    for (uint64_t i = 0; s.o.duration_s ? clock::now() < stop : i < iters; ++i) {
      const uint64_t t0 = clock::now();
      const NTSTATUS st = s.o.op == Op::kRead
                              ? qp->read(nullptr, &sge, 1, s.peer[0].vaddr, s.peer[0].rkey, 0)
                              : post_atomic(s, 0, i);
      if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
      while (sends_done <= i && !failed) {
        drain();
        if (past_deadline()) return fail("time limit reached");
      }
      if (failed) return false;
      out.push_back(ticks_us(clock::now() - t0));
    }
    return true;
  }
  volatile uint8_t* poll_byte = s.buf.data() + s.half + size - 1;
  uint8_t* post_byte = s.buf.data() + size - 1;
  const bool sender_first = s.o.op == Op::kWrite ? !s.client : s.client;
  uint64_t scnt = 0, rcnt = 0;
  const uint64_t wait_limit = s.o.duration_s ? stop + 2 * clock::hz() : UINT64_MAX;
  while (s.o.duration_s ? clock::now() < stop : (scnt < iters || rcnt < iters)) {
    if ((s.o.duration_s || rcnt < iters) && !(scnt == 0 && sender_first)) {
      ++rcnt;
      if (s.o.op == Op::kWrite) {
        while (*poll_byte != static_cast<uint8_t>(rcnt) && !failed) {
          drain();
          if (past_deadline() || clock::now() > wait_limit) break;
        }
      } else {
        while (recvs < rcnt && !failed) {
          drain();
          if (past_deadline() || clock::now() > wait_limit) break;
        }
      }
      if (failed) return false;
      if (past_deadline())
        return fail("time limit reached waiting for message " + std::to_string(rcnt));
      if (clock::now() > wait_limit) break;
    }
    if (s.o.duration_s || scnt < iters) {
      *post_byte = static_cast<uint8_t>(++scnt);
      posted.push_back(clock::now());
      NTSTATUS st;
      do {
        st = s.o.op == Op::kWrite ? qp->write(nullptr, &sge, 1, s.peer[0].vaddr, s.peer[0].rkey, 0)
                                  : qp->send(nullptr, &sge, 1, 0);
        if (st == STATUS_INSUFFICIENT_RESOURCES) drain();
      } while (st == STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
      if (st != STATUS_SUCCESS) return fail("post: " + std::string(status_name(st)));
    }
    drain();
    if (failed) return false;
  }
  // Let the last requests complete (their ACKs), so the exchange that follows finds a quiet QP.
  while (sends_done < scnt && !failed && !past_deadline()) drain();
  if (failed) return false;
  // perftest: half of the time between two consecutive posts of this side (one round trip).
  for (size_t i = 1; i < posted.size(); ++i) out.push_back(ticks_us(posted[i] - posted[i - 1]) / 2);
  return true;
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

std::vector<uint64_t> sizes_of(const PerftestOptions& o) {
  if (!o.all_sizes) return {o.size};
  std::vector<uint64_t> v;
  for (uint64_t x = 2; x <= (1ull << 23); x *= 2) v.push_back(x);
  return v;
}

// ------------------------------------------------------------------------------------------------

// The exchange channel: perftest's TCP socket, or with -R the control connection (the first
// rdma_cm connection) and its QP.
bool open_channel(Session& s) {
  std::string err;
  if (!s.o.rdma_cm) {
    s.tch = std::make_unique<TcpChannel>(*s.rt);
    if (!(s.client ? s.tch->connect_to(s.o.host, s.o.port, &err)
                   : s.tch->listen_and_accept(s.o.port, &err)))
      return fail("TCP exchange: " + err);
    s.ch = s.tch.get();
    return true;
  }
  if (!s.qch->post_receives()) return fail("control QP receives");
  if (!s.client) {
    NTSTATUS st = STATUS_PENDING;
    s.rt->run_on_control([&] {
      st = create_listener(s.rt->adapter(), &on_connect_event, &s.incoming, nullptr, nullptr,
                           &s.listener);
      if (st == STATUS_SUCCESS) st = s.listener->listen(NdkSockAddr{0, s.o.port}, nullptr, nullptr);
    });
    if (st != STATUS_SUCCESS)
      return fail("rdma_cm listen on port " + std::to_string(s.o.port) + ": " +
                  std::string(status_name(st)));
    // A marker for scripts that start a peer's client only once this one can answer its REQ.
    std::printf("rocedp-perf --perftest: listening on port %u\n", s.o.port);
    std::fflush(stdout);
    if (!accept_one(s, 0, s.cqp)) return false;
  } else if (!connect_one(s, 0, s.cqp)) {
    return false;
  }
  s.ch = s.qch.get();
  return true;
}

// Versions, system data and MTU: what perftest exchanges before any key.
bool exchange_preamble(Session& s) {
  std::string err;
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
  // perftest's -m: what this side offers, at most the port's (perftest falls back to the port's
  // active MTU the same way); the exchange then takes the smaller of the two sides'.
  s.path_mtu = path_mtu_for(s.rt->port().mtu);
  if (s.o.mtu != 0) s.path_mtu = std::min(s.path_mtu, s.o.mtu);
  encode_mtu(s.path_mtu, mtu_mine);
  if (!exchange(*s.ch, s.client, mtu_mine, mtu_peer, 2, &err)) return fail("MTU exchange: " + err);
  if (const uint32_t pm = decode_mtu(mtu_peer); pm != 0) s.path_mtu = std::min(s.path_mtu, pm);
  return true;
}

// The client's bandwidth report (write/read bandwidth): the server prints it as its own row.
bool exchange_report(Session& s, const BwResult& last) {
  std::string err;
  if (!sync_keys(s, false, &err)) return fail("sync: " + err);
  const BwReport mine = s.client ? make_report(s, last) : BwReport{};
  uint8_t m[5][kReportFieldSize], p[5][kReportFieldSize];
  put_be64(m[0], mine.size);
  put_be64(m[1], mine.iterations);
  put_be_double(m[2], mine.bw_peak);
  put_be_double(m[3], mine.bw_avg);
  put_be_double(m[4], mine.msg_rate);
  for (int i = 0; i < 5; ++i)
    if (!exchange(*s.ch, s.client, m[i], p[i], kReportFieldSize, &err))
      return fail("report exchange: " + err);
  if (!s.client) {
    BwReport peer;
    peer.size = get_be64(p[0]);
    peer.iterations = get_be64(p[1]);
    peer.bw_peak = get_be_double(p[2]);
    peer.bw_avg = get_be_double(p[3]);
    peer.msg_rate = get_be_double(p[4]);
    print_perftest_bw_row(peer);  // as perftest's server: the client's measurement
  }
  return true;
}

bool run_session(Session& s, int* status) {
  std::string err;
  const bool bw = s.o.kind == Kind::kBw;
  const bool send = s.o.op == Op::kSend;
  *status = 1;
  if (!setup_objects(s)) return false;
  s.gone = std::make_unique<std::atomic<int>[]>(s.o.qps + 1);  // value-initialized: all 0
  s.pend_accept = std::vector<Pending>(s.o.qps + 1);
  if (!open_channel(s) || !exchange_preamble(s) || !post_data_receives(s)) return false;
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
  for (int k = 0; k < pre_run_syncs(bw, send); ++k)
    if (!sync_keys(s, k == 0, &err)) return fail("sync: " + err);
  PerftestBanner banner;
  banner.op = s.o.op;
  banner.cmp_swap = s.o.cmp_swap;
  banner.srq = s.srq != nullptr;
  banner.kind = s.o.kind;
  banner.qps = s.o.qps;
  banner.tx_depth = s.o.tx_depth;
  banner.rx_depth = s.rx_depth;
  banner.path_mtu = s.path_mtu;
  banner.rdma_cm = s.o.rdma_cm;
  banner.report_gbits = s.o.report_gbits;
  banner.mine = s.mine;
  banner.peer = s.peer;
  print_perftest_banner(banner);

  // The run(s).
  bool ok = !(s.client && s.o.op == Op::kAtomic && s.o.cmp_swap) || learn_words(s);
  std::vector<double> lat;
  BwResult last;
  for (uint64_t size : sizes_of(s.o)) {
    if (!ok) break;
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
      print_perftest_bw_row(make_report(s, r));
    } else {
      ok = run_lat(s, size, &lat);
      if (!ok) break;
      if (s.client || (s.o.op != Op::kRead && s.o.op != Op::kAtomic))
        print_perftest_lat_row(size, s.o.iters, lat);
    }
  }
  if (!ok) {
    *status = clock::deadline().timed_out() ? 3 : 1;
    return false;
  }
  if (exchanges_report(bw, send) && !exchange_report(s, last)) return false;
  const bool closing = closes_with_key(bw, s.o.op == Op::kWrite);
  if (closing && !sync_keys(s, false, &err)) return fail("closing sync: " + err);
  if (closing && !s.o.rdma_cm) {
    uint8_t done[5] = {'d', 'o', 'n', 'e', 0}, peer_done[5];
    if (!s.tch->write(done, 5, &err) || !s.tch->read(peer_done, 5, &err))
      return fail("closing exchange: " + err);
  }
  print_perftest_end();
  if (!s.o.dump_file.empty()) {
    std::FILE* f = std::fopen(s.o.dump_file.c_str(), "wb");
    if (f == nullptr) return fail("cannot write " + s.o.dump_file);
    // Where the peer's bytes landed: a READ client's own buffer, otherwise the target region.
    const uint8_t* region = s.client && s.o.op == Op::kRead ? s.buf.data() : s.buf.data() + s.half;
    // Atomics: the whole cycle buffer perftest's requests spread over.
    std::fwrite(region, 1, s.o.op == Op::kAtomic ? s.half : max_size(s.o), f);
    std::fclose(f);
  }
  *status = 0;
  return true;
}

void close_session(Session& s) {
  if (s.o.rdma_cm) disconnect_all(s);
  // Let the DREPs and the last ACKs leave.
  s.rt->wait_until([] { return false; }, std::chrono::milliseconds(200));
  std::vector<Qp*> qps = s.qps;
  qps.push_back(s.cqp);
  close_objects(*s.rt, qps, {s.cq, s.ccq}, {s.mr, s.cmr}, s.pd, {s.srq});
}

}  // namespace

int run_perftest(const PerftestOptions& o) {
  Session s(o);
  return run_endpoint(o.endpoint, o.timeout_s, "rocedp-perf --perftest", [&](AdapterRuntime& rt) {
    s.rt = &rt;
    int status = 1;
    run_session(s, &status);
    close_session(s);
    s.rt = nullptr;
    return status;
  });
}

}  // namespace rocedp::perf
