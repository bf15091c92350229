// Error paths of the RC engine, each with its documented completion status (queue_pair.hpp):
// remote access, RNR then success, RNR retry exhausted, retry exhausted, flush, invalid opcode
// sequence, receive too small, CQ overrun.

#include <algorithm>

#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/ib_timers.hpp"
#include "dataplane/wire/builder.hpp"
#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

struct Errors : ::testing::Test {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  void make(const ConnectOptions& o = {}, uint32_t cq_depth = 4096) {
    qa = &a.qp(256, 256, cq_depth);
    qb = &b.qp(256, 256, cq_depth);
    connect(a, *qa, b, *qb, o);
  }
  // A 64 B WRITE from the start of src to the start of dst.
  static SendWqe write64(void* context, Buffer& src, Buffer& dst) {
    SendWqe wr = send_wqe(SendOpcode::kWrite, context, {src.sge(0, 64)});
    wr.remote_address = dst.va();
    wr.remote_token = dst.tokens.remote;
    return wr;
  }
  // Posts `wr` on qa and polls qa once: it must fail locally (local protection, provider code 4)
  // without sending a frame.
  void expect_local_protection(const SendWqe& wr) {
    ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
    a.eng->poll_st(w.now);
    EXPECT_TRUE(a.tx.empty()) << "nothing may be sent";
    auto sc = qa->send_cqes();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_ACCESS_VIOLATION);
    EXPECT_EQ(sc[0].provider_error_code, 4u);
  }
  // Why `q`'s QP entered ERROR, as Qp::error_reason and /rocedp/qps name it.
  static std::string_view why(const Qp* q) {
    return qp_error_reason_name(static_cast<QpErrorReason>(q->sq->error_reason()));
  }
  // Posts `wr` on qa, runs the wire until nothing moves: qa's send completions.
  std::vector<NdkResultEx> post_and_settle(const SendWqe& wr) {
    EXPECT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
    w.settle();
    return qa->send_cqes();
  }
};

TEST_F(Errors, RemoteAccessErrorWritesNoByteAndFlushesTheRest) {
  make();
  Buffer& src = a.buffer(5000);
  Buffer& dst = b.buffer(5000, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
                         0x77);  // no remote write
  fill_pattern(src.ptr(), 5000, 1);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(1), {src.sge(0, 5000)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  SendWqe later = wr;
  later.request_context = tag(2);
  ASSERT_EQ(qa->sq->post(later), STATUS_SUCCESS);
  ASSERT_EQ(qa->rq->post(recv_wqe(tag(3), {})), STATUS_SUCCESS);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(sc[0].provider_error_code, 10u);
  EXPECT_EQ(sc[1].status, STATUS_CANCELLED);
  auto rc = qa->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, STATUS_CANCELLED);
  for (uint8_t byte : dst.data) ASSERT_EQ(byte, 0x77) << "no byte may be written";
  EXPECT_EQ(qa->qp->state(), QpState::kError);
  EXPECT_EQ(qb->qp->state(), QpState::kError) << "responder class C error (IBTA 9.9.3)";
  EXPECT_EQ(qa->sq->post(wr), STATUS_CONNECTION_INVALID);
  EXPECT_EQ(why(qa), "remote_access") << "the requester: the peer refused its WRITE";
  EXPECT_EQ(why(qb), "refused_access") << "the responder: it refused the peer's WRITE";
}

// A fatal NAK comes after the responses owed to the requests before it (responses in PSN order):
// a READ of four packets and then, in the same receive burst, a WRITE its region refuses. The
// READ completes with its bytes; the WRITE fails with the remote access error.
TEST_F(Errors, AFatalNakWaitsForTheResponsesOwedBeforeIt) {
  make();
  Buffer& remote = b.buffer(4096, kMrAll, 0);
  fill_pattern(remote.ptr(), 4096, 4);
  Buffer& local = a.buffer(4096, kMrAll, 0);
  Buffer& ro = b.buffer(64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ, 0x77);
  ASSERT_EQ(qa->sq->post(read_wqe(tag(1), local, remote, 4096)), STATUS_SUCCESS);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(2), {local.sge(0, 64)});
  wr.remote_address = ro.va();
  wr.remote_token = ro.tokens.remote;  // no remote write
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 2u) << "both requests in one burst";
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  b.eng->poll_st(w.now);
  std::vector<uint8_t> opcodes;
  for (const Frame& f : b.tx) opcodes.push_back(parse_frame(f).f.bth.opcode);
  using namespace wire::opcode;
  EXPECT_EQ(opcodes, (std::vector<uint8_t>{kRcReadRespFirst, kRcReadRespMiddle, kRcReadRespMiddle,
                                           kRcReadRespLast, kRcAck}));
  EXPECT_EQ(parse_frame(b.tx.back()).f.aeth.syndrome, wire::kAethNakRemoteAccess);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(local.ptr(), remote.ptr(), 4096), 0);
  EXPECT_EQ(sc[1].status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(sc[1].provider_error_code, 10u);
  EXPECT_EQ(qb->qp->state(), QpState::kError);
  for (uint8_t byte : ro.data) ASSERT_EQ(byte, 0x77);
}

