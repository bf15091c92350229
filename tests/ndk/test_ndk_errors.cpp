// Error paths through the NDK API and ResizeCq under traffic: each gives its
// documented completion status (dataplane/rc/queue_pair.hpp table).

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <chrono>
#include <string>
#include <thread>

#include "control/ndk_internal.hpp"
#include "dataplane/wire/builder.hpp"
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
  // x on A's core 0, y on B's core 1: a PD, a CQ of `cq_depth` and a QP of `qp_depth` each, not
  // connected.
  void make_endpoints(uint32_t cq_depth, uint32_t qp_depth = 64) {
    x_.host = &a_;
    y_.host = &b_;
    for (Endpoint* e : {&x_, &y_}) {
      e->pd = make_pd(*e->host);
      e->cq = make_cq(*e->host, cq_depth, e == &x_ ? 0 : 1, &e->notes);
      e->qp = make_qp(e->pd, e->cq, e->cq, e, qp_depth);
    }
  }
  void setup_pair(const NdkQpConnectParams* px = nullptr, const NdkQpConnectParams* py = nullptr,
                  uint32_t cq_depth = 4096) {
    make_endpoints(cq_depth);
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
  ASSERT_EQ(x_.qp->write(reinterpret_cast<void*>(1), &ss, 1, dst_->va(),
                         dst_->mr->get_remote_token() ^ 0x100, 0),
            STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(r[0].provider_error_code, 10u) << "IBV_WC_REM_ACCESS_ERR";
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(dst_->data[i], 0) << "byte " << i << " written";
  EXPECT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0),
            STATUS_CONNECTION_INVALID)
      << "the QP is in error";
  // Why, at both ends (Qp::error_reason): the peer refused x's WRITE; y refused it. y's core sets
  // its reason as its NAK leaves, which x's completion follows.
  EXPECT_EQ(x_.qp->error_reason(), "remote_access");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (y_.qp->error_reason().empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  EXPECT_EQ(y_.qp->error_reason(), "refused_access");
}

// Qp::report_remote_writes through real cores: asked before the QP connects, each WRITE the peer
// completes is a kRemoteWrite on the receive CQ (address, length); not asked (x), nothing; asked
// once connected, STATUS_INVALID_DEVICE_STATE.
TEST_F(NdkErrors, RemoteWritesAreReportedOnlyWhereAskedBeforeConnecting) {
  make_endpoints(256);
  src_ = buffer(x_.pd, 8192);
  dst_ = buffer(y_.pd, 8192);
  ASSERT_EQ(y_.qp->report_remote_writes(), STATUS_SUCCESS);
  connect(x_, y_);
  EXPECT_EQ(y_.qp->report_remote_writes(), STATUS_INVALID_DEVICE_STATE);
  EXPECT_EQ(x_.qp->report_remote_writes(), STATUS_INVALID_DEVICE_STATE);
  std::memset(src_->ptr(), 0x5C, 3000);
  const NdkSge ss = src_->sge(0, 3000);
  ASSERT_EQ(x_.qp->write(reinterpret_cast<void*>(1), &ss, 1, dst_->va() + 8,
                         dst_->mr->get_remote_token(), 0),
            STATUS_SUCCESS);
  auto rx = wait_results(x_.cq, 1);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].status, STATUS_SUCCESS);
  auto ry = wait_results(y_.cq, 1);
  ASSERT_EQ(ry.size(), 1u);
  EXPECT_EQ(ry[0].type, NdkOperationType::kRemoteWrite);
  EXPECT_EQ(ry[0].status, STATUS_SUCCESS);
  EXPECT_EQ(ry[0].bytes_transferred, 3000u);
  EXPECT_EQ(ry[0].type_specific_completion_output, dst_->va() + 8);
  EXPECT_EQ(ry[0].request_context, nullptr);
  EXPECT_EQ(ry[0].qp_context, &y_);
  EXPECT_EQ(dst_->data[8 + 2999], 0x5C);
  // The other way: x did not ask, its CQ gets y's WRITE completion only.
  const NdkSge ds = dst_->sge(0, 64);
  ASSERT_EQ(
      y_.qp->write(reinterpret_cast<void*>(2), &ds, 1, src_->va(), src_->mr->get_remote_token(), 0),
      STATUS_SUCCESS);
  ry = wait_results(y_.cq, 1);
  ASSERT_EQ(ry.size(), 1u);
  EXPECT_EQ(ry[0].type, NdkOperationType::kWrite);
  rx = wait_results(x_.cq, 1, 200'000);
  EXPECT_TRUE(rx.empty()) << "x reported a WRITE it did not ask for";
}

