// End-to-end operations between two engines over the in-memory wire: SEND/RECV, WRITE (+imm),
// READ, atomics at every interesting size, byte-exact; nothing happens before a host is polled.

#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

constexpr uint32_t kMtu = 1024;
const std::vector<uint32_t> kSizes = {0, 1, 63, kMtu - 1, kMtu, kMtu + 1, 1u << 20};

struct Pair : ::testing::Test {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  void SetUp() override {
    qa = &a.qp();
    qb = &b.qp();
    connect(a, *qa, b, *qb);
  }
  // Runs the wire until A's send CQ gave completions; returns them (none on a timeout).
  std::vector<NdkResultEx> send_completions() {
    std::vector<NdkResultEx> sc;
    const bool done = w.run_until([&] {
      auto s = qa->send_cqes();
      sc.insert(sc.end(), s.begin(), s.end());
      return !sc.empty();
    });
    EXPECT_TRUE(done) << "no send completion";
    return sc;
  }
};

TEST_F(Pair, SendRecvEverySizeByteExact) {
  for (uint32_t size : kSizes) {
    SCOPED_TRACE(size);
    Buffer& src = a.buffer(size);
    Buffer& dst = b.buffer(size + 16, kMrAll, 0xAB);
    fill_pattern(src.ptr(), size, size);
    ASSERT_EQ(qb->rq->post(recv_wqe(tag(size + 1), {dst.sge(0, size + 16)})), STATUS_SUCCESS);
    ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(size + 2), {src.sge(0, size)})),
              STATUS_SUCCESS);
    // Posting alone does nothing: the owning core has not polled yet.
    EXPECT_TRUE(a.tx.empty());
    ASSERT_TRUE(a.eng->poll_st(w.now));
    ASSERT_FALSE(a.tx.empty());
    EXPECT_TRUE(qb->recv_cqes().empty());  // B has not received anything yet
    std::vector<NdkResultEx> sc, rc;
    ASSERT_TRUE(w.run_until([&] {
      auto s = qa->send_cqes();
      auto r = qb->recv_cqes();
      sc.insert(sc.end(), s.begin(), s.end());
      rc.insert(rc.end(), r.begin(), r.end());
      return !sc.empty() && !rc.empty();
    }));
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(rc[0].bytes_transferred, size);
    EXPECT_EQ(rc[0].type, NdkOperationType::kReceive);
    EXPECT_EQ(rc[0].request_context, tag(size + 1));
    EXPECT_EQ(rc[0].qp_context, qb);
    EXPECT_EQ(rc[0].type_specific_completion_output, 0u);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(sc[0].type, NdkOperationType::kSend);
    EXPECT_EQ(sc[0].request_context, tag(size + 2));
    EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), size), 0);
    for (uint32_t i = size; i < size + 16; ++i)
      ASSERT_EQ(dst.data[i], 0xAB) << "byte past the message written";
  }
  EXPECT_EQ(a.eng->counters().get(RcCounter::kTxRetransmit), 0u);
}

TEST_F(Pair, SendWithImmediateAndSolicitedEvent) {
  Buffer& src = a.buffer(100);
  Buffer& dst = b.buffer(100);
  fill_pattern(src.ptr(), 100, 7);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(1), {dst.sge(0, 100)})), STATUS_SUCCESS);
  SendWqe s =
      send_wqe(SendOpcode::kSend, tag(2), {src.sge(0, 100)}, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
  s.has_immediate = true;
  s.immediate = 0xDEADBEEF;
  ASSERT_EQ(qa->sq->post(s), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 1u);
  const Frame f = a.tx[0];
  const wire::ParsedPacket p = parse_frame(f);
  EXPECT_EQ(p.f.bth.opcode, wire::opcode::kRcSendOnlyImm);
  EXPECT_TRUE(p.f.bth.se);
  EXPECT_TRUE(p.f.bth.ack_req);
  EXPECT_EQ(p.f.imm, 0xDEADBEEFu);
  w.settle();
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].type_specific_completion_output, kCqeImmediateValid | 0xDEADBEEFu);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 100), 0);
}