TEST_F(Errors, RemoteAccessOnReadBeyondTheRegion) {
  make();
  Buffer& remote = b.buffer(100);
  Buffer& sink = a.buffer(200, kMrAll, 0x55);
  ASSERT_EQ(qa->sq->post(read_wqe(tag(1), sink, remote, 200)), STATUS_SUCCESS);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_ACCESS_VIOLATION);
  for (uint8_t byte : sink.data) ASSERT_EQ(byte, 0x55);
}

TEST_F(Errors, LocalProtectionErrorOnABadSge) {
  make();
  Buffer& src = a.buffer(64);
  expect_local_protection(send_wqe(SendOpcode::kSend, tag(1),
                                   {NdkSge{src.ptr(), 128, src.tokens.local}}));  // past the MR
}

// The requester remembers the source region it last checked: a region deregistered after a WRITE
// from it went out must still fail the next WRITE from it (local protection), and a READ into a
// region without local write must fail although a WRITE from it passed.
TEST_F(Errors, LocalProtectionErrorAfterTheRegionIsDeregistered) {
  make();
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(64);
  auto sc = post_and_settle(write64(tag(1), src, dst));
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  ASSERT_EQ(a.mrs->deregister(src.tokens.local), STATUS_SUCCESS);
  expect_local_protection(write64(tag(2), src, dst));
}

// The responder remembers the region a peer's request last passed: deregistered after one WRITE
// into it, the next WRITE must be NAKed (remote access error) and write nothing.
TEST_F(Errors, RemoteAccessErrorAfterTheTargetIsDeregistered) {
  make();
  Buffer& src = a.buffer(64);
  fill_pattern(src.ptr(), 64, 3);
  Buffer& dst = b.buffer(64, kMrAll, 0x11);
  auto sc = post_and_settle(write64(tag(1), src, dst));
  ASSERT_EQ(sc.size(), 1u);
  ASSERT_EQ(sc[0].status, STATUS_SUCCESS);
  ASSERT_EQ(dst.data[5], src.data[5]);
  std::fill(dst.data.begin(), dst.data.end(), 0x11);
  ASSERT_EQ(b.mrs->deregister(dst.tokens.local), STATUS_SUCCESS);
  sc = post_and_settle(write64(tag(2), src, dst));
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_ACCESS_VIOLATION);
  for (uint8_t byte : dst.data) ASSERT_EQ(byte, 0x11) << "no byte may be written";
}

TEST_F(Errors, ReadIntoARegionWithoutLocalWriteFailsAfterAWriteFromIt) {
  make();
  Buffer& src = a.buffer(64, 0);  // local read only
  Buffer& dst = b.buffer(64);
  ASSERT_EQ(post_and_settle(write64(tag(1), src, dst)).size(), 1u);
  SendWqe rd = write64(tag(2), src, dst);
  rd.opcode = SendOpcode::kRead;
  expect_local_protection(rd);
}

TEST_F(Errors, RnrThenSuccessWhenAReceiveIsPosted) {
  ConnectOptions o;
  o.min_rnr_timer = 14;  // 1.28 ms
  make(o);
  Buffer& src = a.buffer(3000);
  Buffer& dst = b.buffer(3000);
  fill_pattern(src.ptr(), 3000, 4);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 3000)})), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  b.eng->poll_st(w.now);
  ASSERT_EQ(b.tx.size(), 1u);
  const wire::ParsedPacket nak = parse_frame(b.tx[0]);
  EXPECT_EQ(nak.f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(nak.f.aeth.syndrome, 0x20 | 14) << "RNR NAK with the QP's min RNR timer";
  EXPECT_EQ(nak.f.bth.psn, 100u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRnrNaksSent), 1u);
  Wire::deliver(a, b.tx, w.now);
  b.tx.clear();
  // Before the timer runs out nothing is resent.
  w.now += 1'000'000;
  a.eng->poll_st(w.now);
  EXPECT_TRUE(a.tx.empty());
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(2), {dst.sge(0, 3000)})), STATUS_SUCCESS);
  w.now += 300'000;
  w.settle();
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(rc[0].bytes_transferred, 3000u);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 3000), 0);
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
}

