// RC engine throughput on one thread: two RcEngines ("A" requests, "B" responds) joined by an
// in-memory wire. Frame buffers come from a preallocated pool and go back to it once the peer
// has consumed them, so the steady state allocates nothing (a counting operator new below
// proves it: allocs_per_op).
//
// One iteration = one batch of kBatch messages, posted round-robin over the QPs (1 QP: all on
// it; N >= kBatch: one on each of kBatch consecutive QPs, so every message has its own QP visit
// and its own ACK), then A polls, A's frames reach B, B polls (ACKs), B's frames reach A, A
// polls (completions) until the batch has completed; the send CQ is drained.
//
//  * BM_RcWrite/<size>/<qps>, BM_RcSend/<size>/1, BM_RcRead/<size>/1: the engine.
//  * BM_RawWire/<size>: the baseline (DESIGN.md §8): the same number of frames of the same size
//    through the same wire and pool, with no RDMA processing: header template copy + PSN store,
//    payload copy, hand over, the receiver touches and recycles the frame. No ICRC either way
//    round is computed by it (the engine computes and verifies one per frame).
//  * BM_QpMemory/<qps>: heap bytes per QP (mallinfo2 around creation + connection), split into
//    the consumer's queues and the engine's QueuePair.
// Counters: allocs_per_op (must be 0), visits_per_poll (QPs the engines visited per poll),
// frames_per_op.

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/rc_engine.hpp"
#include "dataplane/rc/work_queue.hpp"
#include "dataplane/wire/builder.hpp"

// ---- debug allocation counter: every global operator new of this binary counts ----
// The replacements pair malloc/aligned_alloc with free; GCC cannot see that they are the
// replacement pair and warns where it inlines both.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
uint64_t g_allocs = 0;
uint64_t g_alloc_bytes = 0;  // bytes requested (malloc adds its own ~8-16 per chunk)
}  // namespace

