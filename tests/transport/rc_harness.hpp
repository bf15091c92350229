#pragma once
// Two "hosts" (an RcEngine each, with its own MR table, queues and CQs) joined by an in-memory
// wire: every frame a host's sink sends is captured in its `tx` list and delivered to the peer
// only when the test says so (CONVENTIONS.md item 14). Time is virtual.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/rc_engine.hpp"
#include "dataplane/rc/responder.hpp"
#include "dataplane/rc/work_queue.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/parser.hpp"

namespace rocedp::rc::test {

using Frame = std::vector<uint8_t>;

inline constexpr uint32_t kMrAll =
    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

struct Buffer {
  std::vector<uint8_t> data;
  MrTokens tokens;
  uint8_t* ptr() { return data.data(); }
  uint64_t va() const { return reinterpret_cast<uint64_t>(data.data()); }
  NdkSge sge(uint32_t offset, uint32_t len) {
    return NdkSge{data.data() + offset, len, tokens.local};
  }
};

struct Qp {
  std::unique_ptr<SendQueue> sq;
  std::unique_ptr<ReceiveQueue> rq;
  std::shared_ptr<CompletionQueue> scq, rcq;  // shared by the QPs made with qp(..., cqs_of)
  QueuePair* qp = nullptr;
  int context_tag = 0;

  std::vector<NdkResultEx> send_cqes() { return drain(*scq); }
  std::vector<NdkResultEx> recv_cqes() { return drain(*rcq); }
  static std::vector<NdkResultEx> drain(CompletionQueue& cq) {
    std::vector<NdkResultEx> out;
    NdkResultEx r[64];
    for (uint32_t n; (n = cq.get_results_ex(r, 64)) != 0;) out.insert(out.end(), r, r + n);
    return out;
  }
};

struct Host {
  uint32_t ip;
  wire::MacAddr mac;
  std::unique_ptr<MemoryRegionTable> mrs;
  std::unique_ptr<RcEngine> eng;
  std::vector<Frame> tx;   // frames sent, not yet delivered
  std::vector<Frame> log;  // every frame ever sent (pcap)
  Frame staging;
  int fail_allocs = 0;  // the next N sink allocations fail
  // queue_frames_on_alloc(): the polling core's kind of sink (no `send`).
  bool queue_on_alloc = false;
  std::function<void()> on_alloc;  // called by each allocation in that mode, before it queues
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::unique_ptr<Qp>> qps;
  // Notification callback of the CQs qp() creates (none by default).
  NdkCqNotificationCallback cq_notify = nullptr;
  void* cq_notify_context = nullptr;

  Host(uint32_t core, uint32_t ip_addr, uint8_t mac_last)
      : ip(ip_addr), mac{0x02, 0x52, 0x17, 0, 0, mac_last} {
    mrs = MemoryRegionTable::create(1024, uint64_t{1} << 32, 64);
    FrameSink sink;
    sink.ctx = this;
    sink.alloc = [](void* c, size_t len, void** handle) -> uint8_t* {
      Host* h = static_cast<Host*>(c);
      if (h->fail_allocs > 0) {
        --h->fail_allocs;
        return nullptr;
      }
      if (h->queue_on_alloc) {
        if (h->on_alloc) h->on_alloc();
        h->tx.emplace_back(len, 0xEE);
        *handle = nullptr;
        return h->tx.back().data();
      }
      h->staging.assign(len, 0xEE);
      *handle = h;
      return h->staging.data();
    };
    sink.send = [](void* c, void*, size_t len) {
      Host* h = static_cast<Host*>(c);
      h->staging.resize(len);
      h->tx.push_back(h->staging);
      h->log.push_back(h->staging);
    };
    RcEngineConfig cfg;
    cfg.core = core;
    cfg.max_qps = 64;
    eng = std::make_unique<RcEngine>(cfg, mrs.get(), sink);
  }

  /// From now on the sink queues each frame in `tx` when it hands out its buffer and has no
  /// `send`, as a polling core's does: the engine finishes the frames (their ICRC) by the end of
  /// each of its calls, or when asked (RcEngine::finish_frames_st). `log` stays empty.
  void queue_frames_on_alloc() {
    queue_on_alloc = true;
    eng->set_sink_send_st(nullptr);
  }