TEST_F(Errors, RnrRetryExhausted) {
  ConnectOptions o;
  o.rnr_retry = 2;
  make(o);
  Buffer& src = a.buffer(10);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 10)})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(2), {src.sge(0, 10)})), STATUS_SUCCESS);
  std::vector<NdkResultEx> sc;
  ASSERT_TRUE(w.run_until([&] {
    auto s = qa->send_cqes();
    sc.insert(sc.end(), s.begin(), s.end());
    return sc.size() == 2;
  }));
  EXPECT_EQ(sc[0].status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(sc[0].provider_error_code, 13u);
  EXPECT_EQ(sc[1].status, STATUS_CANCELLED);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRnrNaksReceived), 3u) << "first try + 2 retries";
  EXPECT_EQ(why(qa), "rnr_retry_exceeded");
  EXPECT_EQ(why(qb), "") << "the responder is fine";
}

TEST_F(Errors, RetryExhaustedWhenTheWireDropsEverything) {
  ConnectOptions o;
  o.retry = 3;
  make(o);
  Buffer& src = a.buffer(10);
  Buffer& dst = b.buffer(10);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(1), {src.sge(0, 10)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  wr.request_context = tag(2);
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  w.drop_all = true;
  const uint64_t t0 = w.now;
  std::vector<NdkResultEx> sc;
  ASSERT_TRUE(w.run_until([&] {
    auto s = qa->send_cqes();
    sc.insert(sc.end(), s.begin(), s.end());
    return sc.size() == 2;
  }));
  EXPECT_EQ(sc[0].status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(sc[0].provider_error_code, 12u);
  EXPECT_EQ(sc[0].request_context, tag(1));
  EXPECT_EQ(sc[1].status, STATUS_CANCELLED);
  const uint64_t timeouts = a.eng->counters().get(RcCounter::kAckTimeouts);
  const uint64_t probes = a.eng->counters().get(RcCounter::kRtoProbes);
  EXPECT_EQ(timeouts - probes, 4u) << "3 retries of the full local ACK timeout, then the 4th fails";
  EXPECT_GE(probes, 1u) << "the adaptive timer probed first";
  EXPECT_EQ(a.eng->counters().get(RcCounter::kTxPackets), 2 + (timeouts - 1))
      << "2 packets, then one probe (the oldest) per expiry but the last";
  // The adaptive timer never shortens the time a dead peer gets: retry_count + 1 full timeouts.
  EXPECT_GE(w.now - t0, 4 * *local_ack_timeout_ns(o.timeout));
  EXPECT_EQ(qa->qp->stats.timeouts, timeouts);
  EXPECT_EQ(why(qa), "retry_exceeded");
}

TEST_F(Errors, AckTimeoutBacksOffToTheConfiguredTime) {
  ConnectOptions o;
  o.timeout = 10;  // 4.096 µs * 1024 = 4.194304 ms
  make(o);
  Buffer& src = a.buffer(10);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(1), {})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 0)})), STATUS_SUCCESS);
  uint64_t t = w.now;
  a.eng->poll_st(t);
  ASSERT_EQ(a.tx.size(), 1u);
  a.tx.clear();  // lost
  // No RTT sample yet: the first expiry after kRtoInitialNs, then doubling, capped at the local
  // ACK timeout, which then repeats.
  const uint64_t expected[] = {kRtoInitialNs, 2 * kRtoInitialNs, 4 * kRtoInitialNs, 4'194'304,
                               4'194'304};
  for (uint64_t gap : expected) {
    a.eng->poll_st(t + gap - 1);
    EXPECT_TRUE(a.tx.empty()) << gap;
    a.eng->poll_st(t + gap);
    ASSERT_EQ(a.tx.size(), 1u) << "resent after " << gap << " ns";
    const wire::ParsedPacket p = parse_frame(a.tx[0]);
    EXPECT_EQ(p.f.bth.psn, 100u);
    EXPECT_TRUE(p.f.bth.ack_req) << "the probe asks for an ACK";
    a.tx.clear();
    t += gap;
  }
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRtoProbes), 3u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), 5u);
  EXPECT_EQ(qa->qp->comp.retry_left, o.retry - 2) << "only the two full timeouts consumed retries";
}

