// 100,000 QPs on one engine: traffic on a handful of them, and the per-poll work stays
// proportional to the QPs that have something to do. The engine's
// qp_visits() counter is the measure: a poll that visits an idle QP is a failure.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/rc_engine.hpp"
#include "dataplane/rc/work_queue.hpp"

namespace rocedp::rc {
namespace {

constexpr uint32_t kMrFlags =
    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

struct Side {
  uint32_t ip;
  wire::MacAddr mac;
  std::unique_ptr<MemoryRegionTable> mrs = MemoryRegionTable::create(16, uint64_t{1} << 32, 16);
  std::unique_ptr<RcEngine> eng;
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::vector<std::unique_ptr<SendQueue>> sqs;
  std::vector<std::unique_ptr<ReceiveQueue>> rqs;
  std::vector<QueuePair*> qps;
  std::vector<std::vector<uint8_t>> tx;
  std::vector<uint8_t> staging;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  MrTokens tokens;

  Side(uint32_t core, uint32_t n, uint32_t ip_addr, uint8_t mac_last)
      : ip(ip_addr), mac{2, 0, 0, 0, 0, mac_last} {
    FrameSink sink;
    sink.ctx = this;
    sink.alloc = [](void* c, size_t len, void** handle) -> uint8_t* {
      Side* s = static_cast<Side*>(c);
      s->staging.assign(len, 0);
      *handle = s;
      return s->staging.data();
    };
    sink.send = [](void* c, void*, size_t) {
      Side* s = static_cast<Side*>(c);
      s->tx.push_back(s->staging);
    };
    RcEngineConfig cfg;
    cfg.core = core;
    cfg.max_qps = n;
    eng = std::make_unique<RcEngine>(cfg, mrs.get(), sink);
    NTSTATUS st;
    scq = CompletionQueue::create(CqConfig{1024, 1u << 20}, &st);
    rcq = CompletionQueue::create(CqConfig{1024, 1u << 20}, &st);
    EXPECT_EQ(mrs->register_mr(1, buf.data(), buf.size(), kMrFlags, &tokens), STATUS_SUCCESS);
    sqs.reserve(n);
    rqs.reserve(n);
    qps.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      sqs.push_back(SendQueue::create(2, 1, 0, &st));
      rqs.push_back(ReceiveQueue::create(1, 1, &st));
      QpCreateParams p;
      p.pd = 1;
      p.sq = sqs.back().get();
      p.rq = rqs.back().get();
      p.send_cq = scq.get();
      p.recv_cq = rcq.get();
      p.max_inbound_read_limit = 1;
      qps.push_back(eng->create_qp(p, &st));
      EXPECT_EQ(st, STATUS_SUCCESS);
    }
  }