  Buffer& buffer(size_t len, uint32_t flags = kMrAll, uint8_t fill = 0) {
    auto b = std::make_unique<Buffer>();
    b->data.assign(len == 0 ? 1 : len, fill);
    EXPECT_EQ(mrs->register_mr(1, b->data.data(), b->data.size(), flags, &b->tokens),
              STATUS_SUCCESS);
    buffers.push_back(std::move(b));
    return *buffers.back();
  }

  /// A QP with its own work queues (or the shared receive queue `srq`) and its own CQs of
  /// `cq_depth`, or with `cqs_of`'s CQs (several QPs completing into one CQ, as NDK allows).
  Qp& qp(uint32_t sq_depth = 256, uint32_t rq_depth = 256, uint32_t cq_depth = 4096,
         uint32_t max_unacked_psns = kDefaultMaxUnackedPsns, SharedReceiveQueue* srq = nullptr,
         const Qp* cqs_of = nullptr) {
    auto q = std::make_unique<Qp>();
    NTSTATUS st;
    q->sq = SendQueue::create(sq_depth, 4, 64, &st);
    if (srq == nullptr) q->rq = ReceiveQueue::create(rq_depth, 4, &st);
    const CqConfig cq{cq_depth, 1u << 20, cq_notify, cq_notify_context};
    q->scq = cqs_of != nullptr ? cqs_of->scq : CompletionQueue::create(cq, &st);
    q->rcq = cqs_of != nullptr ? cqs_of->rcq : CompletionQueue::create(cq, &st);
    QpCreateParams p;
    p.pd = 1;
    p.qp_context = q.get();
    p.sq = q->sq.get();
    p.rq = q->rq.get();
    p.srq = srq;
    p.send_cq = q->scq.get();
    p.recv_cq = q->rcq.get();
    p.max_unacked_psns = max_unacked_psns;
    q->qp = eng->create_qp(p, &st);
    EXPECT_EQ(st, STATUS_SUCCESS);
    qps.push_back(std::move(q));
    return *qps.back();
  }
};

struct ConnectOptions {
  uint32_t mtu = 1024;
  uint32_t a_psn = 100;
  uint32_t b_psn = 5000;
  uint8_t retry = 7;
  uint8_t rnr_retry = 7;
  uint8_t timeout = 8;        // 1.05 ms
  uint8_t min_rnr_timer = 1;  // 10 µs
  uint32_t read_limit = 8;
  uint8_t a_tos = 0, b_tos = 0;  // IPv4 ToS of each side's QP (ECT bits: DCQCN's reaction point)
  uint8_t cnp_tos = 0;
  uint32_t line_rate_mbps = 0;
  const config::DcqcnConfig* dcqcn = nullptr;  // both sides' DCQCN parameters (null: defaults)
  bool ipv6 = false;             // RoCEv2 over IPv6: each host at host_ipv6(its IPv4 address)
  uint8_t vlan_tag_bytes = 0;    // as on a port that tags its frames (4)
  bool b_report_writes = false;  // B's QP reports the WRITEs it takes (kRemoteWrite)
};

/// The IPv6 address of a test host: fd52::/96 with its IPv4 address last.
inline wire::Ipv6Addr host_ipv6(uint32_t ip) {
  wire::Ipv6Addr a{};
  a[0] = 0xFD;
  a[1] = 0x52;
  wire::store_be32(a.data() + 12, ip);
  return a;
}

inline QpConnectParams params_for(Host& self, Qp& me, Host& peer, Qp& other, uint32_t my_psn,
                                  uint32_t peer_psn, const ConnectOptions& o) {
  QpConnectParams p;
  p.remote_qpn = other.qp->qpn();
  p.local_ip = self.ip;
  p.remote_ip = peer.ip;
  p.local_mac = self.mac;
  p.remote_mac = peer.mac;
  p.path_mtu = o.mtu;
  p.sq_psn = my_psn;
  p.rq_psn = peer_psn;
  p.retry_count = o.retry;
  p.rnr_retry = o.rnr_retry;
  p.local_ack_timeout = o.timeout;
  p.min_rnr_timer = o.min_rnr_timer;
  p.inbound_read_limit = o.read_limit;
  p.outbound_read_limit = o.read_limit;
  p.cnp_tos = o.cnp_tos;
  p.line_rate_mbps = o.line_rate_mbps;
  p.dcqcn = o.dcqcn;
  p.vlan_tag_bytes = o.vlan_tag_bytes;
  p.ipv6 = o.ipv6;
  if (o.ipv6) {
    p.local_ip6 = host_ipv6(self.ip);
    p.remote_ip6 = host_ipv6(peer.ip);
  }
  (void)me;
  return p;
}

inline void connect(Host& a, Qp& qa, Host& b, Qp& qb, const ConnectOptions& o = {}) {
  QpConnectParams pa = params_for(a, qa, b, qb, o.a_psn, o.b_psn, o);
  QpConnectParams pb = params_for(b, qb, a, qa, o.b_psn, o.a_psn, o);
  pa.tos = o.a_tos;
  pb.tos = o.b_tos;
  pb.report_remote_writes = o.b_report_writes;
  ASSERT_EQ(qa.qp->connect(pa), STATUS_SUCCESS);
  ASSERT_EQ(qb.qp->connect(pb), STATUS_SUCCESS);
}

// Fault model of the test wire, applied per frame in flight.
struct Faults {
  double drop = 0, reorder = 0, duplicate = 0, corrupt = 0;
  std::mt19937_64 rng{12345};
  double u() { return std::uniform_real_distribution<double>(0, 1)(rng); }
};

struct Wire {
  Host& a;
  Host& b;
  uint64_t now = 1'000'000;
  Faults* faults = nullptr;
  std::vector<Frame> held_ab, held_ba;  // reordered frames, delivered one step late
  bool drop_all = false;
  // Targeted faults: a frame for which `drop_if` answers true is lost; one for which `park_if`
  // answers true is kept aside (parked_ab / parked_ba) until the test delivers it itself.
  // Both see the direction (true: A to B) and the parsed frame.
  std::function<bool(bool, const wire::ParsedPacket&)> drop_if, park_if;
  std::vector<Frame> parked_ab, parked_ba;
  uint64_t dropped = 0;
  // A congested switch: a frame for which `mark_ce_if` answers true (it sees the direction, true:
  // A to B) arrives with ECN = CE, its IPv4 checksum updated (IPv6: its traffic class).
  std::function<bool(bool)> mark_ce_if;
  uint64_t marked = 0;

