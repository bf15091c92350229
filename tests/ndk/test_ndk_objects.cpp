// The NDK object layer over two adapters in one process (include/rocedp/adapter.hpp):
// adapter info, creation inline and pending, argument and limit errors, close semantics.

#include <gtest/gtest.h>

#include <string>

#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {
namespace {

using NdkObjects = NdkFixture;

TEST_F(NdkObjects, QueryAdapterInfoReportsEveryFieldFromTheLimits) {
  NdkAdapterInfo info;
  size_t size = 4;
  EXPECT_EQ(a_.adapter->query_adapter_info(&info, &size), STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(size, sizeof(NdkAdapterInfo));
  EXPECT_EQ(a_.adapter->query_adapter_info(nullptr, &size), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(a_.adapter->query_adapter_info(&info, &size), STATUS_SUCCESS);
  const config::LimitsConfig l = limits();
  EXPECT_EQ(info.version.major, 2);
  EXPECT_EQ(info.rdma_technology, NdkRdmaTechnology::kRoceV2);
  EXPECT_NE(info.adapter_flags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, 0u);
  EXPECT_EQ(info.max_cq_depth, l.max_cq_depth);
  EXPECT_EQ(info.max_srq_depth, l.max_srq_depth);
  EXPECT_EQ(info.max_receive_queue_depth, l.max_qp_depth);
  EXPECT_EQ(info.max_initiator_queue_depth, l.max_qp_depth);
  EXPECT_EQ(info.max_inbound_read_limit, l.max_read_limit);
  EXPECT_EQ(info.max_outbound_read_limit, l.max_read_limit);
  EXPECT_EQ(info.max_registration_size, l.max_registration_size);
  EXPECT_EQ(info.frmr_page_count, l.frmr_page_count);
  EXPECT_GE(info.frmr_page_count, 16u);
  EXPECT_EQ(info.max_transfer_length, l.max_transfer_length);
  EXPECT_EQ(info.max_inline_data_size, 64u);
  EXPECT_EQ(info.max_initiator_request_sge, 4u);
  EXPECT_EQ(info.max_receive_request_sge, 4u);
  EXPECT_EQ(info.max_read_request_sge, 4u);
  EXPECT_EQ(info.large_request_threshold, 1024u);
  EXPECT_GT(info.max_caller_data, 0u);
  EXPECT_GT(info.max_callee_data, 0u);
}

// rocedp has no extension interface: every object answers NOT_SUPPORTED whatever it is asked for,
// and a null GUID or output is INVALID_PARAMETER.
TEST_F(NdkObjects, QueryExtensionInterfaceIsNotSupportedOnEveryObject) {
  Pd* pd = make_pd(a_);
  ASSERT_NE(pd, nullptr);
  Cq* cq = make_cq(a_, 64, 0);
  ASSERT_NE(cq, nullptr);
  Qp* qp = make_qp(pd, cq, cq, nullptr, 16);
  ASSERT_NE(qp, nullptr);
  Mr* mr = nullptr;
  ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
  Mw* mw = nullptr;
  ASSERT_EQ(pd->create_mw(nullptr, nullptr, &mw), STATUS_SUCCESS);
  Srq* srq = nullptr;
  ASSERT_EQ(pd->create_srq(16, 1, 0, nullptr, nullptr, 0, nullptr, nullptr, &srq), STATUS_SUCCESS);
  const NdkGuid some{0x12345678, 0x9abc, 0xdef0, {1, 2, 3, 4, 5, 6, 7, 8}};
  const std::vector<const NdkObjectBase*> objects{a_.adapter, pd, cq, qp, mr, mw, srq};
  for (const NdkObjectBase* o : objects) {
    NdkExtensionInterface ext{&some};
    EXPECT_EQ(o->query_extension_interface(&some, NdkVersion{2, 1}, &ext), STATUS_NOT_SUPPORTED)
        << static_cast<int>(o->header.object_type);
    EXPECT_EQ(ext.dispatch, nullptr);
    EXPECT_EQ(o->query_extension_interface(nullptr, NdkVersion{2, 1}, &ext),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(o->query_extension_interface(&some, NdkVersion{2, 1}, nullptr),
              STATUS_INVALID_PARAMETER);
  }
  close_qp(qp);
  Closed sc;
  if (srq->close(&Closed::cb, &sc) == STATUS_PENDING) {
    ASSERT_TRUE(poll_until([&] { return sc.count == 1; }));
  }
  Closed wc;
  ASSERT_EQ(mw->close(&Closed::cb, &wc), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return wc.count == 1; }));
  close_mr(mr);
  close_cq(cq);
  EXPECT_EQ(pd->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(NdkObjects, PdAndMrAreCreatedInline) {
  Pd* pd = make_pd(a_);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->header.object_type, NdkObjectType::kPd);
  Mr* mr = nullptr;
  ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
  std::vector<uint8_t> mem(4096);
  EXPECT_EQ(mr->register_mr(nullptr, 10, kMrAll, nullptr, nullptr), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(mr->register_mr(mem.data(), 0, kMrAll, nullptr, nullptr), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(mr->register_mr(mem.data(), mem.size(), kMrAll, nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_NE(mr->get_local_token(), 0u);
  EXPECT_NE(mr->get_remote_token(), 0u);
  EXPECT_EQ(mr->register_mr(mem.data(), mem.size(), kMrAll, nullptr, nullptr),
            STATUS_INVALID_PARAMETER)
      << "already registered";
  EXPECT_EQ(mr->deregister_mr(nullptr, nullptr), STATUS_INVALID_PARAMETER)
      << "NDK: a completion is required";
  Requested dr;
  EXPECT_EQ(mr->deregister_mr(&Requested::cb, &dr), STATUS_PENDING);
  EXPECT_EQ(mr->get_local_token(), 0u) << "the tokens stop working at once";
  EXPECT_FALSE(dr.done) << "completes once every core let go of the memory";
  EXPECT_TRUE(poll_until([&] { return dr.done; }));
  EXPECT_EQ(dr.status, STATUS_SUCCESS);
  EXPECT_EQ(mr->deregister_mr(&Requested::cb, &dr), STATUS_INVALID_PARAMETER);

  // The PD is a parent: its close pends until the MR is closed, then fires once.
  Closed pc;
  EXPECT_EQ(pd->close(&Closed::cb, &pc), STATUS_PENDING);
  poll(4);
  EXPECT_EQ(pc.count, 0);
  EXPECT_EQ(mr->close(nullptr, nullptr), STATUS_SUCCESS) << "not registered: inline";
  EXPECT_EQ(pc.count, 1);
  poll(4);
  EXPECT_EQ(pc.count, 1) << "nothing fires after close completion";
}

TEST_F(NdkObjects, CqCreationPendsUntilItsCoreAnswers) {
  Created c;
  Cq* out = nullptr;
  Notes notes;
  ASSERT_EQ(a_.adapter->create_cq(64, &Notes::cb, &notes, 1, &Created::cb, &c, &out),
            STATUS_PENDING);
  a_.adapter->poll_control();
  EXPECT_FALSE(c.done);
  a_.cores[0]->poll_once();
  a_.adapter->poll_control();
  EXPECT_FALSE(c.done) << "core 0 is not the owner";
  a_.cores[1]->poll_once();
  EXPECT_FALSE(c.done) << "the completion runs on the control thread";
  a_.adapter->poll_control();
  ASSERT_TRUE(c.done);
  EXPECT_EQ(c.status, STATUS_SUCCESS);
  Cq* cq = ndk_object_cast<Cq>(c.object);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(cq->core(), 1u);
  EXPECT_EQ(cq->depth(), 64u);
  NdkResult r[4];
  EXPECT_EQ(cq->get_results(r, 4), 0u);
  close_cq(cq);
}

TEST_F(NdkObjects, BadArgumentsAreInvalidParameter) {
  Created c;
  Cq* out = nullptr;
  const uint32_t max = limits().max_cq_depth;
  EXPECT_EQ(a_.adapter->create_cq(0, nullptr, nullptr, 0, &Created::cb, &c, &out),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(a_.adapter->create_cq(max + 1, nullptr, nullptr, 0, &Created::cb, &c, &out),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, kCores, &Created::cb, &c, &out),
            STATUS_INVALID_PARAMETER);
  Pd* pd = make_pd(a_);
  Cq* cq0 = make_cq(a_, 64, 0);
  Cq* cq1 = make_cq(a_, 64, 1);
  Qp* qp = nullptr;
  EXPECT_EQ(pd->create_qp(nullptr, cq0, nullptr, 16, 16, 1, 1, 0, &Created::cb, &c, &qp),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 0, 16, 1, 1, 0, &Created::cb, &c, &qp),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 16, 16, 5, 1, 0, &Created::cb, &c, &qp),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 16, 16, 1, 1, 65, &Created::cb, &c, &qp),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 16, limits().max_qp_depth + 1, 1, 1, 0, &Created::cb,
                          &c, &qp),
            STATUS_INVALID_PARAMETER);
  // Send and receive CQ on different cores: rocedp keeps a QP's completions on one core.
  EXPECT_EQ(pd->create_qp(cq0, cq1, nullptr, 16, 16, 1, 1, 0, &Created::cb, &c, &qp),
            STATUS_INVALID_PARAMETER);
  Requested rq;
  EXPECT_EQ(cq0->resize(max + 1, &Requested::cb, &rq), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(cq0->resize(0, &Requested::cb, &rq), STATUS_INVALID_PARAMETER);
  EXPECT_FALSE(c.done) << "inline failures fire no callback";
  close_cq(cq0);
  close_cq(cq1);
  EXPECT_EQ(pd->close(nullptr, nullptr), STATUS_SUCCESS);
}

class NdkLimits : public NdkFixture {
 protected:
  config::LimitsConfig adapter_limits() const override {
    config::LimitsConfig l = limits();
    l.max_pds = 2;
    l.max_cqs = 1;
    l.max_mrs = 1;
    l.max_qps = 1;
    return l;
  }
};

TEST_F(NdkLimits, LimitsAreInsufficientResources) {
  Pd* p1 = make_pd(a_);
  Pd* p2 = make_pd(a_);
  Pd* p3 = nullptr;
  EXPECT_EQ(a_.adapter->create_pd(nullptr, nullptr, &p3), STATUS_INSUFFICIENT_RESOURCES);
  Mr* m1 = nullptr;
  Mr* m2 = nullptr;
  ASSERT_EQ(p1->create_mr(false, nullptr, nullptr, &m1), STATUS_SUCCESS);
  EXPECT_EQ(p1->create_mr(false, nullptr, nullptr, &m2), STATUS_INSUFFICIENT_RESOURCES);
  Cq* cq = make_cq(a_, 16, 0);
  Created c;
  Cq* out = nullptr;
  EXPECT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, 0, &Created::cb, &c, &out),
            STATUS_INSUFFICIENT_RESOURCES);
  Qp* q1 = make_qp(p1, cq, cq, nullptr, 16);
  Qp* q2 = nullptr;
  EXPECT_EQ(p1->create_qp(cq, cq, nullptr, 16, 16, 1, 1, 0, &Created::cb, &c, &q2),
            STATUS_INSUFFICIENT_RESOURCES);
  // Closing the CQ pends on its QP; closing the QP lets it finish.
  Closed cc;
  EXPECT_EQ(cq->close(&Closed::cb, &cc), STATUS_PENDING);
  poll(8);
  EXPECT_EQ(cc.count, 0);
  close_qp(q1);
  EXPECT_TRUE(poll_until([&] { return cc.count == 1; }));
  close_mr(m1);
  EXPECT_EQ(p1->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(p2->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(NdkObjects, CqRingAllocationFailureIsInsufficientResources) {
  CqRingAllocatorHook hook;
  hook.allocate = [](size_t, void*) -> void* { return nullptr; };
  hook.release = [](void*, size_t, void*) {};
  test_hooks::set_cq_ring_allocator(*a_.adapter, hook);
  Created c;
  Cq* out = nullptr;
  EXPECT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, 0, &Created::cb, &c, &out),
            STATUS_INSUFFICIENT_RESOURCES);
  test_hooks::set_cq_ring_allocator(*a_.adapter, {});
}

TEST_F(NdkObjects, SrqFeedsQpsOfItsCoreAndNotifiesAtTheLimit) {
  Pd* pa = make_pd(a_);
  Pd* pb = make_pd(b_);
  Cq* ca = make_cq(a_, 256, 0);
  Cq* cb = make_cq(b_, 256, 1);
  Notes srq_notes;
  Srq* srq = nullptr;
  ASSERT_EQ(pb->create_srq(0, 1, 0, nullptr, nullptr, 1, nullptr, nullptr, &srq),
            STATUS_INVALID_PARAMETER);
  ASSERT_EQ(pb->create_srq(16, 1, 0, &Notes::cb, &srq_notes, 1, nullptr, nullptr, &srq),
            STATUS_SUCCESS);
  Endpoint x, y;
  x.host = &a_;
  y.host = &b_;
  x.qp = make_qp(pa, ca, ca, &x, 16);
  y.qp = make_qp(pb, cb, cb, &y, 16, srq);
  NdkSge none{};
  EXPECT_EQ(y.qp->receive(nullptr, &none, 0), STATUS_INVALID_PARAMETER) << "receives go to the SRQ";
  connect(x, y);
  std::vector<uint8_t> mem(4096, 0x5A), in(4096, 0);
  Mr* ma = nullptr;
  Mr* mb = nullptr;
  ASSERT_EQ(pa->create_mr(false, nullptr, nullptr, &ma), STATUS_SUCCESS);
  ASSERT_EQ(ma->register_mr(mem.data(), mem.size(), kMrAll, nullptr, nullptr), STATUS_SUCCESS);
  ASSERT_EQ(pb->create_mr(false, nullptr, nullptr, &mb), STATUS_SUCCESS);
  ASSERT_EQ(mb->register_mr(in.data(), in.size(), kMrAll, nullptr, nullptr), STATUS_SUCCESS);
  const NdkSge rs{in.data(), 1024, mb->get_local_token()};
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(srq->receive(reinterpret_cast<void*>(uintptr_t(i)), &rs, 1), STATUS_SUCCESS);
  // ModifySrq runs on the owning core: limit 3 fires once the posted count falls below 3.
  Requested mod;
  ASSERT_EQ(srq->modify(16, 3, &Requested::cb, &mod), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return mod.done; }));
  EXPECT_EQ(mod.status, STATUS_SUCCESS);
  Requested bad;
  ASSERT_EQ(srq->modify(2, 3, &Requested::cb, &bad), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return bad.done; }));
  EXPECT_EQ(bad.status, STATUS_INVALID_PARAMETER);
  const NdkSge ss{mem.data(), 100, ma->get_local_token()};
  ASSERT_EQ(x.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  ASSERT_EQ(x.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  auto r = wait_results(cb, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].request_context, reinterpret_cast<void*>(0));
  EXPECT_EQ(r[1].request_context, reinterpret_cast<void*>(1));
  EXPECT_EQ(r[1].bytes_transferred, 100u);
  EXPECT_EQ(in[99], 0x5A);
  EXPECT_EQ(srq_notes.count, 1) << "limit event once";
  wait_results(ca, 2);
  // A post refused before it reaches the send queue (INLINE READ; a null region) hands on the
  // requests deferred before it, as one the queue refuses does: the deferred WRITE runs.
  const NdkSge ws{mem.data(), 64, ma->get_local_token()};
  const uint64_t target = reinterpret_cast<uintptr_t>(in.data()) + 2048;
  ASSERT_EQ(x.qp->write(reinterpret_cast<void*>(uintptr_t{7}), &ws, 1, target,
                        mb->get_remote_token(), NDK_OP_FLAG_DEFER),
            STATUS_SUCCESS);
  EXPECT_EQ(x.qp->read(nullptr, &ws, 1, target, mb->get_remote_token(), NDK_OP_FLAG_INLINE),
            STATUS_INVALID_PARAMETER);
  auto deferred = wait_results(ca, 1);
  ASSERT_EQ(deferred.size(), 1u);
  EXPECT_EQ(deferred[0].request_context, reinterpret_cast<void*>(uintptr_t{7}));
  EXPECT_EQ(deferred[0].status, STATUS_SUCCESS);
  EXPECT_EQ(in[2048 + 63], 0x5A);
  ASSERT_EQ(x.qp->write(nullptr, &ws, 1, target, mb->get_remote_token(), NDK_OP_FLAG_DEFER),
            STATUS_SUCCESS);
  EXPECT_EQ(x.qp->invalidate(nullptr, static_cast<Mr*>(nullptr), 0), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(wait_results(ca, 1).size(), 1u);
  // SRQ close pends on its QP, and on a ModifySrq still on the core: the modify completes first
  // (cancelled: its object closed meanwhile), then the close, once the QP is gone too.
  Requested late;
  ASSERT_EQ(srq->modify(16, 0, &Requested::cb, &late), STATUS_PENDING);
  Closed sc;
  EXPECT_EQ(srq->close(&Closed::cb, &sc), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return late.done; }));
  EXPECT_EQ(late.status, STATUS_CANCELLED);
  EXPECT_EQ(sc.count, 0);
  close_qp(y.qp);
  EXPECT_EQ(sc.count, 1);
  // An SRQ without QPs closed while its ModifySrq is on the core: the close waits for it (it
  // completed inline before, and the core then modified freed memory).
  Srq* lone = nullptr;
  Notes lone_notes;
  ASSERT_EQ(pb->create_srq(8, 1, 0, &Notes::cb, &lone_notes, 1, nullptr, nullptr, &lone),
            STATUS_SUCCESS);
  Requested lone_mod;
  ASSERT_EQ(lone->modify(4, 0, &Requested::cb, &lone_mod), STATUS_PENDING);
  Closed lone_closed;
  EXPECT_EQ(lone->close(&Closed::cb, &lone_closed), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return lone_closed.count == 1; }));
  EXPECT_TRUE(lone_mod.done);
  EXPECT_EQ(lone_mod.status, STATUS_CANCELLED);
  close_qp(x.qp);
  close_cq(ca);
  close_cq(cb);
  close_mr(ma);
  close_mr(mb);
  EXPECT_EQ(pa->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(pb->close(nullptr, nullptr), STATUS_SUCCESS);
}