  // Delivers every frame this side sent to `to`.
  void deliver(Side& to, uint64_t now) {
    std::vector<wire::Bytes> spans;
    for (const auto& f : tx) spans.emplace_back(f.data(), f.size());
    to.eng->rx_burst_st(spans, now);
    tx.clear();
  }
};

QpConnectParams params(const Side& self, const Side& peer, uint32_t remote_qpn) {
  QpConnectParams c;
  c.remote_qpn = remote_qpn;
  c.local_ip = self.ip;
  c.remote_ip = peer.ip;
  c.local_mac = self.mac;
  c.remote_mac = peer.mac;
  c.inbound_read_limit = 1;
  c.outbound_read_limit = 1;
  return c;
}

TEST(RcScale, HundredThousandQpsIdleOnesCostNothingPerPoll) {
  constexpr uint32_t kQps = 100'000;
  const std::vector<uint32_t> busy = {0, 1, 2, 50'000, kQps - 1};
  Side a(1, kQps, 0x0A000001, 1);
  Side b(2, static_cast<uint32_t>(busy.size()), 0x0A000002, 2);
  ASSERT_EQ(a.eng->qp_count(), kQps);
  // Every QP of A is connected (RTS, idle); the busy ones to a real peer QP on B.
  std::vector<uint32_t> peer(kQps, b.qps[0]->qpn());
  for (size_t j = 0; j < busy.size(); ++j) peer[busy[j]] = b.qps[j]->qpn();
  for (uint32_t i = 0; i < kQps; ++i)
    ASSERT_EQ(a.qps[i]->connect(params(a, b, peer[i])), STATUS_SUCCESS);
  for (size_t j = 0; j < busy.size(); ++j) {
    ASSERT_EQ(b.qps[j]->connect(params(b, a, a.qps[busy[j]]->qpn())), STATUS_SUCCESS);
  }

  uint64_t now = 1'000'000;
  // Nothing posted: polls visit no QP at all.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(a.eng->poll_st(now));
  EXPECT_EQ(a.eng->qp_visits(), 0u);
  EXPECT_EQ(a.eng->scheduled_qps(), 0u);

  // Two RDMA WRITEs on each busy QP, each to its own 64-byte slot of B's buffer.
  for (int round = 0; round < 2; ++round) {
    for (size_t j = 0; j < busy.size(); ++j) {
      const size_t slot = j * 2 + static_cast<size_t>(round);
      std::memset(a.buf.data() + slot * 64, static_cast<int>(0x30 + slot), 64);
      SendWqe w;
      w.opcode = SendOpcode::kWrite;
      w.request_context = reinterpret_cast<void*>(slot + 1);
      w.sge_count = 1;
      w.sge[0] = NdkSge{a.buf.data() + slot * 64, 64, a.tokens.local};
      w.remote_address = reinterpret_cast<uint64_t>(b.buf.data()) + slot * 64;
      w.remote_token = b.tokens.remote;
      ASSERT_EQ(a.sqs[busy[j]]->post(w), STATUS_SUCCESS);
    }
  }
  uint32_t completions = 0;
  uint64_t max_visits_per_poll = 0;
  NdkResultEx res[16];
  for (int step = 0; step < 20 && completions < 2 * busy.size(); ++step) {
    const uint64_t v0 = a.eng->qp_visits();
    a.eng->poll_st(now);
    max_visits_per_poll = std::max(max_visits_per_poll, a.eng->qp_visits() - v0);
    a.deliver(b, now);
    b.eng->poll_st(now);
    b.deliver(a, now);
    for (uint32_t n; (n = a.scq->get_results_ex(res, 16)) != 0;) {
      for (uint32_t k = 0; k < n; ++k) EXPECT_EQ(res[k].status, STATUS_SUCCESS);
      completions += n;
    }
    now += 1000;
  }
  EXPECT_EQ(completions, 2 * busy.size());
  for (size_t slot = 0; slot < 2 * busy.size(); ++slot) {
    EXPECT_EQ(std::memcmp(b.buf.data() + slot * 64, a.buf.data() + slot * 64, 64), 0) << slot;
  }
  // Work per poll follows the busy QPs (5), not the 100,000 that exist.
  EXPECT_GE(max_visits_per_poll, 1u);
  EXPECT_LE(max_visits_per_poll, busy.size());

  // Quiet again: after at most one more visit each, the run list is empty and polls are free.
  a.eng->poll_st(now);
  a.eng->poll_st(now);
  EXPECT_EQ(a.eng->scheduled_qps(), 0u);
  const uint64_t quiet = a.eng->qp_visits();
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(a.eng->poll_st(now + i));
  EXPECT_EQ(a.eng->qp_visits(), quiet);

  // Timers are a heap, not a scan: moving past every ACK deadline wakes at most the QPs that
  // armed one, once, and nothing else.
  now += 10'000'000'000ull;
  a.eng->poll_st(now);
  EXPECT_LE(a.eng->qp_visits() - quiet, busy.size());
  const uint64_t after_timers = a.eng->qp_visits();
  a.eng->poll_st(now + 1);
  a.eng->poll_st(now + 2);
  EXPECT_EQ(a.eng->qp_visits(), after_timers);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), 0u);

  // A control request on one idle QP costs visits of that QP only.
  const uint32_t far = 70'000;
  ASSERT_EQ(a.eng->flush_qp(a.qps[far]->qpn()), STATUS_SUCCESS);
  const uint64_t before_flush = a.eng->qp_visits();
  for (int i = 0; i < 5; ++i) a.eng->poll_st(now + 10 + i);
  EXPECT_EQ(a.qps[far]->state(), QpState::kError);
  EXPECT_GE(a.eng->qp_visits() - before_flush, 1u);
  EXPECT_LE(a.eng->qp_visits() - before_flush, 3u);
  EXPECT_EQ(a.eng->scheduled_qps(), 0u);

  // A receive posted to the QP in ERROR rings its doorbell and completes flushed; the post
  // wakes only that QP.
  RecvWqe r;
  r.request_context = reinterpret_cast<void*>(0xF1);
  r.sge_count = 1;
  r.sge[0] = NdkSge{a.buf.data(), 8, a.tokens.local};
  ASSERT_EQ(a.rqs[far]->post(r), STATUS_SUCCESS);
  const uint64_t before_recv = a.eng->qp_visits();
  a.eng->poll_st(now + 100);
  a.eng->poll_st(now + 101);
  EXPECT_LE(a.eng->qp_visits() - before_recv, 2u);
  ASSERT_EQ(a.rcq->get_results_ex(res, 16), 1u);
  EXPECT_EQ(res[0].status, STATUS_CANCELLED);
  EXPECT_EQ(res[0].request_context, reinterpret_cast<void*>(0xF1));
}