TEST_F(Pair, MultiSgeGatherAndScatter) {
  Buffer& src = a.buffer(3000);
  Buffer& dst = b.buffer(3000);
  fill_pattern(src.ptr(), 3000, 3);
  ASSERT_EQ(
      qb->rq->post(recv_wqe(tag(1), {dst.sge(0, 10), dst.sge(100, 1500), dst.sge(2000, 1000)})),
      STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(2),
                                  {src.sge(0, 700), src.sge(700, 1), src.sge(701, 1800)})),
            STATUS_SUCCESS);
  w.settle();
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].bytes_transferred, 2501u);
  EXPECT_EQ(std::memcmp(dst.ptr(), src.ptr(), 10), 0);
  EXPECT_EQ(std::memcmp(dst.ptr() + 100, src.ptr() + 10, 1500), 0);
  EXPECT_EQ(std::memcmp(dst.ptr() + 2000, src.ptr() + 1510, 991), 0);
}

TEST_F(Pair, WriteEverySizeByteExact) {
  for (uint32_t size : kSizes) {
    SCOPED_TRACE(size);
    Buffer& src = a.buffer(size);
    Buffer& dst = b.buffer(size + 8, kMrAll, 0xCD);
    fill_pattern(src.ptr(), size, size + 100);
    SendWqe wr = send_wqe(SendOpcode::kWrite, tag(size), {src.sge(0, size)});
    wr.remote_address = dst.va();
    wr.remote_token = dst.tokens.remote;
    ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
    const std::vector<NdkResultEx> sc = send_completions();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(sc[0].type, NdkOperationType::kWrite);
    EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), size), 0);
    for (uint32_t i = size; i < size + 8; ++i) ASSERT_EQ(dst.data[i], 0xCD);
    EXPECT_TRUE(qb->recv_cqes().empty()) << "a WRITE without immediate consumes no receive";
  }
}

TEST_F(Pair, WriteWithImmediateConsumesAReceive) {
  for (uint32_t size : {0u, 1u, kMtu + 1, 5 * kMtu}) {
    SCOPED_TRACE(size);
    Buffer& src = a.buffer(size);
    Buffer& dst = b.buffer(size);
    fill_pattern(src.ptr(), size, 9);
    ASSERT_EQ(qb->rq->post(recv_wqe(tag(77), {})), STATUS_SUCCESS);
    SendWqe wr = send_wqe(SendOpcode::kWrite, tag(1), {src.sge(0, size)});
    wr.remote_address = dst.va();
    wr.remote_token = dst.tokens.remote;
    wr.has_immediate = true;
    wr.immediate = 0x01020304 + size;
    ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
    w.settle();
    auto rc = qb->recv_cqes();
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(rc[0].request_context, tag(77));
    EXPECT_EQ(rc[0].bytes_transferred, size);
    EXPECT_EQ(rc[0].type_specific_completion_output, kCqeImmediateValid | (0x01020304 + size));
    EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), size), 0);
    ASSERT_EQ(qa->send_cqes().size(), 1u);
  }
}

// Qp::report_remote_writes: each WRITE the peer completes is one kRemoteWrite on the receive CQ
// (its address and length), taking no receive; a WRITE with immediate still completes as the
// receive it consumed, once; a retransmitted WRITE the responder already took is not reported
// again. Without the flag (WriteEverySizeByteExact) nothing is reported.
TEST(RcEngineReportWrites, EachWriteCompletesOnceWithItsAddressAndLength) {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp& qa = a.qp();
  Qp& qb = b.qp();
  ConnectOptions o;
  o.b_report_writes = true;
  connect(a, qa, b, qb, o);
  ASSERT_EQ(qb.rq->post(recv_wqe(tag(9), {})), STATUS_SUCCESS);
  Buffer& dst = b.buffer(8 * kMtu, kMrAll, 0xCD);
  uint64_t next = 1;
  for (uint32_t size : {0u, 1u, 64u, kMtu, 3 * kMtu + 5}) {
    SCOPED_TRACE(size);
    Buffer& src = a.buffer(size);
    fill_pattern(src.ptr(), size, size + 3);
    SendWqe wr = send_wqe(SendOpcode::kWrite, tag(next++), {src.sge(0, size)});
    wr.remote_address = dst.va() + 100;
    wr.remote_token = dst.tokens.remote;
    ASSERT_EQ(qa.sq->post(wr), STATUS_SUCCESS);
    w.settle();
    const auto rc = qb.recv_cqes();
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(rc[0].type, NdkOperationType::kRemoteWrite);
    EXPECT_EQ(rc[0].request_context, nullptr);
    EXPECT_EQ(rc[0].bytes_transferred, size);
    EXPECT_EQ(rc[0].type_specific_completion_output, dst.va() + 100);
    EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr() + 100, size), 0);
    ASSERT_EQ(qa.send_cqes().size(), 1u);
  }
  // Its ACK lost, the WRITE goes again: the responder ACKs the duplicate and reports nothing.
  int acks_dropped = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    return !ab && p.f.bth.opcode == wire::opcode::kRcAck && acks_dropped++ == 0;
  };
  Buffer& src = a.buffer(64);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(50), {src.sge(0, 64)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa.sq->post(wr), STATUS_SUCCESS);
  const uint64_t dup0 = qb.qp->stats.duplicates;
  ASSERT_TRUE(w.run_until([&] { return !qa.send_cqes().empty(); }));
  EXPECT_GT(qb.qp->stats.duplicates, dup0) << "the WRITE went again after its ACK was lost";
  EXPECT_EQ(qb.recv_cqes().size(), 1u);
  w.drop_if = nullptr;
  // With immediate: the receive posted before every WRITE above is the one it takes.
  wr = send_wqe(SendOpcode::kWrite, tag(51), {src.sge(0, 64)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  wr.has_immediate = true;
  wr.immediate = 7;
  ASSERT_EQ(qa.sq->post(wr), STATUS_SUCCESS);
  w.settle();
  const auto rc = qb.recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].type, NdkOperationType::kReceive);
  EXPECT_EQ(rc[0].request_context, tag(9));
  EXPECT_EQ(rc[0].type_specific_completion_output, kCqeImmediateValid | 7u);
}

