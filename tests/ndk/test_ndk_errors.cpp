// Error paths through the NDK API (issue 3 §4e) and ResizeCq under traffic: each gives its
// documented completion status (dataplane/rc/queue_pair.hpp table).

#include <gtest/gtest.h>

#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {
namespace {

class NdkErrors : public NdkFixture {
 protected:
  void TearDown() override {
    std::vector<std::unique_ptr<Buffer>> bx, by;
    if (src_) bx.push_back(std::move(src_));
    if (dst_) by.push_back(std::move(dst_));
    if (x_.pd != nullptr) close_endpoint(x_, &bx);
    if (y_.pd != nullptr) close_endpoint(y_, &by);
    NdkFixture::TearDown();
  }
  void setup_pair(const NdkQpConnectParams* px = nullptr, const NdkQpConnectParams* py = nullptr,
                  uint32_t cq_depth = 4096) {
    x_.host = &a_;
    y_.host = &b_;
    for (Endpoint* e : {&x_, &y_}) {
      e->pd = make_pd(*e->host);
      e->cq = make_cq(*e->host, cq_depth, e == &x_ ? 0 : 1, &e->notes);
      e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
    }
    src_ = buffer(x_.pd, 1 << 16);
    dst_ = buffer(y_.pd, 1 << 16);
    NdkQpConnectParams dx = params_to(b_, y_.qp, 100, 7000);
    NdkQpConnectParams dy = params_to(a_, x_.qp, 7000, 100);
    connect(x_, y_, px != nullptr ? px : &dx, py != nullptr ? py : &dy);
  }

  Endpoint x_, y_;
  std::unique_ptr<Buffer> src_, dst_;
};

TEST_F(NdkErrors, RemoteAccessErrorWritesNothingAndFlushesTheRest) {
  setup_pair();
  std::memset(src_->ptr(), 0xAB, 4096);
  const NdkSge ss = src_->sge(0, 4096);
  ASSERT_EQ(x_.qp->write(reinterpret_cast<void*>(1), &ss, 1, dst_->va(), dst_->mr->get_remote_token() ^ 0x100, 0),
            STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(r[0].provider_error_code, 10u) << "IBV_WC_REM_ACCESS_ERR";
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(dst_->data[i], 0) << "byte " << i << " written";
  EXPECT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0), STATUS_CONNECTION_INVALID)
      << "the QP is in error";
}

TEST_F(NdkErrors, RnrRetryExhaustedIsIoTimeout) {
  x_.host = &a_;
  y_.host = &b_;
  for (Endpoint* e : {&x_, &y_}) {
    e->pd = make_pd(*e->host);
    e->cq = make_cq(*e->host, 256, e == &x_ ? 0 : 1, &e->notes);
    e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
  }
  src_ = buffer(x_.pd, 4096);
  dst_ = buffer(y_.pd, 4096);
  NdkQpConnectParams px = params_to(b_, y_.qp, 100, 7000);
  px.rnr_retry = 2;
  NdkQpConnectParams py = params_to(a_, x_.qp, 7000, 100);
  py.min_rnr_timer = 1;  // 0.01 ms
  connect(x_, y_, &px, &py);
  const NdkSge ss = src_->sge(0, 64);
  ASSERT_EQ(x_.qp->send(reinterpret_cast<void*>(7), &ss, 1, 0), STATUS_SUCCESS);
  ASSERT_EQ(x_.qp->send(reinterpret_cast<void*>(8), &ss, 1, 0), STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(r[0].provider_error_code, 13u) << "IBV_WC_RNR_RETRY_EXC_ERR";
  EXPECT_EQ(r[1].status, STATUS_CANCELLED);
  EXPECT_EQ(r[1].request_context, reinterpret_cast<void*>(8));
}

TEST_F(NdkErrors, RetryExhaustedWhenThePeerIsGone) {
  x_.host = &a_;
  y_.host = &b_;
  for (Endpoint* e : {&x_, &y_}) {
    e->pd = make_pd(*e->host);
    e->cq = make_cq(*e->host, 256, e == &x_ ? 0 : 1, &e->notes);
    e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
  }
  src_ = buffer(x_.pd, 4096);
  dst_ = buffer(y_.pd, 4096);
  NdkQpConnectParams px = params_to(b_, y_.qp, 100, 7000);
  px.retry_count = 2;
  px.local_ack_timeout = 4;  // 65 µs
  NdkQpConnectParams py = params_to(a_, x_.qp, 7000, 100);
  connect(x_, y_, &px, &py);
  close_qp(y_.qp);  // the peer QP is gone: its QPN is unknown on B
  y_.qp = nullptr;
  const NdkSge ss = src_->sge(0, 64);
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0), STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(r[0].provider_error_code, 12u) << "IBV_WC_RETRY_EXC_ERR";
}

TEST_F(NdkErrors, FlushCancelsPendingRequests) {
  setup_pair();
  const NdkSge rs = src_->sge(0, 64);
  for (uintptr_t i = 0; i < 5; ++i) ASSERT_EQ(x_.qp->receive(reinterpret_cast<void*>(i), &rs, 1), STATUS_SUCCESS);
  poll(4);
  NdkResult res[8];
  EXPECT_EQ(x_.cq->get_results(res, 8), 0u);
  x_.qp->flush();
  auto r = wait_results(x_.cq, 5);
  ASSERT_EQ(r.size(), 5u);
  for (uintptr_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r[i].status, STATUS_CANCELLED);
    EXPECT_EQ(r[i].type, NdkOperationType::kReceive);
    EXPECT_EQ(r[i].request_context, reinterpret_cast<void*>(i)) << "posting order";
  }
  const NdkSge ss = src_->sge(0, 8);
  EXPECT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_CONNECTION_INVALID);
}