// The doorbell between a posting thread and the core: posts (plain, and DEFER batches published
// by flush_deferred) race with the core taking the doorbell stack. A lost ring would leave a QP
// with posted work that no poll ever visits: the run then stops at the round cap and fails.
TEST(RcScale, DoorbellFromAnotherThreadNeverLosesAPost) {
  constexpr uint32_t kQps = 4;
  constexpr uint32_t kPosts = 8'000;
  Side a(1, kQps, 0x0A000001, 1);
  Side b(2, kQps, 0x0A000002, 2);
  for (uint32_t i = 0; i < kQps; ++i) {
    ASSERT_EQ(a.qps[i]->connect(params(a, b, b.qps[i]->qpn())), STATUS_SUCCESS);
    ASSERT_EQ(b.qps[i]->connect(params(b, a, a.qps[i]->qpn())), STATUS_SUCCESS);
  }
  std::atomic<bool> producer_failed{false};
  std::atomic<bool> core_gave_up{false};
  std::atomic<uint32_t> posted{0};
  std::thread producer([&] {
    for (uint32_t i = 0; i < kPosts; ++i) {
      const uint32_t q = i % kQps;
      SendWqe w;
      w.opcode = SendOpcode::kWrite;
      w.request_context = reinterpret_cast<void*>(uintptr_t{i} + 1);
      w.sge_count = 1;
      w.sge[0] = NdkSge{a.buf.data() + q * 64, 64, a.tokens.local};
      w.remote_address = reinterpret_cast<uint64_t>(b.buf.data()) + q * 64;
      w.remote_token = b.tokens.remote;
      // Every 8th post of a QP is deferred and published a moment later by flush_deferred.
      const bool defer = (i / kQps) % 8 == 3;
      if (defer) w.flags = NDK_OP_FLAG_DEFER;
      NTSTATUS st;
      while ((st = a.sqs[q]->post(w)) == STATUS_INSUFFICIENT_RESOURCES && !core_gave_up)
        std::this_thread::yield();
      if (core_gave_up) break;
      if (st != STATUS_SUCCESS) producer_failed = true;
      if (defer) a.sqs[q]->flush_deferred();
      posted.store(i + 1, std::memory_order_relaxed);
    }
  });
  std::vector<uint64_t> last(kQps, 0);
  uint32_t completions = 0;
  bool in_order = true;
  uint64_t now = 1'000'000;
  NdkResultEx res[64];
  // Give up only after many rounds in which posted work existed and nothing completed (a lost
  // ring); rounds in which the producer thread simply was not scheduled do not count.
  uint64_t stalled = 0;
  for (uint64_t round = 0; round < 4'000'000'000ull && stalled < 50'000'000 && completions < kPosts;
       ++round) {
    const uint32_t before = completions;
    const uint32_t posted_now = posted.load(std::memory_order_relaxed);
    a.eng->poll_st(now);
    a.deliver(b, now);
    b.eng->poll_st(now);
    b.deliver(a, now);
    for (uint32_t n; (n = a.scq->get_results_ex(res, 64)) != 0;) {
      for (uint32_t k = 0; k < n; ++k) {
        const auto id = reinterpret_cast<uintptr_t>(res[k].request_context);
        const uint32_t q = static_cast<uint32_t>((id - 1) % kQps);
        in_order &= res[k].status == STATUS_SUCCESS && id > last[q];
        last[q] = id;
      }
      completions += n;
    }
    stalled = completions == before && posted_now > completions ? stalled + 1 : 0;
    // Nothing to do until the producer posts: let it run (the machine may have one free core).
    if (completions == before && posted_now == completions) std::this_thread::yield();
    // Virtual time stands still (ACK timeouts never fire): only doorbells and frames drive it.
  }
  const uint32_t posted_at_give_up = posted.load();
  core_gave_up = true;
  producer.join();
  const uint64_t visits_before = a.eng->qp_visits();
  const uint64_t tx_before = a.eng->counters().get(RcCounter::kTxPackets);
  a.eng->poll_st(now);
  const uint64_t extra_visits = a.eng->qp_visits() - visits_before;
  const uint64_t extra_tx = a.eng->counters().get(RcCounter::kTxPackets) - tx_before;
  for (uint32_t q = 0; q < kQps; ++q) {
    QueuePair& qp = *a.qps[q];
    EXPECT_EQ(a.sqs[q]->ring().readable_st(), 0u)
        << "QP " << q << " kept posted work nobody visited: state " << qp_state_name(qp.state())
        << " slot " << qp.sched.slot << " cur.wqe " << qp.req.cur.wqe << " cur.psn "
        << qp.req.cur.psn << " max_psn_sent " << qp.req.max_psn_sent << " unacked "
        << qp.comp.unacked_psn << " peer psn " << b.qps[q]->resp.psn << " peer ctl "
        << b.qps[q]->resp.ctl_pending << " run list " << a.eng->scheduled_qps() << " tx "
        << a.eng->counters().get(RcCounter::kTxPackets) << " acks rx "
        << a.eng->counters().get(RcCounter::kAcksReceived) << " completions " << completions
        << " extra poll: visits " << extra_visits << " tx " << extra_tx
        << " posted when the core gave up " << posted_at_give_up;
  }
  EXPECT_FALSE(producer_failed);
  EXPECT_EQ(completions, kPosts);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), 0u);
}

}  // namespace
}  // namespace rocedp::rc
