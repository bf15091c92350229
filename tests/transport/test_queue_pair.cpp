// QueuePair: state machine, parameter checks, completion-status table, frame template.

#include <algorithm>

#include "dataplane/qpn_map.hpp"
#include "dataplane/wire/udp_sport.hpp"
#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

TEST(QueuePair, StateNamesAndStatusTable) {
  EXPECT_EQ(qp_state_name(QpState::kReset), "RESET");
  EXPECT_EQ(qp_state_name(QpState::kRts), "RTS");
  EXPECT_EQ(qp_state_name(QpState::kError), "ERROR");
  EXPECT_EQ(wc_error_info(WcError::kRemoteAccess).status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(wc_error_info(WcError::kRetryExceeded).status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(wc_error_info(WcError::kRnrRetryExceeded).status, STATUS_IO_TIMEOUT);
  EXPECT_NE(wc_error_info(WcError::kRetryExceeded).provider_code,
            wc_error_info(WcError::kRnrRetryExceeded).provider_code);
  EXPECT_EQ(static_cast<uint32_t>(wc_error_info(WcError::kRemoteOperational).status), 0xC000013Du);
  EXPECT_EQ(wc_error_info(WcError::kFlushed).status, STATUS_CANCELLED);
  EXPECT_EQ(wc_error_info(WcError::kRecvTooSmall).status, STATUS_BUFFER_OVERFLOW);
  EXPECT_EQ(wc_error_info(WcError::kLocalLength).status, STATUS_DATA_OVERRUN);
  EXPECT_EQ(kRcCounterNames[static_cast<size_t>(RcCounter::kGoBackN)], "go_back_n");
}

TEST(QueuePair, CreateRejectsMissingQueues) {
  NTSTATUS st;
  QpCreateParams p;
  EXPECT_EQ(QueuePair::create(2, p, &st), nullptr);
  EXPECT_EQ(st, STATUS_INVALID_PARAMETER);
}

TEST(QueuePair, TransitionsAndParameterChecks) {
  Host a{0, 0x0A000001, 1};
  Host b{0, 0x0A000002, 2};
  Qp& qa = a.qp();
  Qp& qb = b.qp();
  EXPECT_EQ(qa.qp->state(), QpState::kInit);
  EXPECT_EQ(qa.qp->modify_to_rts(), STATUS_INVALID_DEVICE_STATE) << "RTS needs RTR first";
  Buffer& src = a.buffer(8);
  EXPECT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 8)})),
            STATUS_CONNECTION_INVALID);
  EXPECT_EQ(qa.rq->post(recv_wqe(tag(1), {})), STATUS_SUCCESS)
      << "receives may be posted before connecting";

  ConnectOptions o;
  QpConnectParams p = params_for(a, qa, b, qb, 1, 2, o);
  for (uint32_t bad_mtu : {0u, 128u, 1000u, 8192u}) {
    QpConnectParams q = p;
    q.path_mtu = bad_mtu;
    EXPECT_EQ(qa.qp->modify_to_rtr(q), STATUS_INVALID_PARAMETER) << bad_mtu;
  }
  QpConnectParams q = p;
  q.retry_count = 8;
  EXPECT_EQ(qa.qp->modify_to_rtr(q), STATUS_INVALID_PARAMETER);
  q = p;
  q.inbound_read_limit = 1000;  // more than the resources allocated at creation
  EXPECT_EQ(qa.qp->modify_to_rtr(q), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(qa.qp->state(), QpState::kInit);

  ASSERT_EQ(qa.qp->modify_to_rtr(p), STATUS_SUCCESS);
  EXPECT_EQ(qa.qp->state(), QpState::kRtr);
  EXPECT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 8)})),
            STATUS_CONNECTION_INVALID);
  EXPECT_EQ(qa.qp->modify_to_rtr(p), STATUS_INVALID_DEVICE_STATE);
  ASSERT_EQ(qa.qp->modify_to_rts(), STATUS_SUCCESS);
  EXPECT_EQ(qa.qp->state(), QpState::kRts);
  EXPECT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 8)})), STATUS_SUCCESS);

  // The frame template: Linux's UDP source port for the two QPNs, DF, TTL 64, P_Key 0xFFFF.
  const wire::PacketFields& t = qa.qp->tmpl();
  EXPECT_EQ(t.udp.src_port, wire::udp_sport(0, qa.qp->qpn(), qb.qp->qpn()));
  EXPECT_EQ(t.udp.src_port, wire::udp_sport(0, qb.qp->qpn(), qa.qp->qpn())) << "symmetric";
  EXPECT_EQ(t.ip.flags_frag, wire::kIpv4FlagDf);
  EXPECT_EQ(t.ip.ttl, 64);
  EXPECT_EQ(t.bth.pkey, 0xFFFF);
  EXPECT_EQ(t.bth.dqpn, qb.qp->qpn());
}

TEST(QueuePair, QpnsEncodeTheOwningCore) {
  Host h{5, 0x0A000001, 1};
  Qp& q1 = h.qp();
  Qp& q2 = h.qp();
  EXPECT_EQ(q1.qp->qpn(), dataplane::make_qpn(5, 2));
  EXPECT_EQ(q2.qp->qpn(), dataplane::make_qpn(5, 3));
  EXPECT_EQ(h.eng->find_qp(q2.qp->qpn()), q2.qp);
  EXPECT_EQ(h.eng->find_qp(dataplane::make_qpn(4, 3)), nullptr) << "another core's QPN";
  EXPECT_EQ(h.eng->destroy_qp(q1.qp->qpn()), STATUS_SUCCESS);
  EXPECT_EQ(h.eng->find_qp(dataplane::make_qpn(5, 2)), nullptr);
  EXPECT_EQ(h.eng->destroy_qp(dataplane::make_qpn(5, 2)), STATUS_INVALID_PARAMETER);
}

// A QPN freed is taken again only after every other free one (the QPN's TimeWait, IBTA
// §12.9.8.4): a peer's late packets for the closed QP, or a peer that still holds its connection,
// do not meet a new QP under that number. The host's engine has 64 numbers (2 to 65).
TEST(QueuePair, AFreedQpnIsReusedOnlyAfterEveryOtherFreeOne) {
  Host h{0, 0x0A000001, 1};
  Qp& first = h.qp();
  const uint32_t freed = first.qp->qpn();
  ASSERT_EQ(freed, dataplane::make_qpn(0, 2));
  ASSERT_EQ(h.eng->destroy_qp(freed), STATUS_SUCCESS);
  std::vector<uint32_t> qpns(63);
  for (uint32_t& q : qpns) q = h.qp().qp->qpn();
  EXPECT_EQ(std::count(qpns.begin(), qpns.end(), freed), 0) << "63 others first";
  EXPECT_EQ(qpns.back(), dataplane::make_qpn(0, 65));
  EXPECT_EQ(h.qp().qp->qpn(), freed) << "then the freed one";
  // All 64 in use: the next create fails; a number freed now is the next one taken.
  NTSTATUS st = STATUS_SUCCESS;
  SendQueue* sq = first.sq.get();
  QpCreateParams p;
  p.sq = sq;
  p.rq = first.rq.get();
  p.send_cq = first.scq.get();
  p.recv_cq = first.rcq.get();
  EXPECT_EQ(h.eng->create_qp(p, &st), nullptr);
  EXPECT_EQ(st, STATUS_INSUFFICIENT_RESOURCES);
  ASSERT_EQ(h.eng->destroy_qp(qpns[10]), STATUS_SUCCESS);
  EXPECT_EQ(h.qp().qp->qpn(), qpns[10]);
}

}  // namespace
}  // namespace rocedp::rc::test