TEST_F(NdkErrors, CloseWithPendingWorkCompletesItCancelledFirst) {
  setup_pair();
  const NdkSge rs = dst_->sge(0, 64);
  for (uintptr_t i = 0; i < 3; ++i) ASSERT_EQ(y_.qp->receive(reinterpret_cast<void*>(i), &rs, 1), STATUS_SUCCESS);
  Closed c;
  ASSERT_EQ(y_.qp->close(&Closed::cb, &c), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return c.count == 1; }));
  y_.qp = nullptr;
  NdkResultEx r[8];
  ASSERT_EQ(y_.cq->get_results_ex(r, 8), 3u) << "every request came back before the close completed";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[i].status, STATUS_CANCELLED);
  poll(8);
  EXPECT_EQ(c.count, 1);
  EXPECT_EQ(y_.cq->get_results_ex(r, 8), 0u) << "nothing after close completion";
}

TEST_F(NdkErrors, CqOverrunIsBufferOverflowOnTheOwningCore) {
  setup_pair(nullptr, nullptr, 2);
  const NdkSge ss = src_->sge(0, 8);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  const NdkSge rs = dst_->sge(0, 8);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_TRUE(poll_until([&] { return x_.notes.count > 0; }));
  EXPECT_EQ(x_.notes.last, STATUS_BUFFER_OVERFLOW);
  EXPECT_EQ(x_.notes.lcore, rte_lcore_id());
  EXPECT_TRUE(x_.cq->overrun());
  EXPECT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_CONNECTION_INVALID) << "the QP of a dead CQ is dead";
}

TEST_F(NdkErrors, ResizeCqWhileTrafficFlowsLosesNothing) {
  setup_pair(nullptr, nullptr, 64);
  constexpr uint32_t kMessages = 3000;
  const NdkSge rs = dst_->sge(0, 64);
  const NdkSge ss = src_->sge(0, 64);
  uint32_t posted = 0, recv_posted = 0, sends_done = 0;
  std::vector<uintptr_t> got;
  const uint32_t depths[] = {128, 64, 512, 96, 4096, 80};
  uint32_t resizes = 0, resize_ok = 0;
  Requested rq;
  rq.done = true;
  NdkResultEx r[16];
  for (uint64_t round = 0; round < 4'000'000 && got.size() < kMessages; ++round) {
    while (recv_posted < kMessages && recv_posted - got.size() < 32) {
      ASSERT_EQ(y_.qp->receive(reinterpret_cast<void*>(uintptr_t{recv_posted}), &rs, 1), STATUS_SUCCESS);
      ++recv_posted;
    }
    while (posted < kMessages && posted - sends_done < 32 && posted < recv_posted) {
      ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
      ++posted;
    }
    poll(1);
    for (uint32_t n; (n = x_.cq->get_results_ex(r, 16)) != 0;) {
      for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(r[i].status, STATUS_SUCCESS);
      sends_done += n;
    }
    // Drain the receive CQ slowly (a few per round) so it holds completions while resized.
    const uint32_t n = y_.cq->get_results_ex(r, 3);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(r[i].status, STATUS_SUCCESS);
      got.push_back(reinterpret_cast<uintptr_t>(r[i].request_context));
    }
    if (rq.done && round % 50 == 0) {
      if (rq.status == STATUS_SUCCESS) ++resize_ok;
      rq = Requested{};
      ASSERT_EQ(y_.cq->resize(depths[resizes++ % 6], &Requested::cb, &rq), STATUS_PENDING);
    }
  }
  ASSERT_EQ(got.size(), kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) ASSERT_EQ(got[i], i) << "lost or reordered";
  EXPECT_GT(resize_ok, 5u);
  EXPECT_FALSE(y_.cq->overrun());
  ASSERT_TRUE(poll_until([&] { return rq.done; }));
}

TEST_F(NdkErrors, ResizeBelowTheCompletionsHeldIsInvalidParameter) {
  setup_pair(nullptr, nullptr, 64);
  const NdkSge rs = dst_->sge(0, 8);
  const NdkSge ss = src_->sge(0, 8);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  ASSERT_EQ(wait_results(x_.cq, 10).size(), 10u);  // acknowledged: the peer holds 10 receive completions
  Requested rq;
  ASSERT_EQ(y_.cq->resize(5, &Requested::cb, &rq), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return rq.done; }));
  EXPECT_EQ(rq.status, STATUS_INVALID_PARAMETER);
  EXPECT_EQ(y_.cq->depth(), 64u);
  auto r = wait_results(y_.cq, 10);
  EXPECT_EQ(r.size(), 10u);
}

struct FailAfter {
  int allowed = 1;
  static void* alloc(size_t bytes, void* c) {
    auto* self = static_cast<FailAfter*>(c);
    if (self->allowed-- <= 0) return nullptr;
    return ::operator new(bytes, std::align_val_t{64});
  }
  static void release(void* p, size_t, void*) { ::operator delete(p, std::align_val_t{64}); }
};

TEST_F(NdkErrors, ResizeWithoutMemoryIsInsufficientResources) {
  FailAfter fail;
  a_.adapter->set_cq_ring_allocator({&FailAfter::alloc, &FailAfter::release, &fail});
  Cq* cq = make_cq(a_, 16, 0);
  a_.adapter->set_cq_ring_allocator({});
  Requested rq;
  ASSERT_EQ(cq->resize(64, &Requested::cb, &rq), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return rq.done; }));
  EXPECT_EQ(rq.status, STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(cq->depth(), 16u);
  close_cq(cq);
}

}  // namespace
}  // namespace rocedp::test
