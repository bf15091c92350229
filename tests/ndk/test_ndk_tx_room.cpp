// A full TX ring is back-pressure, not loss. The RC engine counts a frame as sent
// once it handed it to the core; if the port's TX ring then refuses it, the core keeps it for the
// next burst, and the engine asks for room before it builds a packet (rolling back when there is
// none, as rxe's save_state/rollback_state). Here the peer stops reading, so A's ring (1,024
// frames) fills while eight QPs have 2,048 packets to send; when the peer reads again every
// WRITE completes without a single retransmission and without a frame dropped for lack of room.

#include <gtest/gtest.h>

#include "dataplane/core_drop_reason.hpp"
#include "dataplane/core_rdma.hpp"
#include "dataplane/rc/rc_engine.hpp"
#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {
namespace {

class NdkTxRoom : public NdkFixture {};

TEST_F(NdkTxRoom, FullTxRingHoldsFramesInsteadOfDroppingThem) {
  constexpr int kPairs = 8;
  constexpr uint32_t kMsgs = 8, kMsgBytes = 32 * 1024;  // 32 packets each at path MTU 1024
  std::vector<Endpoint> xs(kPairs), ys(kPairs);
  std::vector<std::unique_ptr<Buffer>> srcs, dsts;
  for (int i = 0; i < kPairs; ++i) {
    xs[i].host = &a_;
    ys[i].host = &b_;
    for (Endpoint* e : {&xs[i], &ys[i]}) {
      e->pd = make_pd(*e->host);
      e->cq = make_cq(*e->host, 1024, 0);
      e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
    }
    // No retransmission timer (local ACK timeout 0 = infinite): any retransmission below comes
    // from a lost frame, and a lost tail would hang the test.
    NdkQpConnectParams px = params_to(b_, ys[i].qp, 100, 7000);
    NdkQpConnectParams py = params_to(a_, xs[i].qp, 7000, 100);
    px.local_ack_timeout = py.local_ack_timeout = 0;
    connect(xs[i], ys[i], &px, &py);
    srcs.push_back(buffer(xs[i].pd, kMsgs * kMsgBytes));
    dsts.push_back(buffer(ys[i].pd, kMsgs * kMsgBytes));
    for (size_t k = 0; k < srcs.back()->data.size(); ++k)
      srcs.back()->data[k] = static_cast<uint8_t>(k * 7 + i);
  }
  auto* rdma = dynamic_cast<dataplane::CoreRdma*>(a_.cores[0]->roce_handler_st(a_.port->id()));
  ASSERT_NE(rdma, nullptr);
  const rc::RcCounters before = rdma->engine_st().counters();
  const auto no_room = dataplane::drop_index(dataplane::CoreDrop::kNoTxRoom);
  const uint64_t drops0 = a_.cores[0]->stats_st().drops[no_room];

  for (int i = 0; i < kPairs; ++i) {
    for (uint32_t m = 0; m < kMsgs; ++m) {
      const NdkSge s = srcs[i]->sge(m * kMsgBytes, kMsgBytes);
      ASSERT_EQ(xs[i].qp->write(nullptr, &s, 1, dsts[i]->va() + m * kMsgBytes,
                                dsts[i]->mr->get_remote_token(), 0),
                STATUS_SUCCESS);
    }
  }
  // Only A runs: its engine fills the ring towards B, which reads nothing.
  for (int r = 0; r < 500; ++r) {
    for (auto& c : a_.cores) c->poll_once();
  }
  EXPECT_GT(rdma->tx_no_room(), 0u) << "the ring filled and the engine was held back";
  // Now both run.
  size_t completed = 0;
  ASSERT_TRUE(poll_until(
      [&] {
        NdkResultEx r[64];
        for (auto& x : xs) {
          for (uint32_t n; (n = x.cq->get_results_ex(r, 64)) != 0;) {
            for (uint32_t k = 0; k < n; ++k)
              EXPECT_EQ(r[k].status, STATUS_SUCCESS) << status_name(r[k].status);
            completed += n;
          }
        }
        return completed == kPairs * kMsgs;
      },
      200'000))
      << completed << " of " << kPairs * kMsgs << " WRITEs completed";
  for (int i = 0; i < kPairs; ++i) EXPECT_EQ(srcs[i]->data, dsts[i]->data) << "pair " << i;
  const rc::RcCounters& after = rdma->engine_st().counters();
  EXPECT_EQ(a_.cores[0]->stats_st().drops[no_room] - drops0, 0u)
      << "no frame dropped for lack of TX room";
  EXPECT_EQ(after.get(rc::RcCounter::kTxRetransmit) - before.get(rc::RcCounter::kTxRetransmit), 0u);
  EXPECT_EQ(after.get(rc::RcCounter::kGoBackN) - before.get(rc::RcCounter::kGoBackN), 0u);
  for (int i = 0; i < kPairs; ++i) {
    std::vector<std::unique_ptr<Buffer>> bx, by;
    bx.push_back(std::move(srcs[i]));
    by.push_back(std::move(dsts[i]));
    close_endpoint(xs[i], &bx);
    close_endpoint(ys[i], &by);
  }
}

// One connected pair on core 0, A writing kMsgs messages of 64 bytes into B.
class NdkTxHold : public NdkFixture {
 protected:
  static constexpr uint32_t kMsgs = 64, kMsgBytes = 64;

  void SetUp() override {
    NdkFixture::SetUp();
    make_pair(x_, y_, 0, 0, 1024, 128);
    src_ = buffer(x_.pd, kMsgs * kMsgBytes);
    dst_ = buffer(y_.pd, kMsgs * kMsgBytes);
    for (size_t k = 0; k < src_->data.size(); ++k) src_->data[k] = static_cast<uint8_t>(k * 13 + 1);
    rdma_ = dynamic_cast<dataplane::CoreRdma*>(a_.cores[0]->roce_handler_st(a_.port->id()));
    ASSERT_NE(rdma_, nullptr);
  }
  void TearDown() override {
    // (a set-up that failed before the buffers leaves the rest to the adapters' close)
    if (src_ && dst_) close_pair(x_, y_, std::move(src_), std::move(dst_));
    NdkFixture::TearDown();
  }
  void post_writes() {
    for (uint32_t m = 0; m < kMsgs; ++m) {
      const NdkSge s = src_->sge(m * kMsgBytes, kMsgBytes);
      ASSERT_EQ(
          x_.qp->write(nullptr, &s, 1, dst_->va() + m * kMsgBytes, dst_->mr->get_remote_token(), 0),
          STATUS_SUCCESS);
    }
  }
  // A alone, for a while: nothing reaches B's CQ or A's.
  void poll_a_alone() {
    for (int r = 0; r < 200; ++r) a_.cores[0]->poll_once();
    NdkResultEx res[kMsgs];
    EXPECT_EQ(x_.cq->get_results_ex(res, kMsgs), 0u) << "B has not run: no ACK yet";
  }
  // Both run: every WRITE completes, its bytes in place.
  void expect_all_written() {
    size_t completed = 0;
    NdkResultEx res[kMsgs];
    ASSERT_TRUE(poll_until(
        [&] {
          for (uint32_t n; (n = x_.cq->get_results_ex(res, kMsgs)) != 0;) {
            for (uint32_t k = 0; k < n; ++k)
              EXPECT_EQ(res[k].status, STATUS_SUCCESS) << status_name(res[k].status);
            completed += n;
          }
          return completed == kMsgs;
        },
        200'000))
        << completed << " of " << kMsgs << " WRITEs completed";
    EXPECT_EQ(src_->data, dst_->data);
  }

  Endpoint x_, y_;
  std::unique_ptr<Buffer> src_, dst_;
  dataplane::CoreRdma* rdma_ = nullptr;
};

// An empty mbuf pool is back-pressure too: the engine's transmit buffers come from the pool (a
// stash of 32 at a time), and with none left it holds its packets (counted as tx_no_mbuf) and sends
// them once the pool has mbufs again.
TEST_F(NdkTxHold, EmptyPoolHoldsPacketsUntilMbufsReturn) {
  const uint64_t no_mbuf0 = rdma_->tx_no_mbuf();
  std::vector<void*> held;  // every mbuf the pool has left
  for (void* m; rte_mempool_get(pool().get(), &m) == 0;) held.push_back(m);
  ASSERT_FALSE(held.empty());
  post_writes();
  poll_a_alone();
  EXPECT_GT(rdma_->tx_no_mbuf(), no_mbuf0) << "more WRITEs than the stash holds: the pool ran dry";
  rte_mempool_put_bulk(pool().get(), held.data(), static_cast<unsigned>(held.size()));
  expect_all_written();
}

// A core without a TX queue on the port (detached) takes no frame from the engine either: the
// engine holds its packets (tx_no_room) instead of counting them sent while the core drops them,
// and sends them once the queue is back.
TEST_F(NdkTxHold, DetachedTxQueueHoldsPacketsUntilItIsBack) {
  const uint64_t no_room0 = rdma_->tx_no_room();
  const auto no_queue = dataplane::drop_index(dataplane::CoreDrop::kNoTxQueue);
  const uint64_t drops0 = a_.cores[0]->stats_st().drops[no_queue];
  NTSTATUS st = STATUS_PENDING;
  ASSERT_TRUE(dataplane::core_requests::detach_port(*a_.channels[0], a_.port->id(),
                                                    &test::record_result, &st));
  a_.cores[0]->poll_once();
  a_.channels[0]->poll_completions(8);
  ASSERT_EQ(st, STATUS_SUCCESS);
  post_writes();
  poll_a_alone();
  EXPECT_GT(rdma_->tx_no_room(), no_room0);
  EXPECT_EQ(a_.cores[0]->stats_st().drops[no_queue], drops0) << "nothing built and dropped";
  st = STATUS_PENDING;
  ASSERT_TRUE(dataplane::core_requests::attach_port(*a_.channels[0], a_.port, 0,
                                                    &test::record_result, &st));
  a_.cores[0]->poll_once();
  a_.channels[0]->poll_completions(8);
  ASSERT_EQ(st, STATUS_SUCCESS);
  expect_all_written();
}

}  // namespace
}  // namespace rocedp::test