// NDK lifetime rule: a consumer may close an object from inside its completion callback.
TEST_F(NdkObjects, CloseFromInsideTheCreateCompletion) {
  struct Ctx {
    Closed closed;
    NTSTATUS close_status = STATUS_SUCCESS;
    static void created(void* c, NTSTATUS, NdkObjectHeader* o) {
      auto* self = static_cast<Ctx*>(c);
      self->close_status = ndk_object_cast<Cq>(o)->close(&Closed::cb, &self->closed);
    }
  } ctx;
  Cq* out = nullptr;
  ASSERT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, 1, &Ctx::created, &ctx, &out),
            STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return ctx.closed.count == 1; }));
  EXPECT_EQ(ctx.close_status, STATUS_PENDING);
  poll(8);
  EXPECT_EQ(ctx.closed.count, 1);
}

// NDKPI object lifetime: the adapter's close does not complete before a pending CreateCq has;
// the CreateCq completes STATUS_CANCELLED (no object), exactly once, then the close completion.
TEST_F(NdkObjects, AdapterCloseCompletesAPendingCreateCqCancelledFirst) {
  struct Log {
    std::vector<std::string> events;
    int created = 0, closed = 0;
    NTSTATUS status = STATUS_PENDING;
    NdkObjectHeader* object = reinterpret_cast<NdkObjectHeader*>(1);
  } log;
  Cq* out = nullptr;
  ASSERT_EQ(a_.adapter->create_cq(
                16, nullptr, nullptr, 0,
                [](void* c, NTSTATUS s, NdkObjectHeader* o) {
                  auto* l = static_cast<Log*>(c);
                  ++l->created;
                  l->status = s;
                  l->object = o;
                  l->events.push_back("create");
                },
                &log, &out),
            STATUS_PENDING);
  ASSERT_EQ(a_.adapter->close(
                [](void* c) {
                  auto* l = static_cast<Log*>(c);
                  ++l->closed;
                  l->events.push_back("close");
                },
                &log),
            STATUS_PENDING);
  EXPECT_TRUE(log.events.empty()) << "nothing runs inside the calls";
  for (int i = 0; i < 20000 && log.closed == 0; ++i) poll(1);
  ASSERT_EQ(log.closed, 1) << "the adapter close never completed";
  a_.adapter = nullptr;  // freed after its close completion
  poll(10);
  EXPECT_EQ(log.created, 1);
  EXPECT_EQ(log.status, STATUS_CANCELLED);
  EXPECT_EQ(log.object, nullptr);
  EXPECT_EQ(log.events, (std::vector<std::string>{"create", "close"}));
}

}  // namespace
}  // namespace rocedp::test