TEST_F(Errors, FlushCancelsEverythingPending) {
  make();
  Buffer& src = a.buffer(10);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(qa->rq->post(recv_wqe(tag(10 + i), {})), STATUS_SUCCESS);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(i), {src.sge(0, 10)})), STATUS_SUCCESS);
  EXPECT_EQ(why(qa), "") << "before the flush";
  ASSERT_EQ(a.eng->flush_qp(qa->qp->qpn()), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  EXPECT_TRUE(a.tx.empty());
  EXPECT_EQ(why(qa), "flushed");
  auto sc = qa->send_cqes();
  auto rc = qa->recv_cqes();
  ASSERT_EQ(sc.size(), 3u);
  ASSERT_EQ(rc.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sc[i].status, STATUS_CANCELLED);
    EXPECT_EQ(sc[i].request_context, tag(i)) << "posting order";
    EXPECT_EQ(rc[i].status, STATUS_CANCELLED);
    EXPECT_EQ(rc[i].request_context, tag(10 + i));
  }
  // Receives posted after the flush are cancelled too (the QP stays in ERROR).
  ASSERT_EQ(qa->rq->post(recv_wqe(tag(20), {})), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  rc = qa->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, STATUS_CANCELLED);
}

// A responder flushed while it owes an ACK sends it first: the peer's WRITE, whose bytes B's
// consumer may already have seen (write_pingpong's last echo, then its disconnect), completes
// successfully at A instead of waiting for a timeout (here: the ACK a ping-pong visit holds for
// the consumer's answer; the next test: the delayed ACK of packets without AckReq).
TEST_F(Errors, FlushSendsTheAckTheResponderOwesFirst) {
  make();
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(64);
  fill_pattern(src.ptr(), 64, 7);
  ASSERT_EQ(qa->sq->post(write64(tag(1), src, dst)), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 1u);
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  b.eng->poll_st(w.now);
  ASSERT_TRUE(b.tx.empty()) << "a receive burst of one frame: its ACK waits one poll";
  EXPECT_EQ(std::memcmp(dst.ptr(), src.ptr(), 64), 0) << "the bytes are there already";
  ASSERT_EQ(b.eng->flush_qp(qb->qp->qpn()), STATUS_SUCCESS);
  ASSERT_EQ(b.tx.size(), 1u) << "the held ACK leaves with the flush";
  const wire::ParsedPacket ack = parse_frame(b.tx[0]);
  EXPECT_EQ(ack.f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(ack.f.bth.psn, qa->qp->conn().sq_psn);
  Wire::deliver(a, b.tx, w.now);
  b.tx.clear();
  a.eng->poll_st(w.now);
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(sc[0].request_context, tag(1));
  b.eng->poll_st(w.now);
  EXPECT_TRUE(b.tx.empty()) << "nothing more from the flushed QP";
  EXPECT_EQ(b.eng->counters().get(RcCounter::kAcksSent), 1u);
}

// The same for packets no AckReq asked about (the FIRST and MIDDLE of a 3-packet WRITE whose LAST
// is lost): the flush acknowledges them at once instead of never.
TEST_F(Errors, FlushSendsTheDelayedAckOfPacketsWithoutAckReq) {
  make();
  Buffer& src = a.buffer(3000);
  Buffer& dst = b.buffer(3000);
  ASSERT_EQ(qa->sq->post(write_wqe(tag(1), src, dst, 0, 3000)), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 3u);
  ASSERT_FALSE(parse_frame(a.tx[0]).f.bth.ack_req);
  ASSERT_FALSE(parse_frame(a.tx[1]).f.bth.ack_req);
  a.tx.pop_back();  // the LAST is lost
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  b.eng->poll_st(w.now);
  ASSERT_TRUE(b.tx.empty()) << "no AckReq: the ACK is delayed";
  ASSERT_EQ(b.eng->flush_qp(qb->qp->qpn()), STATUS_SUCCESS);
  ASSERT_EQ(b.tx.size(), 1u);
  const wire::ParsedPacket ack = parse_frame(b.tx[0]);
  EXPECT_EQ(ack.f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(ack.f.bth.psn, qa->qp->conn().sq_psn + 1) << "both packets B executed";
}

TEST_F(Errors, ReceiveTooSmall) {
  make();
  Buffer& src = a.buffer(2000);
  Buffer& dst = b.buffer(1000);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(1), {dst.sge(0, 1000)})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(2), {src.sge(0, 2000)})), STATUS_SUCCESS);
  w.settle();
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, STATUS_BUFFER_OVERFLOW);
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_REMOTE_ERROR);
  EXPECT_EQ(sc[0].provider_error_code, 9u);
}