TEST_F(Pair, ReadEverySizeByteExact) {
  for (uint32_t size : kSizes) {
    SCOPED_TRACE(size);
    Buffer& remote = b.buffer(size);
    Buffer& sink = a.buffer(size + 8, kMrAll, 0x11);
    fill_pattern(remote.ptr(), size, size + 200);
    SendWqe rd = send_wqe(SendOpcode::kRead, tag(size), {sink.sge(0, size)});
    rd.remote_address = remote.va();
    rd.remote_token = remote.tokens.remote;
    ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
    const std::vector<NdkResultEx> sc = send_completions();
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(sc[0].type, NdkOperationType::kRead);
    EXPECT_EQ(std::memcmp(remote.ptr(), sink.ptr(), size), 0);
    for (uint32_t i = size; i < size + 8; ++i) ASSERT_EQ(sink.data[i], 0x11);
  }
}

// A READ into a sink of several SGEs (a zero-length one among them): the responses, one path MTU
// each, are scattered across the SGE boundaries, byte-exact, and nothing past them is written.
TEST_F(Pair, ReadScattersIntoSeveralSgesByteExact) {
  constexpr uint32_t kLen = 700 + 1500 + 2000;  // five responses at MTU 1024
  Buffer& remote = b.buffer(kLen);
  fill_pattern(remote.ptr(), kLen, 41);
  Buffer& sink = a.buffer(8192, kMrAll, 0x11);
  SendWqe rd =
      send_wqe(SendOpcode::kRead, tag(1),
               {sink.sge(0, 700), sink.sge(1000, 0), sink.sge(2000, 1500), sink.sge(4000, 2000)});
  rd.remote_address = remote.va();
  rd.remote_token = remote.tokens.remote;
  ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
  const std::vector<NdkResultEx> sc = send_completions();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(sc[0].bytes_transferred, kLen);
  EXPECT_EQ(std::memcmp(sink.ptr(), remote.ptr(), 700), 0);
  EXPECT_EQ(std::memcmp(sink.ptr() + 2000, remote.ptr() + 700, 1500), 0);
  EXPECT_EQ(std::memcmp(sink.ptr() + 4000, remote.ptr() + 2200, 2000), 0);
  for (uint32_t i = 0; i < 8192; ++i) {
    const bool in_sge = i < 700 || (i >= 2000 && i < 3500) || (i >= 4000 && i < 6000);
    if (!in_sge) {
      ASSERT_EQ(sink.data[i], 0x11) << i;
    }
  }
}