void* operator new(std::size_t n) {
  ++g_allocs;
  g_alloc_bytes += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++g_allocs;
  g_alloc_bytes += n;
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void* operator new(std::size_t n, std::align_val_t a) {
  ++g_allocs;
  g_alloc_bytes += n;
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return operator new(n, a);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  ++g_allocs;
  g_alloc_bytes += n;
  const std::size_t al = static_cast<std::size_t>(a);
  return std::aligned_alloc(al, (n + al - 1) / al * al);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace {

using namespace rocedp;
using namespace rocedp::rc;

constexpr uint32_t kBatch = 32;         // messages per iteration
constexpr uint32_t kMtu = 1024;         // standard-Ethernet RoCE path MTU
constexpr uint32_t kFrameBytes = 1152;  // one MTU of payload + every header + ICRC
constexpr uint32_t kPoolFrames = 8192;
constexpr uint32_t kMrFlags =
    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

// Frame buffers shared by both directions; indices on a free stack.
struct Pool {
  std::unique_ptr<uint8_t[]> mem{new uint8_t[size_t{kPoolFrames} * kFrameBytes]};
  std::vector<uint32_t> free;
  Pool() {
    free.reserve(kPoolFrames);
    for (uint32_t i = 0; i < kPoolFrames; ++i) free.push_back(kPoolFrames - 1 - i);
    std::memset(mem.get(), 0, size_t{kPoolFrames} * kFrameBytes);
  }
  uint8_t* at(uint32_t i) { return mem.get() + size_t{i} * kFrameBytes; }
};

struct TxFrame {
  uint32_t buf;
  uint32_t len;
};

// One direction of the wire: frames sent, not yet delivered.
struct Link {
  Pool* pool = nullptr;
  std::vector<TxFrame> q;
  std::vector<wire::Bytes> spans;
  Link() {
    q.reserve(kPoolFrames);
    spans.reserve(kPoolFrames);
  }
  // As the polling core's sink: the buffer is queued when it is handed out (no `send`), so the
  // engine writes the ICRCs at the end of its call, as in production.
  static uint8_t* alloc(void* c, size_t len, void** handle) {
    Link* l = static_cast<Link*>(c);
    if (len > kFrameBytes || l->pool->free.empty()) return nullptr;
    const uint32_t i = l->pool->free.back();
    l->pool->free.pop_back();
    *handle = nullptr;
    l->q.push_back(TxFrame{i, static_cast<uint32_t>(len)});
    return l->pool->at(i);
  }
  FrameSink sink() {
    FrameSink s;
    s.alloc = &Link::alloc;
    s.ctx = this;
    return s;
  }
  // Hands every queued frame to `to` in bursts of 32 and recycles the buffers.
  uint64_t deliver(RcEngine& to, uint64_t now) {
    const size_t n = q.size();
    spans.clear();
    for (const TxFrame& f : q) spans.emplace_back(pool->at(f.buf), f.len);
    for (size_t i = 0; i < n; i += 32) {
      const size_t k = n - i < 32 ? n - i : 32;
      to.rx_burst_st(std::span<const wire::Bytes>(spans.data() + i, k), now);
    }
    for (const TxFrame& f : q) pool->free.push_back(f.buf);
    q.clear();
    return n;
  }
};

struct Side {
  std::unique_ptr<MemoryRegionTable> mrs = MemoryRegionTable::create(64, uint64_t{1} << 32, 16);
  Link out;
  std::unique_ptr<RcEngine> eng;
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::vector<std::unique_ptr<SendQueue>> sqs;
  std::vector<std::unique_ptr<ReceiveQueue>> rqs;
  std::vector<QueuePair*> qps;
  std::vector<uint8_t> buf;
  MrTokens tokens;
  uint32_t ip;
  wire::MacAddr mac;

  Side(Pool* pool, uint32_t core, uint32_t nqps, uint32_t ip_addr, uint8_t mac_last)
      : ip(ip_addr), mac{0x02, 0x52, 0x17, 0, 0, mac_last} {
    out.pool = pool;
    RcEngineConfig cfg;
    cfg.core = core;
    cfg.max_qps = nqps;
    eng = std::make_unique<RcEngine>(cfg, mrs.get(), out.sink());
    NTSTATUS st;
    scq = CompletionQueue::create(CqConfig{1u << 16, 1u << 20}, &st);
    rcq = CompletionQueue::create(CqConfig{1u << 16, 1u << 20}, &st);
    buf.assign(size_t{kBatch} * 4096 + 4096, 0x5A);
    mrs->register_mr(1, buf.data(), buf.size(), kMrFlags, &tokens);
  }
  // SQ depth: room for a whole batch on one QP, 4 when the batch is spread over many QPs.
  void add_qps(uint32_t n, uint32_t sq_depth, uint32_t rq_depth) {
    sqs.reserve(n);
    rqs.reserve(n);
    qps.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      NTSTATUS st;
      sqs.push_back(SendQueue::create(sq_depth, 1, 0, &st));
      rqs.push_back(ReceiveQueue::create(rq_depth, 1, &st));
      QpCreateParams p;
      p.pd = 1;
      p.sq = sqs.back().get();
      p.rq = rqs.back().get();
      p.send_cq = scq.get();
      p.recv_cq = rcq.get();
      qps.push_back(eng->create_qp(p, &st));
      if (qps.back() == nullptr) std::abort();
    }
  }
};

// `ipv6`: RoCEv2 over IPv6, each side at fd52:: with its IPv4 address last.
QpConnectParams connect_params(const Side& self, const Side& peer, uint32_t i, bool ipv6) {
  QpConnectParams c;
  c.remote_qpn = peer.qps[i]->qpn();
  c.local_ip = self.ip;
  c.remote_ip = peer.ip;
  if (ipv6) {
    c.ipv6 = true;
    c.local_ip6 = wire::Ipv6Addr{0xFD, 0x52};
    c.remote_ip6 = wire::Ipv6Addr{0xFD, 0x52};
    wire::store_be32(c.local_ip6.data() + 12, self.ip);
    wire::store_be32(c.remote_ip6.data() + 12, peer.ip);
  }
  c.local_mac = self.mac;
  c.remote_mac = peer.mac;
  c.path_mtu = kMtu;
  c.sq_psn = 1000 + i;
  c.rq_psn = 1000 + i;
  return c;
}

struct World {
  uint32_t nqps;
  Pool pool;
  Side a{&pool, 1, nqps, 0xC0A80001, 1};
  Side b{&pool, 2, nqps, 0xC0A80002, 2};
  uint64_t now = 1'000'000;
  uint32_t next_qp = 0;

  explicit World(uint32_t n, bool ipv6 = false) : nqps(n) {
    const uint32_t sq_depth = n == 1 ? 2 * kBatch : 4;
    const uint32_t rq_depth = n == 1 ? 2 * kBatch : 1;
    a.add_qps(n, sq_depth, rq_depth);
    b.add_qps(n, sq_depth, rq_depth);
    for (uint32_t i = 0; i < n; ++i) {
      if (a.eng->connect_qp(a.qps[i]->qpn(), connect_params(a, b, i, ipv6)) != STATUS_SUCCESS)
        std::abort();
      if (b.eng->connect_qp(b.qps[i]->qpn(), connect_params(b, a, i, ipv6)) != STATUS_SUCCESS)
        std::abort();
    }
  }

  // Posts one batch of `op` messages of `size` bytes round-robin, runs the wire until they
  // completed. Returns frames that crossed the wire. Each step runs in a function named after
  // its side (requester: A and its consumer; responder: B and its consumer), so callgrind can
  // count each side alone: --toggle-collect='*requester_side*' or '*responder_side*'.
  uint64_t batch(SendOpcode op, uint32_t size) {
    const uint32_t first = next_qp;
    next_qp = static_cast<uint32_t>((uint64_t{next_qp} + kBatch) % nqps);
    if (op == SendOpcode::kSend) responder_side_post(first, size);
    requester_side_post(op, first, size);
    uint64_t frames = 0;
    uint32_t done = 0;
    for (int round = 0; done < kBatch; ++round) {
      requester_side_poll();
      frames += responder_side_receive();
      responder_side_poll();
      frames += requester_side_receive();
      requester_side_poll();
      done += requester_side_complete();
      responder_side_complete();
      now += 1000;
      if (round > 1000) std::abort();  // no progress: a bug, not a measurement
    }
    return frames;
  }

  // The consumer of B posts the receives a batch of SENDs needs.
  [[gnu::noinline]] void responder_side_post(uint32_t q, uint32_t size) {
    for (uint32_t k = 0; k < kBatch; ++k, q = q + 1 == nqps ? 0 : q + 1) {
      RecvWqe r;
      r.sge_count = 1;
      r.sge[0] = NdkSge{b.buf.data() + size_t{k} * 4096, size, b.tokens.local};
      b.rqs[q]->post(r);
    }
  }
  // The consumer of A posts the batch.
  [[gnu::noinline]] void requester_side_post(SendOpcode op, uint32_t q, uint32_t size) {
    const bool read = op == SendOpcode::kRead;
    // As the NDK layer posts a request of one SGE: one line (SendQueue::post_head).
    for (uint32_t k = 0; k < kBatch; ++k, q = q + 1 == nqps ? 0 : q + 1) {
      SendWqeHead h;
      h.opcode = op;
      h.remote_address = reinterpret_cast<uint64_t>(b.buf.data()) + (read ? 0 : size_t{k} * 4096);
      h.remote_token = b.tokens.remote;
      const NdkSge sge{a.buf.data() + (read ? size_t{k} * 4096 : 0), size, a.tokens.local};
      if (a.sqs[q]->post_head(h, &sge, 1) != STATUS_SUCCESS) std::abort();
    }
  }
  [[gnu::noinline]] void requester_side_poll() { a.eng->poll_st(now); }
  [[gnu::noinline]] void responder_side_poll() { b.eng->poll_st(now); }
  // A's frames reach B: B's receive path (parse, ICRC check, execute) and the wire's recycling.
  [[gnu::noinline]] uint64_t responder_side_receive() { return a.out.deliver(*b.eng, now); }
  [[gnu::noinline]] uint64_t requester_side_receive() { return b.out.deliver(*a.eng, now); }
  [[gnu::noinline]] uint32_t requester_side_complete() {
    return a.scq->get_results_ex(res, kBatch);
  }
  [[gnu::noinline]] void responder_side_complete() {
    while (b.rcq->get_results_ex(res, kBatch) != 0) {
    }
  }
  NdkResultEx res[kBatch];
};

// One world at a time (100,000 QPs take a while to build): kept across the repetitions Google
// Benchmark makes of one benchmark.
World& world(uint32_t nqps) {
  static std::unique_ptr<World> w;
  if (!w || w->nqps != nqps) {
    w.reset();
    w = std::make_unique<World>(nqps);
  }
  return *w;
}

void run_rc(benchmark::State& state, SendOpcode op) {
  const uint32_t size = static_cast<uint32_t>(state.range(0));
  const uint32_t nqps = static_cast<uint32_t>(state.range(1));
  World& w = world(nqps);
  for (int i = 0; i < 4; ++i) w.batch(op, size);  // warm: every ring and pool touched
  const uint64_t polls0 = w.a.eng->polls() + w.b.eng->polls();
  const uint64_t visits0 = w.a.eng->qp_visits() + w.b.eng->qp_visits();
  uint64_t frames = 0;
  uint64_t allocs = 0;  // counted around the batches only: the framework's own are not ours
  for (auto _ : state) {
    const uint64_t before = g_allocs;
    frames += w.batch(op, size);
    allocs += g_allocs - before;
  }
  const double ops = static_cast<double>(state.iterations()) * kBatch;
  state.SetItemsProcessed(static_cast<int64_t>(ops));
  state.SetBytesProcessed(static_cast<int64_t>(ops * size));
  state.counters["allocs_per_op"] = static_cast<double>(allocs) / ops;
  state.counters["frames_per_op"] = static_cast<double>(frames) / ops;
  const uint64_t polls = w.a.eng->polls() + w.b.eng->polls() - polls0;
  state.counters["visits_per_poll"] =
      static_cast<double>(w.a.eng->qp_visits() + w.b.eng->qp_visits() - visits0) /
      static_cast<double>(polls);
}

void BM_RcWrite(benchmark::State& state) {
  run_rc(state, SendOpcode::kWrite);
}
void BM_RcSend(benchmark::State& state) {
  run_rc(state, SendOpcode::kSend);
}
void BM_RcRead(benchmark::State& state) {
  run_rc(state, SendOpcode::kRead);
}

// The wire's ceiling: the same frames (count and size) with no RDMA processing.
struct RawWire {
  Pool pool;
  Link link;
  uint8_t tmpl[128];
  size_t hlen;
  std::vector<uint8_t> src, dst;
  uint32_t size, pkts, psn = 0;
  uint64_t sink = 0;

  explicit RawWire(uint32_t sz) : size(sz), pkts((sz + kMtu - 1) / kMtu) {
    link.pool = &pool;
    // A WRITE's headers (Eth+IPv4+UDP+BTH+RETH) as the template, like the engine's.
    wire::PacketFields f;
    f.bth.opcode = wire::opcode::kRcWriteOnly;
    hlen = wire::header_len(f);
    wire::write_headers(wire::MutBytes(tmpl, hlen), f, kMtu);
    src.assign(size, 0x5A);
    dst.assign(4096, 0);
  }
  // kBatch messages: build (template copy + PSN), copy the payload (alloc queued it); the receiver
  // looks at each frame, copies its payload out and gives the buffer back.
  void batch() {
    for (uint32_t k = 0; k < kBatch; ++k) {
      for (uint32_t p = 0; p < pkts; ++p) {
        const uint32_t seg = size - p * kMtu < kMtu ? size - p * kMtu : kMtu;
        void* h;
        uint8_t* buf = Link::alloc(&link, hlen + seg + 4, &h);
        std::memcpy(buf, tmpl, hlen);
        wire::store_be24(buf + 42 + 9, ++psn);
        std::memcpy(buf + hlen, src.data() + p * kMtu, seg);
      }
    }
    for (const TxFrame& t : link.q) {
      const uint8_t* fr = pool.at(t.buf);
      sink += fr[42 + 11] + t.len;
      std::memcpy(dst.data(), fr + hlen, t.len - hlen - 4);
      pool.free.push_back(t.buf);
    }
    link.q.clear();
  }
};

void BM_RawWire(benchmark::State& state) {
  RawWire raw(static_cast<uint32_t>(state.range(0)));
  uint64_t allocs = 0;
  for (auto _ : state) {
    const uint64_t before = g_allocs;
    raw.batch();
    allocs += g_allocs - before;
    benchmark::DoNotOptimize(raw.sink);
    benchmark::ClobberMemory();
  }
  const double ops = static_cast<double>(state.iterations()) * kBatch;
  state.SetItemsProcessed(static_cast<int64_t>(ops));
  state.SetBytesProcessed(static_cast<int64_t>(ops * raw.size));
  state.counters["allocs_per_op"] = static_cast<double>(allocs) / ops;
  state.counters["frames_per_op"] = raw.pkts;
}

// Heap bytes per QP: the consumer's queues (SQ depth 4, RQ depth 1, the many-QP configuration
// above) and the engine's QueuePair after connecting (IRL 16). bytes_per_qp counts the bytes
// requested from operator new (exact at any count); malloc_bytes_per_qp is mallinfo2's in-use
// delta (includes malloc's per-chunk overhead; at 1 QP it is blurred by chunks that glibc's
// tcache already counts as in use).
void BM_QpMemory(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    Pool pool;
    Side a(&pool, 1, n, 0xC0A80001, 1);
    Side b(&pool, 2, 2, 0xC0A80002, 2);
    b.add_qps(1, 4, 1);
    const size_t m0 = mallinfo2().uordblks;
    std::vector<std::unique_ptr<SendQueue>> sqs;
    std::vector<std::unique_ptr<ReceiveQueue>> rqs;
    sqs.reserve(n);
    rqs.reserve(n);
    const size_t m1 = mallinfo2().uordblks;
    const uint64_t b1 = g_alloc_bytes;
    for (uint32_t i = 0; i < n; ++i) {
      NTSTATUS st;
      sqs.push_back(SendQueue::create(4, 1, 0, &st));
      rqs.push_back(ReceiveQueue::create(1, 1, &st));
    }
    const uint64_t b2 = g_alloc_bytes;
    for (uint32_t i = 0; i < n; ++i) {
      NTSTATUS st;
      QpCreateParams p;
      p.pd = 1;
      p.sq = sqs[i].get();
      p.rq = rqs[i].get();
      p.send_cq = a.scq.get();
      p.recv_cq = a.rcq.get();
      QueuePair* qp = a.eng->create_qp(p, &st);
      QpConnectParams c;
      c.remote_qpn = b.qps[0]->qpn();
      c.local_ip = a.ip;
      c.remote_ip = b.ip;
      if (qp == nullptr || a.eng->connect_qp(qp->qpn(), c) != STATUS_SUCCESS) std::abort();
    }
    const size_t m3 = mallinfo2().uordblks;
    const uint64_t b3 = g_alloc_bytes;
    state.counters["queue_bytes_per_qp"] = static_cast<double>(b2 - b1) / n;
    state.counters["engine_bytes_per_qp"] = static_cast<double>(b3 - b2) / n;
    state.counters["bytes_per_qp"] = static_cast<double>(b3 - b1) / n;
    state.counters["malloc_bytes_per_qp"] = static_cast<double>(m3 - m1) / n;
    state.counters["sizeof_queue_pair"] = sizeof(QueuePair);
    (void)m0;
  }
}

}  // namespace