// A one-packet SEND into a receive that cannot take it: too small (STATUS_BUFFER_OVERFLOW, NAK
// invalid request), or its region deregistered after it was posted (local protection, NAK remote
// operational). Nothing is written either way and the SEND fails with the NAK's status.
TEST_F(Errors, SendOnlyIntoAReceiveThatCannotTakeIt) {
  for (const bool too_small : {true, false}) {
    SCOPED_TRACE(too_small ? "too small" : "deregistered");
    Host ha{0, 0xC6120001, 1};
    Host hb{0, 0xC6120002, 2};
    Wire wire{ha, hb};
    Qp& pa = ha.qp();
    Qp& pb = hb.qp();
    connect(ha, pa, hb, pb);
    Buffer& src = ha.buffer(100);
    Buffer& dst = hb.buffer(128, kMrAll, 0x3C);
    ASSERT_EQ(pb.rq->post(recv_wqe(tag(1), {dst.sge(0, too_small ? 64 : 128)})), STATUS_SUCCESS);
    if (!too_small) {
      ASSERT_EQ(hb.mrs->deregister(dst.tokens.local), STATUS_SUCCESS);
    }
    ASSERT_EQ(pa.sq->post(send_wqe(SendOpcode::kSend, tag(2), {src.sge(0, 100)})), STATUS_SUCCESS);
    wire.settle();
    const auto rc = pb.recv_cqes();
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, too_small ? STATUS_BUFFER_OVERFLOW : STATUS_ACCESS_VIOLATION);
    EXPECT_EQ(rc[0].request_context, tag(1));
    EXPECT_EQ(rc[0].bytes_transferred, 0u);
    EXPECT_EQ(std::count(dst.data.begin(), dst.data.end(), 0x3C), 128) << "nothing written";
    const auto sc = pa.send_cqes();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_REMOTE_ERROR);
    EXPECT_EQ(sc[0].provider_error_code, too_small ? 9u : 11u);
    EXPECT_EQ(pb.qp->state(), QpState::kError);
  }
}

TEST_F(Errors, InvalidOpcodeSequenceIsNakedInvalidRequest) {
  make();
  // A forged SEND_MIDDLE with no SEND_FIRST before it.
  wire::PacketFields f = qa->qp->tmpl();
  f.bth.opcode = wire::opcode::kRcSendMiddle;
  f.bth.psn = 100;
  std::vector<uint8_t> payload(1024, 1);
  Frame frame(2000);
  frame.resize(wire::build_frame(frame, f, payload));
  ASSERT_FALSE(frame.empty());
  std::vector<Frame> in = {frame};
  Wire::deliver(b, in, w.now);
  b.eng->poll_st(w.now);
  ASSERT_EQ(b.tx.size(), 1u);
  const wire::ParsedPacket nak = parse_frame(b.tx[0]);
  EXPECT_EQ(nak.f.aeth.syndrome, wire::kAethNakInvalidRequest);
  EXPECT_EQ(nak.f.bth.psn, 100u);
  EXPECT_EQ(qb->qp->state(), QpState::kError);
  EXPECT_EQ(why(qb), "refused_invalid_request");
}