TEST_F(Pair, AtomicsReturnTheOriginalValueAndApplyOnce) {
  Buffer& target = b.buffer(64);
  Buffer& result = a.buffer(64);
  uint64_t v = 40;
  std::memcpy(target.ptr() + 8, &v, 8);
  SendWqe fa = send_wqe(SendOpcode::kFetchAdd, tag(1), {result.sge(0, 8)});
  fa.remote_address = target.va() + 8;
  fa.remote_token = target.tokens.remote;
  fa.swap_or_add = 2;
  SendWqe cs = send_wqe(SendOpcode::kCompareSwap, tag(2), {result.sge(8, 8)});
  cs.remote_address = target.va() + 8;
  cs.remote_token = target.tokens.remote;
  cs.compare = 42;
  cs.swap_or_add = 1000;
  SendWqe cs_miss = cs;
  cs_miss.request_context = tag(3);
  cs_miss.sge[0] = result.sge(16, 8);
  cs_miss.compare = 42;  // the value is 1000 by now: no swap
  cs_miss.swap_or_add = 5;
  ASSERT_EQ(qa->sq->post(fa), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(cs), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(cs_miss), STATUS_SUCCESS);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].type, NdkOperationType::kFetchAdd);
  EXPECT_EQ(sc[0].type_specific_completion_output, 40u);
  EXPECT_EQ(sc[1].type, NdkOperationType::kCompareSwap);
  EXPECT_EQ(sc[1].type_specific_completion_output, 42u);
  EXPECT_EQ(sc[2].type_specific_completion_output, 1000u);
  uint64_t r[3];
  std::memcpy(r, result.ptr(), 24);
  EXPECT_EQ(r[0], 40u);
  EXPECT_EQ(r[1], 42u);
  EXPECT_EQ(r[2], 1000u);
  std::memcpy(&v, target.ptr() + 8, 8);
  EXPECT_EQ(v, 1000u);
}

TEST_F(Pair, UnalignedAtomicIsALocalError) {
  Buffer& target = b.buffer(64);
  Buffer& result = a.buffer(64);
  SendWqe fa = send_wqe(SendOpcode::kFetchAdd, tag(1), {result.sge(0, 8)});
  fa.remote_address = target.va() + 4;
  fa.remote_token = target.tokens.remote;
  ASSERT_EQ(qa->sq->post(fa), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  EXPECT_TRUE(a.tx.empty()) << "nothing goes on the wire";
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_INVALID_DEVICE_REQUEST);
  EXPECT_EQ(qa->qp->state(), QpState::kError);
}

TEST_F(Pair, InlineSendNeedsNoRegistration) {
  Buffer& dst = b.buffer(64);
  uint8_t bytes[40];
  fill_pattern(bytes, sizeof bytes, 5);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(1), {dst.sge(0, 64)})), STATUS_SUCCESS);
  SendWqe s =
      send_wqe(SendOpcode::kSend, tag(2), {NdkSge{bytes, sizeof bytes, 0}}, NDK_OP_FLAG_INLINE);
  ASSERT_EQ(qa->sq->post(s), STATUS_SUCCESS);
  std::memset(bytes, 0, sizeof bytes);  // INLINE: the data was copied at post time
  fill_pattern(bytes, sizeof bytes, 5);
  uint8_t expect[40];
  std::memcpy(expect, bytes, sizeof bytes);
  std::memset(bytes, 0, sizeof bytes);
  w.settle();
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].bytes_transferred, 40u);
  EXPECT_EQ(std::memcmp(dst.ptr(), expect, 40), 0);
}

TEST_F(Pair, SilentSuccessSuppressesOnlySuccessfulCompletions) {
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(64);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(1), {src.sge(0, 64)}, NDK_OP_FLAG_SILENT_SUCCESS);
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  SendWqe wr2 = wr;
  wr2.request_context = tag(2);
  wr2.flags = 0;
  ASSERT_EQ(qa->sq->post(wr2), STATUS_SUCCESS);
  SendWqe bad = wr;
  bad.request_context = tag(3);
  bad.remote_token ^= 0x100;  // wrong key: fails even though SILENT_SUCCESS
  ASSERT_EQ(qa->sq->post(bad), STATUS_SUCCESS);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].request_context, tag(2));
  EXPECT_EQ(sc[1].request_context, tag(3));
  EXPECT_EQ(sc[1].status, STATUS_ACCESS_VIOLATION);
}