TEST_F(NdkErrors, RnrRetryExhaustedIsIoTimeout) {
  make_endpoints(256);
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
  make_endpoints(256);
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
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0),
            STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(r[0].provider_error_code, 12u) << "IBV_WC_RETRY_EXC_ERR";
}

TEST_F(NdkErrors, FlushCancelsPendingRequests) {
  setup_pair();
  const NdkSge rs = src_->sge(0, 64);
  for (uintptr_t i = 0; i < 5; ++i)
    ASSERT_EQ(x_.qp->receive(reinterpret_cast<void*>(i), &rs, 1), STATUS_SUCCESS);
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
  for (uintptr_t i = 0; i < 3; ++i)
    ASSERT_EQ(y_.qp->receive(reinterpret_cast<void*>(i), &rs, 1), STATUS_SUCCESS);
  Closed c;
  ASSERT_EQ(y_.qp->close(&Closed::cb, &c), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return c.count == 1; }));
  y_.qp = nullptr;
  NdkResultEx r[8];
  ASSERT_EQ(y_.cq->get_results_ex(r, 8), 3u)
      << "every request came back before the close completed";
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
  EXPECT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_CONNECTION_INVALID)
      << "the QP of a dead CQ is dead";
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
      ASSERT_EQ(y_.qp->receive(reinterpret_cast<void*>(uintptr_t{recv_posted}), &rs, 1),
                STATUS_SUCCESS);
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
  ASSERT_EQ(wait_results(x_.cq, 10).size(),
            10u);  // acknowledged: the peer holds 10 receive completions
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
    return ::operator new (bytes, std::align_val_t{64});
  }
  static void release(void* p, size_t, void*) { ::operator delete (p, std::align_val_t{64}); }
};

TEST_F(NdkErrors, ResizeWithoutMemoryIsInsufficientResources) {
  FailAfter fail;
  test_hooks::set_cq_ring_allocator(*a_.adapter, {&FailAfter::alloc, &FailAfter::release, &fail});
  Cq* cq = make_cq(a_, 16, 0);
  test_hooks::set_cq_ring_allocator(*a_.adapter, {});
  Requested rq;
  ASSERT_EQ(cq->resize(64, &Requested::cb, &rq), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return rq.done; }));
  EXPECT_EQ(rq.status, STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(cq->depth(), 16u);
  close_cq(cq);
}

// ---- Close with a request pending (NDKPI object lifetime) -----------------------------------