// IBTA §9.7.1 (rxe's check_length): an ONLY or LAST packet carries at most one path MTU. A longer
// one is NAKed Invalid Request and writes nothing, although its region could hold it: here a WRITE
// ONLY (the responder's inline path), a SEND ONLY (its in-place path) and a WRITE LAST of 2,048
// bytes at path MTU 1,024.
TEST_F(Errors, PacketsLongerThanThePathMtuAreNakedInvalidRequest) {
  struct Case {
    const char* name;
    uint8_t opcode;
    uint32_t len;
  };
  for (const Case& c : {Case{"write only", wire::opcode::kRcWriteOnly, 2048},
                        Case{"send only", wire::opcode::kRcSendOnly, 2048},
                        Case{"write last", wire::opcode::kRcWriteLast, 2048}}) {
    SCOPED_TRACE(c.name);
    Host ha{0, 0xC6120001, 1};
    Host hb{0, 0xC6120002, 2};
    Qp& qa2 = ha.qp();
    Qp& qb2 = hb.qp();
    connect(ha, qa2, hb, qb2);
    Buffer& dst = hb.buffer(8192, kMrAll, 0);
    Buffer& rbuf = hb.buffer(8192, kMrAll, 0);
    ASSERT_EQ(qb2.rq->post(recv_wqe(tag(9), {rbuf.sge(0, 8192)})), STATUS_SUCCESS);
    std::vector<Frame> in;
    uint32_t psn = 100;
    const std::vector<uint8_t> payload(1024, 0x5A);
    wire::PacketFields f = qa2.qp->tmpl();
    if (c.opcode == wire::opcode::kRcWriteLast) {
      // A WRITE FIRST of one MTU with the RETH for the whole message, then its LAST.
      f.bth.opcode = wire::opcode::kRcWriteFirst;
      f.bth.psn = psn++;
      f.reth = {dst.va(), dst.tokens.remote, 1024 + c.len};
      Frame first(2000);
      first.resize(wire::build_frame(first, f, payload));
      ASSERT_FALSE(first.empty());
      in.push_back(first);
      f = qa2.qp->tmpl();
    }
    f.bth.opcode = c.opcode;
    f.bth.psn = psn;
    f.bth.ack_req = true;
    if (c.opcode == wire::opcode::kRcWriteOnly) f.reth = {dst.va(), dst.tokens.remote, c.len};
    const std::vector<uint8_t> big(c.len, 0xA5);
    Frame frame(4000);
    frame.resize(wire::build_frame(frame, f, big));
    ASSERT_FALSE(frame.empty());
    in.push_back(frame);
    Wire::deliver(hb, in, 1000);
    hb.eng->poll_st(1000);
    ASSERT_FALSE(hb.tx.empty());
    const wire::ParsedPacket nak = parse_frame(hb.tx.back());
    EXPECT_EQ(nak.f.aeth.syndrome, wire::kAethNakInvalidRequest);
    EXPECT_EQ(nak.f.bth.psn, psn);
    EXPECT_EQ(qb2.qp->state(), QpState::kError);
    EXPECT_TRUE(std::all_of(dst.ptr() + 1024, dst.ptr() + 8192, [](uint8_t v) { return v == 0; }))
        << "the long packet wrote nothing";
    EXPECT_TRUE(std::all_of(rbuf.ptr(), rbuf.ptr() + 8192, [](uint8_t v) { return v == 0; }));
  }
}

// A responder that grants no READ or atomic resources (inbound read limit 0) answers a READ and
// an atomic with NAK Invalid Request, reads or changes nothing, and the requester's work request
// fails with a remote invalid request error.
TEST_F(Errors, ReadAndAtomicToAResponderWithoutReadResourcesAreNakedInvalidRequest) {
  for (const SendOpcode op : {SendOpcode::kRead, SendOpcode::kFetchAdd}) {
    SCOPED_TRACE(op == SendOpcode::kRead ? "read" : "fetch and add");
    Host ha{0, 0xC6120001, 1};
    Host hb{0, 0xC6120002, 2};
    Wire w2{ha, hb};
    Qp& qa2 = ha.qp();
    Qp& qb2 = hb.qp();
    const ConnectOptions o;
    QpConnectParams pa = params_for(ha, qa2, hb, qb2, o.a_psn, o.b_psn, o);
    QpConnectParams pb = params_for(hb, qb2, ha, qa2, o.b_psn, o.a_psn, o);
    pb.inbound_read_limit = 0;  // B grants none; A was told otherwise
    ASSERT_EQ(qa2.qp->connect(pa), STATUS_SUCCESS);
    ASSERT_EQ(qb2.qp->connect(pb), STATUS_SUCCESS);
    Buffer& remote = hb.buffer(64, kMrAll, 7);
    Buffer& local = ha.buffer(64, kMrAll, 0);
    SendWqe wr = send_wqe(op, tag(1), {local.sge(0, op == SendOpcode::kRead ? 64 : 8)});
    wr.remote_address = remote.va();
    wr.remote_token = remote.tokens.remote;
    wr.swap_or_add = 1;
    ASSERT_EQ(qa2.sq->post(wr), STATUS_SUCCESS);
    w2.settle();
    auto sc = qa2.send_cqes();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_REMOTE_ERROR);
    EXPECT_EQ(sc[0].provider_error_code, 9u) << "remote invalid request";
    EXPECT_EQ(qb2.qp->state(), QpState::kError);
    EXPECT_TRUE(std::all_of(local.ptr(), local.ptr() + 64, [](uint8_t v) { return v == 0; }));
    EXPECT_TRUE(std::all_of(remote.ptr(), remote.ptr() + 64, [](uint8_t v) { return v == 7; }));
  }
}