TEST_F(Pair, SendAndInvalidateInvalidatesThePeersRegion) {
  // B's fast-register region, made valid by a FastRegister work request on B's send queue.
  MrTokens fr;
  ASSERT_EQ(b.mrs->create_fast_register(1, 4, true, &fr), STATUS_SUCCESS);
  Buffer& backing = b.buffer(4 * 4096);
  SendWqe reg = send_wqe(SendOpcode::kFastRegister, tag(9), {});
  reg.local_token = fr.local;
  reg.fr_address = backing.va();
  reg.fr_length = 4096;
  reg.fr_access = kMrAll;
  ASSERT_EQ(qb->sq->post(reg), STATUS_SUCCESS);
  w.settle(3);
  auto bsc = qb->send_cqes();
  ASSERT_EQ(bsc.size(), 1u);
  EXPECT_EQ(bsc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(bsc[0].type, NdkOperationType::kFastRegister);
  MrView view;
  ASSERT_TRUE(b.mrs->view(fr.remote, &view));

  Buffer& src = a.buffer(16);
  Buffer& dst = b.buffer(16);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(1), {dst.sge(0, 16)})), STATUS_SUCCESS);
  SendWqe s = send_wqe(SendOpcode::kSendAndInvalidate, tag(2), {src.sge(0, 16)});
  s.invalidate_token = fr.remote;
  ASSERT_EQ(qa->sq->post(s), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  const wire::ParsedPacket p = parse_frame(a.tx.at(0));
  EXPECT_EQ(p.f.bth.opcode, wire::opcode::kRcSendOnlyInv);
  EXPECT_EQ(p.f.ieth_rkey, fr.remote);
  w.settle();
  auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(rc[0].type, NdkOperationType::kReceiveAndInvalidate);
  EXPECT_EQ(rc[0].type_specific_completion_output, fr.remote);
  EXPECT_FALSE(b.mrs->view(fr.remote, &view)) << "region must be invalid now";
}

TEST_F(Pair, ReadFenceWaitsForEarlierReads) {
  Buffer& remote = b.buffer(4096);
  Buffer& sink = a.buffer(4096);
  Buffer& dst = b.buffer(64);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(1), {sink.sge(0, 4096)});
  rd.remote_address = remote.va();
  rd.remote_token = remote.tokens.remote;
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(2), {sink.sge(0, 64)}, NDK_OP_FLAG_READ_FENCE);
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 1u) << "the fenced WRITE waits for the READ response";
  EXPECT_EQ(parse_frame(a.tx[0]).f.bth.opcode, wire::opcode::kRcReadRequest);
  w.settle();
  auto sc = qa->send_cqes();
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(std::memcmp(dst.ptr(), remote.ptr(), 64), 0)
      << "WRITE carried the data the READ fetched";
}

TEST_F(Pair, OutboundReadLimitCapsReadsInFlight) {
  Buffer& remote = b.buffer(64);
  Buffer& sink = a.buffer(64 * 20);
  for (int i = 0; i < 20; ++i) {
    SendWqe rd = send_wqe(SendOpcode::kRead, tag(i), {sink.sge(64 * i, 64)});
    rd.remote_address = remote.va();
    rd.remote_token = remote.tokens.remote;
    ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
  }
  a.eng->poll_st(w.now);
  EXPECT_EQ(a.tx.size(), 8u) << "ORL is 8";
  w.settle(100);
  EXPECT_EQ(qa->send_cqes().size(), 20u);
}

TEST_F(Pair, RollbackWhenTheSinkHasNoBuffer) {
  Buffer& src = a.buffer(3 * kMtu);
  Buffer& dst = b.buffer(3 * kMtu);
  fill_pattern(src.ptr(), 3 * kMtu, 1);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(1), {dst.sge(0, 3 * kMtu)})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(2), {src.sge(0, 3 * kMtu)})),
            STATUS_SUCCESS);
  a.fail_allocs = 1;
  a.eng->poll_st(w.now);
  EXPECT_TRUE(a.tx.empty());
  EXPECT_EQ(a.eng->counters().get(RcCounter::kTxNoBuffer), 1u);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i)
    EXPECT_EQ(parse_frame(a.tx[i]).f.bth.psn, 100 + i) << "no PSN was lost";
  w.settle();
  ASSERT_EQ(qb->recv_cqes().size(), 1u);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 3 * kMtu), 0);
}