BENCHMARK(BM_RcWrite)->ArgsProduct({{64, 4096}, {1, 1000, 100000}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RcSend)->Args({64, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RcRead)->Args({64, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawWire)->Arg(64)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QpMemory)
    ->Arg(1)
    ->Arg(1000)
    ->Arg(100000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Fixed-count mode for instruction counting (DESIGN.md §8: count what does not depend on the
// clock): ROCEDP_RC_FIXED_OPS="<write|send|read|raw>,<size>,<qps>,<batches>" builds the world
// (write6, send6, read6: the same over IPv6),
// warms it, then runs exactly <batches> batches inside measured_batches(), so
//   valgrind --tool=callgrind --toggle-collect='*measured_batches*' bench_rc_engine
// counts the instructions of exactly batches x 32 messages, and '*requester_side*' or
// '*responder_side*' instead of '*measured_batches*' count one side (World::batch).
namespace {
[[gnu::noinline]] uint64_t measured_batches(World* w, RawWire* raw, SendOpcode op, uint32_t size,
                                            uint32_t n) {
  uint64_t frames = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (raw != nullptr) {
      raw->batch();
    } else {
      frames += w->batch(op, size);
    }
  }
  return frames;
}

int fixed_ops(const char* spec) {
  char kind[16] = {};
  unsigned size = 0, qps = 0, batches = 0;
  if (std::sscanf(spec, "%15[a-z0-9],%u,%u,%u", kind, &size, &qps, &batches) != 4) {
    std::fprintf(stderr, "ROCEDP_RC_FIXED_OPS: want kind,size,qps,batches\n");
    return 2;
  }
  std::string k = kind;
  const bool ipv6 = !k.empty() && k.back() == '6';
  if (ipv6) k.pop_back();
  const SendOpcode op =
      k == "send" ? SendOpcode::kSend : (k == "read" ? SendOpcode::kRead : SendOpcode::kWrite);
  std::unique_ptr<World> w;
  std::unique_ptr<RawWire> raw;
  if (k == "raw") {
    raw = std::make_unique<RawWire>(size);
    for (int i = 0; i < 4; ++i) raw->batch();
  } else {
    w = std::make_unique<World>(qps, ipv6);
    for (int i = 0; i < 4; ++i) w->batch(op, size);
  }
  const uint64_t before = g_allocs;
  const uint64_t frames = measured_batches(w.get(), raw.get(), op, size, batches);
  std::printf("%s size=%u qps=%u messages=%u frames=%llu allocs=%llu\n", kind, size, qps,
              batches * kBatch, static_cast<unsigned long long>(frames),
              static_cast<unsigned long long>(g_allocs - before));
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (const char* spec = std::getenv("ROCEDP_RC_FIXED_OPS")) return fixed_ops(spec);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