  void mark_ce(std::vector<Frame>& in, bool ab) {
    for (Frame& f : in) {
      if (!mark_ce_if(ab)) continue;
      uint8_t* ip = f.data() + wire::kEthHdrLen;
      if (wire::load_be16(f.data() + 12) == wire::kEtherTypeIpv6)
        wire::set_ipv6_traffic_class(ip, wire::ipv6_traffic_class(ip) | wire::kEcnCe);
      else
        wire::set_ipv4_tos(ip, ip[wire::ipv4_off::kTos] | wire::kEcnCe);
      ++marked;
    }
  }

  std::vector<Frame> mangle(std::vector<Frame>& in, std::vector<Frame>& held) {
    std::vector<Frame> out;
    if (mark_ce_if) mark_ce(in, &held == &held_ab);
    if (drop_all) {
      dropped += in.size();
      in.clear();
      return out;
    }
    if (drop_if || park_if) {
      const bool ab = &held == &held_ab;
      std::vector<Frame> kept;
      for (Frame& f : in) {
        wire::ParsedPacket p;
        if (wire::parse(wire::Bytes(f.data(), f.size()), p) == wire::DropReason::kNone) {
          if (drop_if && drop_if(ab, p)) {
            ++dropped;
            continue;
          }
          if (park_if && park_if(ab, p)) {
            (ab ? parked_ab : parked_ba).push_back(std::move(f));
            continue;
          }
        }
        kept.push_back(std::move(f));
      }
      in.swap(kept);
    }
    if (faults == nullptr) {
      out.swap(in);
      return out;
    }
    std::vector<Frame> later;
    for (Frame& f : in) {
      if (faults->u() < faults->drop) continue;
      if (faults->u() < faults->corrupt) {
        // One byte of BTH..payload (not the ICRC-masked BTH byte 4): the receiver must drop it.
        size_t at = 42 + faults->rng() % (f.size() - 46);
        if (at == 46) at = 47;
        f[at] ^= 0x5A;
      }
      if (faults->u() < faults->duplicate) out.push_back(f);
      if (faults->u() < faults->reorder) {
        later.push_back(std::move(f));
        continue;
      }
      out.push_back(std::move(f));
    }
    in.clear();
    for (Frame& f : held) out.push_back(std::move(f));
    held = std::move(later);
    return out;
  }