// A polling core's sink queues a frame when it hands out the buffer: the engine owes the frames
// their ICRC until its call returns, or until the sink asks (before it transmits in the middle of
// a call, its TX buffer full). One poll here builds more frames than the engine keeps owed (32).
TEST_F(Pair, FramesHaveTheirIcrcWhenTheCallReturnsAndWhenTheSinkAsks) {
  a.queue_frames_on_alloc();
  b.queue_frames_on_alloc();
  const auto icrc_ok = [](const Frame& f) {
    wire::ParsedPacket p;
    return wire::parse(wire::Bytes(f.data(), f.size()), p) == wire::DropReason::kNone;
  };
  size_t asked = 0, bad_when_asked = 0;
  a.on_alloc = [&] {
    if (a.tx.size() % 10 != 7) return;
    ++asked;
    a.eng->finish_frames_st();
    for (const Frame& f : a.tx) bad_when_asked += !icrc_ok(f);
  };
  Buffer& src = a.buffer(20 * 64 + 40 * kMtu);
  Buffer& dst = b.buffer(20 * 64 + 40 * kMtu);
  fill_pattern(src.ptr(), src.data.size(), 3);
  for (uint32_t i = 0; i < 20; ++i) {
    SendWqe wr = send_wqe(SendOpcode::kWrite, tag(i), {src.sge(64 * i, 64)});
    wr.remote_address = dst.va() + 64 * i;
    wr.remote_token = dst.tokens.remote;
    ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  }
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(50), {dst.sge(20 * 64, 40 * kMtu)})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(51), {src.sge(20 * 64, 40 * kMtu)})),
            STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 60u) << "20 WRITEs and a SEND of 40 packets in one poll";
  EXPECT_EQ(asked, 6u);
  EXPECT_EQ(bad_when_asked, 0u) << "a frame the sink could transmit had no ICRC yet";
  for (size_t i = 0; i < a.tx.size(); ++i) EXPECT_TRUE(icrc_ok(a.tx[i])) << "frame " << i;
  a.on_alloc = nullptr;
  w.settle();
  EXPECT_EQ(qa->send_cqes().size(), 21u);
  ASSERT_EQ(qb->recv_cqes().size(), 1u);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), dst.data.size()), 0);
  EXPECT_EQ(b.eng->wire_drops()[static_cast<size_t>(wire::DropReason::kBadIcrc)], 0u);
  EXPECT_EQ(a.eng->wire_drops()[static_cast<size_t>(wire::DropReason::kBadIcrc)], 0u)
      << "B's ACKs were finished too";
  EXPECT_EQ(a.eng->counters().get(RcCounter::kTxRetransmit), 0u);
}

TEST_F(Pair, AckIsCoalescedPerPoll) {
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(64 * 10);
  for (int i = 0; i < 10; ++i) {
    SendWqe wr = send_wqe(SendOpcode::kWrite, tag(i), {src.sge(0, 64)});
    wr.remote_address = dst.va() + 64 * i;
    wr.remote_token = dst.tokens.remote;
    ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
  }
  a.eng->poll_st(w.now);
  ASSERT_EQ(a.tx.size(), 10u);
  Wire::deliver(b, a.tx, w.now);
  a.tx.clear();
  b.eng->poll_st(w.now);
  ASSERT_EQ(b.tx.size(), 1u) << "ten AckReqs in one burst, one ACK";
  const wire::ParsedPacket ack = parse_frame(b.tx[0]);
  EXPECT_EQ(ack.f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(ack.f.bth.psn, 109u);
  EXPECT_EQ(ack.f.aeth.syndrome, 0x1F);
  EXPECT_EQ(ack.f.aeth.msn, 10u);
  Wire::deliver(a, b.tx, w.now);
  b.tx.clear();
  EXPECT_TRUE(qa->send_cqes().empty()) << "completions appear only when A polls";
  a.eng->poll_st(w.now);
  EXPECT_EQ(qa->send_cqes().size(), 10u);
}

}  // namespace
}  // namespace rocedp::rc::test

namespace rocedp::rc::test {
namespace {

TEST(RcEngineSrq, ReceivesComeFromTheSharedQueueAndRnrWhenEmpty) {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp& qa = a.qp();
  // B's QP takes its receives from an SRQ.
  NTSTATUS st;
  auto srq = SharedReceiveQueue::create(16, 4, nullptr, nullptr, &st);
  ASSERT_EQ(st, STATUS_SUCCESS);
  Qp& qb = b.qp(16, 16, 64, kDefaultMaxUnackedPsns, srq.get());
  connect(a, qa, b, qb);
  Buffer& src = a.buffer(100);
  Buffer& dst = b.buffer(200);
  fill_pattern(src.ptr(), 100, 3);
  ASSERT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 100)})), STATUS_SUCCESS);
  w.settle(3);
  EXPECT_GE(b.eng->counters().get(RcCounter::kRnrNaksSent), 1u);
  ASSERT_EQ(srq->post(recv_wqe(tag(5), {dst.sge(0, 200)})), STATUS_SUCCESS);
  w.now += 1'000'000;
  w.settle();
  auto rc = qb.recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].request_context, tag(5));
  EXPECT_EQ(rc[0].bytes_transferred, 100u);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 100), 0);
  EXPECT_EQ(qa.send_cqes().size(), 1u);
}

}  // namespace
}  // namespace rocedp::rc::test
