// The NDK object layer over two adapters in one process (include/rocedp/adapter.hpp):
// adapter info, creation inline and pending, argument and limit errors, close semantics.

#include <gtest/gtest.h>

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
  EXPECT_EQ(mr->register_mr(mem.data(), mem.size(), kMrAll, nullptr, nullptr), STATUS_INVALID_PARAMETER)
      << "already registered";
  EXPECT_EQ(mr->deregister_mr(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(mr->get_local_token(), 0u);
  EXPECT_EQ(mr->deregister_mr(nullptr, nullptr), STATUS_INVALID_PARAMETER);

  // The PD is a parent: its close pends until the MR is closed, then fires once.
  Closed pc;
  EXPECT_EQ(pd->close(&Closed::cb, &pc), STATUS_PENDING);
  poll(4);
  EXPECT_EQ(pc.count, 0);
  EXPECT_EQ(mr->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(pc.count, 1);
  poll(4);
  EXPECT_EQ(pc.count, 1) << "nothing fires after close completion";
}

TEST_F(NdkObjects, CqCreationPendsUntilItsCoreAnswers) {
  Created c;
  Cq* out = nullptr;
  Notes notes;
  ASSERT_EQ(a_.adapter->create_cq(64, &Notes::cb, &notes, 1, &Created::cb, &c, &out), STATUS_PENDING);
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
  EXPECT_EQ(a_.adapter->create_cq(0, nullptr, nullptr, 0, &Created::cb, &c, &out), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(a_.adapter->create_cq(max + 1, nullptr, nullptr, 0, &Created::cb, &c, &out), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, kCores, &Created::cb, &c, &out), STATUS_INVALID_PARAMETER);
  Pd* pd = make_pd(a_);
  Cq* cq0 = make_cq(a_, 64, 0);
  Cq* cq1 = make_cq(a_, 64, 1);
  Qp* qp = nullptr;
  EXPECT_EQ(pd->create_qp(nullptr, cq0, nullptr, 16, 16, 1, 1, 0, &Created::cb, &c, &qp), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 0, 16, 1, 1, 0, &Created::cb, &c, &qp), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 16, 16, 5, 1, 0, &Created::cb, &c, &qp), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 16, 16, 1, 1, 65, &Created::cb, &c, &qp), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(pd->create_qp(cq0, cq0, nullptr, 16, limits().max_qp_depth + 1, 1, 1, 0, &Created::cb, &c, &qp),
            STATUS_INVALID_PARAMETER);
  // Send and receive CQ on different cores: rocedp keeps a QP's completions on one core.
  EXPECT_EQ(pd->create_qp(cq0, cq1, nullptr, 16, 16, 1, 1, 0, &Created::cb, &c, &qp), STATUS_INVALID_PARAMETER);
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
  EXPECT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, 0, &Created::cb, &c, &out), STATUS_INSUFFICIENT_RESOURCES);
  Qp* q1 = make_qp(p1, cq, cq, nullptr, 16);
  Qp* q2 = nullptr;
  EXPECT_EQ(p1->create_qp(cq, cq, nullptr, 16, 16, 1, 1, 0, &Created::cb, &c, &q2), STATUS_INSUFFICIENT_RESOURCES);
  // Closing the CQ pends on its QP; closing the QP lets it finish.
  Closed cc;
  EXPECT_EQ(cq->close(&Closed::cb, &cc), STATUS_PENDING);
  poll(8);
  EXPECT_EQ(cc.count, 0);
  close_qp(q1);
  EXPECT_TRUE(poll_until([&] { return cc.count == 1; }));
  EXPECT_EQ(m1->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(p1->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(p2->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(NdkObjects, CqRingAllocationFailureIsInsufficientResources) {
  CqRingAllocatorHook hook;
  hook.allocate = [](size_t, void*) -> void* { return nullptr; };
  hook.release = [](void*, size_t, void*) {};
  a_.adapter->set_cq_ring_allocator(hook);
  Created c;
  Cq* out = nullptr;
  EXPECT_EQ(a_.adapter->create_cq(16, nullptr, nullptr, 0, &Created::cb, &c, &out), STATUS_INSUFFICIENT_RESOURCES);
  a_.adapter->set_cq_ring_allocator({});
}

}  // namespace
}  // namespace rocedp::test