// A duplicate READ request is answered again from the original's resource, for no more response
// packets than the original's PSNs from the duplicate's on hold: one that asks for more would send
// responses with the PSNs of the requests after it, and is dropped (as rxe drops it).
TEST_F(Errors, ADuplicateReadAskingPastTheOriginalsPsnsIsDropped) {
  make();
  Buffer& remote = b.buffer(4096, kMrAll, 0);
  fill_pattern(remote.ptr(), 4096, 3);
  Buffer& local = a.buffer(4096, kMrAll, 0);
  ASSERT_EQ(qa->sq->post(read_wqe(tag(1), local, remote, 2048)), STATUS_SUCCESS);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  ASSERT_EQ(sc[0].status, STATUS_SUCCESS);  // PSNs 100 and 101 answered
  auto duplicate = [&](uint32_t len) {
    wire::PacketFields f = qa->qp->tmpl();
    f.bth.opcode = wire::opcode::kRcReadRequest;
    f.bth.psn = 101;
    f.bth.ack_req = true;
    f.reth = {remote.va() + 1024, remote.tokens.remote, len};
    Frame frame(200);
    frame.resize(wire::build_frame(frame, f, {}));
    std::vector<Frame> in = {frame};
    b.tx.clear();
    Wire::deliver(b, in, w.now);
    b.eng->poll_st(w.now);
    std::vector<uint32_t> psns;
    for (const Frame& out : b.tx) psns.push_back(parse_frame(out).f.bth.psn);
    return psns;
  };
  EXPECT_EQ(duplicate(2048), std::vector<uint32_t>{}) << "PSN 102 is not this READ's";
  EXPECT_EQ(duplicate(1024), std::vector<uint32_t>{101}) << "the last response, again";
  EXPECT_EQ(qb->qp->state(), QpState::kRts);
}

TEST_F(Errors, OutOfSequenceGetsOneNakThenRecovers) {
  make();
  Buffer& src = a.buffer(4096);
  Buffer& dst = b.buffer(4096);
  fill_pattern(src.ptr(), 4096, 8);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(1), {src.sge(0, 4096)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 4u);
  a.tx.erase(a.tx.begin() + 1);  // lose PSN 101
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  b.eng->poll_st(w.now);
  ASSERT_EQ(b.tx.size(), 1u) << "102 and 103 are ahead: ONE sequence NAK";
  const wire::ParsedPacket nak = parse_frame(b.tx[0]);
  EXPECT_EQ(nak.f.aeth.syndrome, wire::kAethNakPsnSeqError);
  EXPECT_EQ(nak.f.bth.psn, 101u);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 4096), 0);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kGoBackN), 1u);
}

TEST_F(Errors, DuplicateAtomicIsReplayedNotReapplied) {
  make();
  Buffer& target = b.buffer(8);
  Buffer& result = a.buffer(8);
  SendWqe fa = send_wqe(SendOpcode::kFetchAdd, tag(1), {result.sge(0, 8)});
  fa.remote_address = target.va();
  fa.remote_token = target.tokens.remote;
  fa.swap_or_add = 5;
  ASSERT_EQ(qa->sq->post(fa), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 1u);
  std::vector<Frame> twice = {a.tx[0], a.tx[0], a.tx[0]};
  a.tx.clear();
  Wire::deliver(b, twice, w.now);
  b.eng->poll_st(w.now);
  uint64_t v;
  std::memcpy(&v, target.ptr(), 8);
  EXPECT_EQ(v, 5u) << "applied exactly once";
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].type_specific_completion_output, 0u);
}

TEST_F(Errors, CqOverrunKillsTheQp) {
  make({}, 2);
  Buffer& src = a.buffer(10);
  Buffer& dst = b.buffer(64);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(qb->rq->post(recv_wqe(tag(i), {dst.sge(0, 64)})), STATUS_SUCCESS);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(i), {src.sge(0, 10)})), STATUS_SUCCESS);
  w.settle();
  EXPECT_TRUE(qb->rcq->overrun());
  EXPECT_EQ(qb->qp->state(), QpState::kError);
  EXPECT_EQ(why(qb), "cq_full") << "its third receive completion found no room";
}