TEST_F(NdkErrors, CqCloseCompletesAPendingResizeCancelledFirst) {
  Cq* cq = make_cq(a_, 16, 0);
  Order order;
  Order::Tag rs{&order, "resize"}, cl{&order, "close"};
  ASSERT_EQ(cq->resize(64, &Order::request, &rs), STATUS_PENDING);
  ASSERT_EQ(cq->close(&Order::closed, &cl), STATUS_PENDING);
  EXPECT_TRUE(order.events.empty()) << "nothing runs inside the calls";
  ASSERT_TRUE(poll_until([&] { return cl.count != 0; }, 100'000));
  poll(10);
  EXPECT_EQ(rs.count, 1);
  EXPECT_EQ(rs.status, STATUS_CANCELLED);
  EXPECT_EQ(cl.count, 1);
  EXPECT_EQ(order.events, (std::vector<std::string>{"resize", "close"}));
}

TEST_F(NdkErrors, QpCloseCompletesAPendingConnectCancelledFirst) {
  make_endpoints(64, 16);
  Order order;
  Order::Tag conn{&order, "connect"}, cl{&order, "close"};
  ASSERT_EQ(x_.qp->connect(params_to(b_, y_.qp, 1, 2), &Order::request, &conn), STATUS_PENDING);
  ASSERT_EQ(x_.qp->close(&Order::closed, &cl), STATUS_PENDING);
  EXPECT_TRUE(order.events.empty());
  ASSERT_TRUE(poll_until([&] { return cl.count != 0; }, 100'000));
  poll(10);
  x_.qp = nullptr;
  EXPECT_EQ(conn.count, 1);
  EXPECT_EQ(conn.status, STATUS_CANCELLED);
  EXPECT_EQ(order.events, (std::vector<std::string>{"connect", "close"}));
}

// ---- ResizeCq inline failures (seed 002): no callback ----------------------------------------

struct Counted {
  int count = 0;
  NTSTATUS status = STATUS_PENDING;
  static void cb(void* c, NTSTATUS s) {
    auto* me = static_cast<Counted*>(c);
    ++me->count;
    me->status = s;
  }
};

TEST_F(NdkErrors, ResizeCqAboveMaxCqDepthIsInvalidParameterInlineWithoutCallback) {
  Cq* cq = make_cq(a_, 16, 0);
  NdkAdapterInfo info;
  size_t size = sizeof(info);
  ASSERT_EQ(a_.adapter->query_adapter_info(&info, &size), STATUS_SUCCESS);
  Counted over, zero, ok;
  EXPECT_EQ(cq->resize(info.max_cq_depth + 1, &Counted::cb, &over), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(cq->resize(0, &Counted::cb, &zero), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(cq->resize(info.max_cq_depth, &Counted::cb, &ok), STATUS_PENDING)
      << "= MaxCqDepth is allowed";
  ASSERT_TRUE(poll_until([&] { return ok.count != 0; }));
  poll(20);
  EXPECT_EQ(ok.count, 1);
  EXPECT_EQ(ok.status, STATUS_SUCCESS);
  EXPECT_EQ(cq->depth(), info.max_cq_depth);
  EXPECT_EQ(over.count, 0) << "an inline failure fires no callback";
  EXPECT_EQ(zero.count, 0);
  close_cq(cq);
}

// The request cannot reach the CQ's core (its request ring is full): INSUFFICIENT_RESOURCES
// inline, and that call's callback never fires; every call that pended completes exactly once.
TEST_F(NdkErrors, ResizeCqInsufficientResourcesInlineWithoutCallback) {
  Cq* cq = make_cq(a_, 16, 0);
  std::vector<Counted> calls(4096);
  size_t pended = 0;
  NTSTATUS st = STATUS_PENDING;
  while (pended < calls.size()) {
    st = cq->resize(pended % 2 == 0 ? 32 : 16, &Counted::cb, &calls[pended]);
    if (st != STATUS_PENDING) break;
    ++pended;
  }
  ASSERT_LT(pended, calls.size()) << "the ring never filled";
  EXPECT_EQ(st, STATUS_INSUFFICIENT_RESOURCES);
  Counted& refused = calls[pended];
  ASSERT_TRUE(poll_until([&] {
    for (size_t i = 0; i < pended; ++i)
      if (calls[i].count == 0) return false;
    return true;
  }));
  poll(50);
  for (size_t i = 0; i < pended; ++i) {
    ASSERT_EQ(calls[i].count, 1) << "call " << i;
    ASSERT_EQ(calls[i].status, STATUS_SUCCESS) << "call " << i;
  }
  EXPECT_EQ(refused.count, 0) << "the inline failure fired its callback";
  Counted again;
  ASSERT_EQ(cq->resize(64, &Counted::cb, &again), STATUS_PENDING) << "room again";
  ASSERT_TRUE(poll_until([&] { return again.count != 0; }));
  EXPECT_EQ(again.status, STATUS_SUCCESS);
  close_cq(cq);
}

// ---- PD isolation and bounds: every failure is a NAK, nothing touched ------------------------

TEST_F(NdkErrors, WriteToAnMrOfAnotherPdIsRemoteAccessErrorAndTouchesNothing) {
  setup_pair();
  // B: a second PD with its own region; A's QP is connected to B's QP of the first PD.
  Pd* other = make_pd(b_);
  auto foreign = buffer(other, 4096, kMrAll, 0x5A);
  std::memset(src_->ptr(), 0xC3, 4096);
  const NdkSge ss = src_->sge(0, 4096);
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, foreign->va(), foreign->mr->get_remote_token(), 0),
            STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(r[0].provider_error_code, 10u) << "NAK remote access error";
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(foreign->data[i], 0x5A) << "byte " << i;
  close_mr(foreign->mr);
  foreign->mr = nullptr;
  EXPECT_EQ(other->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(NdkErrors, ReadFromAnMrOfAnotherPdIsRemoteAccessError) {
  setup_pair();
  Pd* other = make_pd(b_);
  auto foreign = buffer(other, 4096, kMrAll, 0x5A);
  std::memset(src_->ptr(), 0, 4096);
  const NdkSge ds = src_->sge(0, 4096);
  ASSERT_EQ(x_.qp->read(nullptr, &ds, 1, foreign->va(), foreign->mr->get_remote_token(), 0),
            STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_ACCESS_VIOLATION);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(src_->data[i], 0) << "byte " << i << " read";
  close_mr(foreign->mr);
  foreign->mr = nullptr;
  EXPECT_EQ(other->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(NdkErrors, WritePastTheEndOfTheRegionIsRemoteAccessErrorAndTouchesNothing) {
  setup_pair();
  // A region of 32 KiB inside dst_ (64 KiB): a WRITE that starts inside and runs 1 byte past its
  // end must fail before any byte moves, also the bytes inside.
  std::vector<uint8_t> region(32768, 0x11);
  Mr* mr = nullptr;
  ASSERT_EQ(y_.pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
  ASSERT_EQ(mr->register_mr(region.data(), region.size(), kMrAll, nullptr, nullptr),
            STATUS_SUCCESS);
  std::memset(src_->ptr(), 0xEE, 4096);
  const NdkSge ss = src_->sge(0, 4096);
  const uint64_t va = reinterpret_cast<uint64_t>(region.data()) + region.size() - 4095;
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, va, mr->get_remote_token(), 0), STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_ACCESS_VIOLATION);
  for (size_t i = 0; i < region.size(); ++i) ASSERT_EQ(region[i], 0x11) << "byte " << i;
  close_mr(mr);
}

TEST_F(NdkErrors, RemoteAddressWrappingPastTheEndOfTheAddressSpaceIsRemoteAccessError) {
  setup_pair();
  std::memset(dst_->ptr(), 0x22, dst_->data.size());
  const NdkSge ss = src_->sge(0, 4096);
  // VA + length wraps to a small address: (2^64 - 16) + 4096 "ends" at 4080.
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, ~uint64_t{0} - 15, dst_->mr->get_remote_token(), 0),
            STATUS_SUCCESS);
  auto r = wait_results(x_.cq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(r[0].provider_error_code, 10u);
  for (size_t i = 0; i < dst_->data.size(); ++i) ASSERT_EQ(dst_->data[i], 0x22) << "byte " << i;
}

// ---- Transport checks on the production RX path ----------------------------------------------

namespace {
// A RoCEv2 frame from A's address to B's QP `dqpn`, sent on A's port (queue 0; the test thread
// is every core's thread), so it arrives through B's polling core like any frame.
void inject(Host& from, Host& to, uint8_t opcode, uint32_t dqpn, uint32_t psn, size_t payload_len) {
  wire::PacketFields f;
  std::memcpy(f.eth.dst.data(), to.mac.bytes.data(), 6);
  std::memcpy(f.eth.src.data(), from.mac.bytes.data(), 6);
  f.ip.src = from.ip;
  f.ip.dst = to.ip;
  f.ip.id = 7;
  f.udp.src_port = 49999;
  f.bth.opcode = opcode;
  f.bth.dqpn = dqpn;
  f.bth.psn = psn;
  f.deth.qkey = 0x80010000;
  f.deth.src_qp = 1;
  std::vector<uint8_t> payload(payload_len, 0x77);
  std::vector<uint8_t> frame(wire::frame_len(f, payload_len));
  ASSERT_EQ(wire::build_frame(frame, f, wire::Bytes(payload.data(), payload.size())), frame.size());
  rte_mbuf* m = rte_pktmbuf_alloc(pool().get());
  ASSERT_NE(m, nullptr);
  std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(),
              frame.size());
  ASSERT_EQ(from.port->tx_burst(0, &m, 1), 1);
}
uint64_t rc_counter(Host& h, uint32_t core, rc::RcCounter c) {
  return test_hooks::core_rdma(*h.adapter, core).engine_st().counters().get(c);
}
}  // namespace

TEST_F(NdkErrors, UdOpcodesToAnRcQpAreDroppedAndCounted) {
  setup_pair();
  std::memset(dst_->ptr(), 0, 64);
  const NdkSge rs = dst_->sge(0, 64);
  ASSERT_EQ(y_.qp->receive(reinterpret_cast<void*>(9), &rs, 1), STATUS_SUCCESS);
  const uint64_t before = rc_counter(b_, 1, rc::RcCounter::kRxDropNotRc);
  // UD SEND_ONLY and SEND_ONLY_WITH_IMMEDIATE with the PSN y's responder expects next (100).
  inject(a_, b_, wire::opcode::kUdSendOnly, y_.qp->qpn(), 100, 8);
  inject(a_, b_, wire::opcode::kUdSendOnlyImm, y_.qp->qpn(), 100, 8);
  poll(50);
  NdkResultEx r[4];
  EXPECT_EQ(y_.cq->get_results_ex(r, 4), 0u) << "a UD packet ran as an RC SEND";
  EXPECT_EQ(rc_counter(b_, 1, rc::RcCounter::kRxDropNotRc), before + 2);
  EXPECT_EQ(dst_->data[0], 0) << "UD payload written";
  // The QP is untouched: A's real SEND (PSN 100) takes the receive.
  std::memset(src_->ptr(), 0x31, 16);
  const NdkSge ss = src_->sge(0, 16);
  ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  auto got = wait_results(y_.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, STATUS_SUCCESS);
  EXPECT_EQ(got[0].bytes_transferred, 16u);
  EXPECT_EQ(dst_->data[0], 0x31);
}

TEST_F(NdkErrors, CnpsAreCountedAsCnps) {
  setup_pair();
  const uint64_t ghosts = rc_counter(b_, 1, rc::RcCounter::kRxGhostResponse);
  const uint64_t not_rc = rc_counter(b_, 1, rc::RcCounter::kRxDropNotRc);
  inject(a_, b_, wire::opcode::kCnp, y_.qp->qpn(), 0, wire::kCnpReservedLen);
  inject(a_, b_, wire::opcode::kCnp, y_.qp->qpn(), 0, wire::kCnpReservedLen);
  poll(50);
  EXPECT_EQ(rc_counter(b_, 1, rc::RcCounter::kRxCnp), 2u);
  EXPECT_EQ(rc_counter(b_, 1, rc::RcCounter::kRxGhostResponse), ghosts)
      << "a CNP ran as a response";
  EXPECT_EQ(rc_counter(b_, 1, rc::RcCounter::kRxDropNotRc), not_rc) << "a CNP is not a drop";
  // And the connection still works.
  const NdkSge rs = dst_->sge(0, 64);
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  const NdkSge ss = src_->sge(0, 16);
  ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  auto got = wait_results(y_.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, STATUS_SUCCESS);
}

// ---- Deregistration takes effect at once; after its completion no byte is touched ------------

// B's 2 MiB region (its own mapping) is the target of a 1 MiB WRITE (first half) and a 1 MiB
// READ (second half) from A, on two QP pairs. While both are in flight B deregisters; once the
// deregistration completes the test makes the mapping inaccessible (PROT_NONE: any later touch
// by a core kills the test, like ASan after a free). The WRITE's later packets are NAKed and
// the READ's queued responses stop: both complete with STATUS_ACCESS_VIOLATION.
TEST_F(NdkErrors, DeregisterWhileAWriteAndAReadAreInFlightTouchesNothingAfterItCompletes) {
  setup_pair();
  constexpr size_t kHalf = 1 << 20;
  void* map = mmap(nullptr, 2 * kHalf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* region = static_cast<uint8_t*>(map);
  std::memset(region + kHalf, 0x5C, kHalf);  // what the READ brings back
  Mr* mr = nullptr;
  ASSERT_EQ(y_.pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
  ASSERT_EQ(mr->register_mr(region, 2 * kHalf, kMrAll, nullptr, nullptr), STATUS_SUCCESS);
  const uint32_t token = mr->get_remote_token();
  // A second pair (same PDs, A's core 0, B's core 1) carries the READ.
  Endpoint x2, y2;
  x2.host = &a_;
  y2.host = &b_;
  x2.pd = x_.pd;
  y2.pd = y_.pd;
  x2.cq = make_cq(a_, 64, 0);
  y2.cq = make_cq(b_, 64, 1);
  x2.qp = make_qp(x2.pd, x2.cq, x2.cq, &x2, 16);
  y2.qp = make_qp(y2.pd, y2.cq, y2.cq, &y2, 16);
  NdkQpConnectParams p2 = params_to(b_, y2.qp, 300, 9000);
  NdkQpConnectParams q2 = params_to(a_, x2.qp, 9000, 300);
  connect(x2, y2, &p2, &q2);
  std::vector<uint8_t> wsrc(kHalf, 0xA7), rsink(kHalf, 0);
  Mr* wmr = nullptr;
  Mr* rmr = nullptr;
  ASSERT_EQ(x_.pd->create_mr(false, nullptr, nullptr, &wmr), STATUS_SUCCESS);
  ASSERT_EQ(wmr->register_mr(wsrc.data(), kHalf, kMrAll, nullptr, nullptr), STATUS_SUCCESS);
  ASSERT_EQ(x_.pd->create_mr(false, nullptr, nullptr, &rmr), STATUS_SUCCESS);
  ASSERT_EQ(rmr->register_mr(rsink.data(), kHalf, kMrAll, nullptr, nullptr), STATUS_SUCCESS);
  const NdkSge ws{wsrc.data(), static_cast<uint32_t>(kHalf), wmr->get_local_token()};
  const NdkSge rs{rsink.data(), static_cast<uint32_t>(kHalf), rmr->get_local_token()};
  ASSERT_EQ(x_.qp->write(reinterpret_cast<void*>(1), &ws, 1, reinterpret_cast<uint64_t>(region),
                         token, 0),
            STATUS_SUCCESS);
  ASSERT_EQ(x2.qp->read(reinterpret_cast<void*>(2), &rs, 1,
                        reinterpret_cast<uint64_t>(region + kHalf), token, 0),
            STATUS_SUCCESS);
  // Both in flight: the WRITE has landed its first bytes but not its last, the READ brought its
  // first bytes but not its last.
  ASSERT_TRUE(poll_until([&] { return region[0] == 0xA7 && rsink[0] == 0x5C; }, 100'000));
  ASSERT_EQ(region[kHalf - 1], 0) << "the WRITE finished before the deregistration (test too slow)";
  ASSERT_EQ(rsink[kHalf - 1], 0) << "the READ finished before the deregistration (test too slow)";
  Requested dereg;
  ASSERT_EQ(mr->deregister_mr(&Requested::cb, &dereg), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return dereg.done; }));
  EXPECT_EQ(dereg.status, STATUS_SUCCESS);
  // From here on the memory is gone for the cores.
  ASSERT_EQ(mprotect(map, 2 * kHalf, PROT_NONE), 0);
  auto wr = wait_results(x_.cq, 1);
  auto rr = wait_results(x2.cq, 1);
  ASSERT_EQ(wr.size(), 1u);
  ASSERT_EQ(rr.size(), 1u);
  EXPECT_EQ(wr[0].status, STATUS_ACCESS_VIOLATION) << "WRITE: middle/last packets NAKed";
  EXPECT_EQ(wr[0].provider_error_code, 10u);
  EXPECT_EQ(rr[0].status, STATUS_ACCESS_VIOLATION) << "READ: queued responses stopped, NAK";
  poll(1000);  // nothing else comes (and no core touches the mapping)
  ASSERT_EQ(mprotect(map, 2 * kHalf, PROT_READ), 0);
  EXPECT_NE(region[kHalf - 1], 0xA7) << "the WRITE's last byte landed after the deregistration";
  ASSERT_EQ(munmap(map, 2 * kHalf), 0);
  close_mr(mr);
  close_mr(wmr);
  close_mr(rmr);
  close_qp(x2.qp);
  close_qp(y2.qp);
  close_cq(x2.cq);
  close_cq(y2.cq);
}

}  // namespace
}  // namespace rocedp::test