  static void deliver(Host& to, std::vector<Frame>& frames, uint64_t now) {
    std::vector<wire::Bytes> spans;
    spans.reserve(frames.size());
    for (const Frame& f : frames) spans.emplace_back(f.data(), f.size());
    to.eng->rx_burst_st(spans, now);
  }

  // One round: A polls, its frames reach B, B polls, its frames reach A. Time advances 1 µs.
  bool step() {
    bool busy = a.eng->poll_st(now);
    auto ab = mangle(a.tx, held_ab);
    busy |= !ab.empty();
    deliver(b, ab, now);
    busy |= b.eng->poll_st(now);
    auto ba = mangle(b.tx, held_ba);
    busy |= !ba.empty();
    deliver(a, ba, now);
    now += 1000;
    return busy || !held_ab.empty() || !held_ba.empty();
  }

  // Steps until `done` or `max_rounds`; idle rounds jump time forward to fire timers.
  bool run_until(const std::function<bool()>& done, int max_rounds = 200000) {
    for (int i = 0; i < max_rounds; ++i) {
      if (done()) return true;
      if (!step()) now += 100'000;
    }
    return done();
  }
  /// Delivers the parked frames now (A's to B, B's to A), in the order they were parked.
  void release_parked() {
    auto ab = std::move(parked_ab);
    auto ba = std::move(parked_ba);
    parked_ab.clear();
    parked_ba.clear();
    deliver(b, ab, now);
    deliver(a, ba, now);
  }
  void settle(int rounds = 50) {
    for (int i = 0; i < rounds; ++i) step();
  }
};

inline SendWqe send_wqe(SendOpcode op, void* ctx, std::initializer_list<NdkSge> sges,
                        uint32_t flags = 0) {
  SendWqe w;
  w.opcode = op;
  w.request_context = ctx;
  w.flags = flags;
  for (const NdkSge& s : sges) w.sge[w.sge_count++] = s;
  return w;
}

/// A WRITE of `len` bytes from src[off] to dst[off].
inline SendWqe write_wqe(void* ctx, Buffer& src, Buffer& dst, uint32_t off, uint32_t len) {
  SendWqe w = send_wqe(SendOpcode::kWrite, ctx, {src.sge(off, len)});
  w.remote_address = dst.va() + off;
  w.remote_token = dst.tokens.remote;
  return w;
}

/// A READ of `len` bytes from the start of `remote` into the start of `local`.
inline SendWqe read_wqe(void* ctx, Buffer& local, Buffer& remote, uint32_t len) {
  SendWqe w = send_wqe(SendOpcode::kRead, ctx, {local.sge(0, len)});
  w.remote_address = remote.va();
  w.remote_token = remote.tokens.remote;
  return w;
}

/// A fetch-and-add of `add` to the word at the start of `target`, its original value into
/// `result`.
inline SendWqe fetch_add_wqe(void* ctx, Buffer& result, Buffer& target, uint64_t add) {
  SendWqe w = send_wqe(SendOpcode::kFetchAdd, ctx, {result.sge(0, 8)});
  w.remote_address = target.va();
  w.remote_token = target.tokens.remote;
  w.swap_or_add = add;
  return w;
}

inline RecvWqe recv_wqe(void* ctx, std::initializer_list<NdkSge> sges) {
  RecvWqe w;
  w.request_context = ctx;
  for (const NdkSge& s : sges) w.sge[w.sge_count++] = s;
  return w;
}

inline void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    p[i] = static_cast<uint8_t>(x >> 16);
  }
}

inline void* tag(uintptr_t v) {
  return reinterpret_cast<void*>(v);
}

inline wire::ParsedPacket parse_frame(const Frame& f) {
  wire::ParsedPacket p;
  EXPECT_EQ(wire::parse(wire::Bytes(f.data(), f.size()), p), wire::DropReason::kNone);
  return p;
}

}  // namespace rocedp::rc::test