// The receive completions of one RX burst are published together, at its end: every one is
// visible to the consumer when rx_burst_st returns, in order, and an armed CQ notifies once per
// arm (here SOLICITED: the burst's one solicited SEND is among them).
TEST_F(Errors, ReceiveCompletionsOfABurstAreVisibleInOrderAndNotifyOncePerArm) {
  std::vector<NTSTATUS> calls;
  b.cq_notify = [](void* c, NTSTATUS s) { static_cast<std::vector<NTSTATUS>*>(c)->push_back(s); };
  b.cq_notify_context = &calls;
  make();
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(8 * 64);
  constexpr int kSends = 8;
  for (int i = 0; i < kSends; ++i)
    ASSERT_EQ(qb->rq->post(recv_wqe(tag(i), {dst.sge(i * 64, 64)})), STATUS_SUCCESS);
  for (int i = 0; i < kSends; ++i) {
    const uint32_t flags = i == 5 ? NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT : 0;
    ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(i), {src.sge(0, 16 + i)}, flags)),
              STATUS_SUCCESS);
  }
  qb->rcq->arm(NdkCqNotifyType::kSolicited);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), static_cast<size_t>(kSends));
  Wire::deliver(b, a.tx, w.now);  // one burst, no poll of B yet
  a.tx.clear();
  EXPECT_EQ(calls, std::vector<NTSTATUS>{STATUS_SUCCESS}) << "one callback for the one arm";
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), static_cast<size_t>(kSends)) << "published when the burst returns";
  for (int i = 0; i < kSends; ++i) {
    EXPECT_EQ(rc[i].status, STATUS_SUCCESS);
    EXPECT_EQ(rc[i].request_context, tag(i)) << "in order";
    EXPECT_EQ(rc[i].bytes_transferred, 16u + i);
  }
  // Armed again with nothing queued: the next burst notifies once more, and only once.
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(8), {dst.sge(0, 64)})), STATUS_SUCCESS);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(9), {dst.sge(64, 64)})), STATUS_SUCCESS);
  w.settle();
  qb->rcq->arm(NdkCqNotifyType::kAny);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(8 + i), {src.sge(0, 8)})),
              STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 2u);
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  EXPECT_EQ(calls, (std::vector<NTSTATUS>{STATUS_SUCCESS, STATUS_SUCCESS}));
  rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].request_context, tag(8));
  EXPECT_EQ(rc[1].request_context, tag(9));
}

// A receive CQ that fills up in the middle of a burst: the completions before the overrun are
// published (and notify the armed CQ) before the overrun is reported, once; the QP dies.
TEST_F(Errors, CqOverrunInTheMiddleOfABurstKeepsTheCompletionsBeforeIt) {
  std::vector<NTSTATUS> calls;
  b.cq_notify = [](void* c, NTSTATUS s) { static_cast<std::vector<NTSTATUS>*>(c)->push_back(s); };
  b.cq_notify_context = &calls;
  qa = &a.qp(256, 256, 4096);
  qb = &b.qp(256, 256, 2);
  connect(a, *qa, b, *qb);
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(4 * 64);
  fill_pattern(src.ptr(), 64, 9);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(qb->rq->post(recv_wqe(tag(i), {dst.sge(i * 64, 64)})), STATUS_SUCCESS);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(i), {src.sge(0, 64)})), STATUS_SUCCESS);
  qb->rcq->arm(NdkCqNotifyType::kAny);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 4u);
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  EXPECT_EQ(calls, (std::vector<NTSTATUS>{STATUS_SUCCESS, STATUS_BUFFER_OVERFLOW}))
      << "the entries before the overrun, then the overrun, once";
  EXPECT_TRUE(qb->rcq->overrun());
  EXPECT_EQ(qb->qp->state(), QpState::kError);
  const auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].request_context, tag(0));
  EXPECT_EQ(rc[1].request_context, tag(1));
  EXPECT_EQ(std::memcmp(dst.ptr() + 64, src.ptr(), 64), 0);
  EXPECT_EQ(qb->rcq->stats().overruns, 1u) << "the QP in ERROR takes nothing more";
}

}  // namespace
}  // namespace rocedp::rc::test
