// Loss recovery of the RC engine: the cases in which plain go-back-N with a fixed
// local ACK timeout waits the whole timeout (67 ms at rocedp-perf's timeout code 14), and the
// rules that keep recovery within the standard. Every test runs on virtual time over the
// in-memory wire of rc_harness.hpp and asserts what a consumer sees: bytes delivered exactly
// once, completion statuses and order, and the per-QP counters of /rocedp/qps.

#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/ib_timers.hpp"
#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

using namespace wire::opcode;

constexpr uint8_t kTimeout14 = 14;  // 4.096 µs × 2^14 = 67.1 ms, what rocedp-perf configures
const uint64_t kFullTimeoutNs = *local_ack_timeout_ns(kTimeout14);
// "A few RTTs": the adaptive timer's floor plus slack for the harness's idle time jumps
// (100 µs per idle round). An order of magnitude below a 1 ms timeout, ~70x below 67 ms.
constexpr uint64_t kFewRtosNs = 600'000;

bool is_nak(const wire::ParsedPacket& p) {
  return p.f.bth.opcode == kRcAck && (p.f.aeth.syndrome & wire::kAethTypeMask) == wire::kAethNak;
}
bool is_ack(const wire::ParsedPacket& p) {
  return p.f.bth.opcode == kRcAck && (p.f.aeth.syndrome & wire::kAethTypeMask) == wire::kAethAck;
}

class Loss : public ::testing::Test {
 protected:
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Buffer* src = nullptr;
  Buffer* dst = nullptr;
  ConnectOptions o;
  uint64_t posted = 0;
  std::vector<NdkResultEx> done;

  void make(uint32_t window = kDefaultMaxUnackedPsns, uint8_t retry = 7) {
    o.timeout = kTimeout14;
    o.retry = retry;
    qa = &a.qp(512, 512, 8192, window);
    qb = &b.qp(512, 512, 8192, window);
    connect(a, *qa, b, *qb, o);
    src = &a.buffer(1 << 20);
    dst = &b.buffer(1 << 20, kMrAll, 0);
    fill_pattern(src->ptr(), 1 << 20, 7);
  }

  // A WRITE of `len` bytes from src[off] to dst[off]; its context is its posting number.
  void write(uint32_t off, uint32_t len) {
    ASSERT_EQ(qa->sq->post(write_wqe(tag(posted), *src, *dst, off, len)), STATUS_SUCCESS);
    ++posted;
  }
  bool all_done() {
    auto s = qa->send_cqes();
    done.insert(done.end(), s.begin(), s.end());
    return done.size() == posted;
  }
  // Every completion succeeded, exactly once, in posting order.
  void expect_in_order_success() {
    ASSERT_EQ(done.size(), posted);
    for (size_t i = 0; i < done.size(); ++i) {
      EXPECT_EQ(done[i].status, STATUS_SUCCESS) << i;
      EXPECT_EQ(done[i].request_context, tag(i)) << "posting order, exactly once";
    }
  }
  // Clean traffic first, so that the requester has RTT samples (as any QP that ran a while).
  void warm_up() {
    for (int i = 0; i < 16; ++i) write(0, 4096);
    ASSERT_TRUE(w.run_until([&] { return all_done(); }));
    ASSERT_NE(qa->qp->comp.srtt_ns, 0u) << "the requester measured the RTT";
    expect_in_order_success();
  }
  uint64_t run_timed() {
    const uint64_t t0 = w.now;
    EXPECT_TRUE(w.run_until([&] { return all_done(); })) << "hang";
    return w.now - t0;
  }
};

// The last packet of a message is lost: no later packet makes the responder NAK, so only the
// requester's timer recovers. The adaptive timer fires after a few RTTs and its probe
// (the oldest unacknowledged PSN with AckReq) starts the go-back-N.
TEST_F(Loss, LostTailPacketCostsAFewRtosNotTheAckTimeout) {
  make();
  warm_up();
  write(0, 8 * 1024);  // 8 packets at MTU 1024
  const uint32_t last = wire::psn_add(qa->qp->req.max_psn_sent, 7);
  int dropped = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    return ab && p.f.bth.psn == last && dropped++ == 0;
  };
  const uint64_t elapsed = run_timed();
  EXPECT_EQ(dropped, 2) << "the tail was lost once, its resend got through";
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 8 * 1024), 0);
  EXPECT_LT(elapsed, kFewRtosNs) << "not the local ACK timeout of " << kFullTimeoutNs << " ns";
  EXPECT_EQ(qa->qp->stats.timeouts, 1u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRtoProbes), 1u);
  EXPECT_EQ(qa->qp->comp.retry_left, o.retry) << "progress restored the retry budget";
  EXPECT_GE(qa->qp->stats.retransmits, 1u);
  EXPECT_GT(qa->qp->stats.timeout_wait_ns, 0u);
}

// The ACK of the last message is lost: the data arrived, the requester cannot know. Its probe
// is a duplicate that the responder re-ACKs (IBTA C9-105), and nothing executes twice.
TEST_F(Loss, LostAckCostsAFewRtosAndNothingExecutesTwice) {
  make();
  warm_up();
  Buffer& rbuf = b.buffer(4096, kMrAll, 0);
  ASSERT_EQ(qb->rq->post(recv_wqe(tag(99), {rbuf.sge(0, 4096)})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(posted), {src->sge(0, 4096)})),
            STATUS_SUCCESS);
  ++posted;
  int acks_dropped = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    return !ab && is_ack(p) && acks_dropped++ == 0;
  };
  const uint64_t dup0 = qb->qp->stats.duplicates;
  const uint64_t elapsed = run_timed();
  expect_in_order_success();
  EXPECT_LT(elapsed, kFewRtosNs);
  const auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u) << "the SEND was delivered exactly once";
  EXPECT_EQ(rc[0].bytes_transferred, 4096u);
  EXPECT_EQ(std::memcmp(rbuf.ptr(), src->ptr(), 4096), 0);
  EXPECT_GT(qb->qp->stats.duplicates, dup0) << "the probe was a duplicate, answered by an ACK";
  EXPECT_EQ(qa->qp->stats.timeouts, 1u);
}

// The responder stalls: its ACKs of two bursts arrive only after the requester's timer fired and
// its probe went out. Nothing was lost. The first late ACK confirms half the packets, which only
// their first transmission carried; the requester probes again at the new oldest PSN instead of
// resending the other half, and its window stays whole (F-RTO's reading of a spurious expiry).
TEST_F(Loss, LateAcksAfterASpuriousTimeoutCostAProbeEachNotTheWindow) {
  make();
  warm_up();
  bool stalled = true;
  w.park_if = [&](bool ab, const wire::ParsedPacket& p) { return stalled && !ab && is_ack(p); };
  for (int burst = 0; burst < 2; ++burst) {
    for (int i = 0; i < 4; ++i) write(static_cast<uint32_t>(burst * 4 + i) * 1024, 1024);
    w.settle(5);
  }
  ASSERT_EQ(w.parked_ba.size(), 2u) << "one ACK per burst, both held back";
  const uint32_t window = qa->qp->comp.window;
  const uint64_t retransmits0 = qa->qp->stats.retransmits;
  const uint64_t dup0 = qb->qp->stats.duplicates;
  ASSERT_TRUE(w.run_until([&] { return qa->qp->stats.timeouts == 1; }));
  w.settle(5);
  ASSERT_EQ(w.parked_ba.size(), 3u) << "the probe's answer is held back too";
  stalled = false;
  // The late ACKs arrive one per poll, so that the requester may act on each.
  std::vector<Frame> late = std::move(w.parked_ba);
  w.parked_ba.clear();
  for (Frame& f : late) {
    std::vector<Frame> one;
    one.push_back(std::move(f));
    Wire::deliver(a, one, w.now);
    w.step();
  }
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 8 * 1024), 0);
  EXPECT_EQ(qa->qp->stats.timeouts, 1u);
  EXPECT_EQ(qa->qp->stats.retransmits - retransmits0, 2u)
      << "the probe, and one more at the oldest PSN the first late ACK left";
  EXPECT_EQ(qb->qp->stats.duplicates - dup0, 2u) << "both were duplicates, nothing else was resent";
  EXPECT_EQ(a.eng->counters().get(RcCounter::kSpuriousTimeouts), 1u);
  EXPECT_GE(qa->qp->comp.window, window) << "no loss, so no halving";
}

// The responder stalls once for longer than the timer: its ACK arrives after the timer fired and
// the probe left, and confirms everything; then the probe's own answer (a repeated ACK) arrives,
// which shows that ACK was late rather than the answer. The timer takes the stall as its RTT
// (Eifel's response, RFC 4015), so the same stall again costs no timeout. A lost ACK looks the
// same up to the answer, which then has nothing after it: it teaches nothing.
TEST_F(Loss, AStallShownByTheProbesAnswerTeachesTheTimerALostAckDoesNot) {
  make();
  warm_up();
  const uint32_t srtt0 = qa->qp->comp.srtt_ns;
  // A lost tail ACK: a timeout, whose probe's answer confirms everything, and nothing follows.
  int dropped = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    return !ab && is_ack(p) && dropped++ == 0;
  };
  write(0, 1024);
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  w.drop_if = nullptr;
  EXPECT_EQ(qa->qp->stats.timeouts, 1u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kSpuriousTimeouts), 1u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kStallsLearned), 0u);
  EXPECT_LT(qa->qp->comp.srtt_ns, 4 * srtt0 + 10'000) << "a lost ACK is no stall";

  // A stall: the ACKs are held until after the timeout, then all arrive, the probe's answer last.
  bool stalled = true;
  w.park_if = [&](bool ab, const wire::ParsedPacket& p) { return stalled && !ab && is_ack(p); };
  for (int i = 0; i < 4; ++i) write(static_cast<uint32_t>(i) * 1024, 1024);
  const uint64_t t0 = w.now;
  ASSERT_TRUE(w.run_until([&] { return qa->qp->stats.timeouts == 2; }));
  w.settle(5);
  const uint64_t stall = w.now - t0;
  ASSERT_GE(w.parked_ba.size(), 2u) << "the ACK and the probe's answer, both held";
  stalled = false;
  w.release_parked();
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  EXPECT_EQ(a.eng->counters().get(RcCounter::kSpuriousTimeouts), 2u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kStallsLearned), 1u);
  EXPECT_GE(qa->qp->comp.srtt_ns, stall / 2) << "the estimate took the stall";

  // The same stall again: no timeout.
  stalled = true;
  for (int i = 0; i < 4; ++i) write(static_cast<uint32_t>(4 + i) * 1024, 1024);
  const uint64_t t1 = w.now;
  ASSERT_TRUE(w.run_until([&] { return w.now - t1 >= stall; }));
  stalled = false;
  w.release_parked();
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 8 * 1024), 0);
  EXPECT_EQ(qa->qp->stats.timeouts, 2u) << "the timer waited out the stall it learned";
}

// A packet in mid-stream and then the responder's one NAK are lost. The responder must not NAK
// again for the same sequence error (IBTA §9.7.5.1.2, as rxe, hfi1, qib): it drops what follows
// silently, and the requester's timer recovers in a few RTTs.
TEST_F(Loss, LostNakCostsAFewRtosAndTheResponderNaksOnce) {
  make();
  warm_up();
  const uint32_t base = qa->qp->req.max_psn_sent;
  for (uint32_t i = 0; i < 16; ++i) write(i * 1024, 1024);
  const uint32_t lost = wire::psn_add(base, 4);
  int data_dropped = 0, naks_dropped = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    if (ab) return p.f.bth.psn == lost && data_dropped++ == 0;
    return is_nak(p) && naks_dropped++ == 0;
  };
  const uint64_t naks0 = qb->qp->stats.naks_sent;
  const uint64_t elapsed = run_timed();
  EXPECT_EQ(naks_dropped, 1);
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 16 * 1024), 0);
  EXPECT_LT(elapsed, kFewRtosNs);
  EXPECT_EQ(qb->qp->stats.naks_sent - naks0, 1u) << "one NAK for 11 packets out of sequence";
  EXPECT_GE(b.eng->counters().get(RcCounter::kRxOutOfSequence), 11u);
  EXPECT_EQ(qa->qp->stats.naks_received, 0u);
  EXPECT_EQ(qa->qp->stats.timeouts, 1u);
}

// A NAK that arrives starts the go-back-N at once: the resend leaves in the requester's next poll,
// with no timer involved.
TEST_F(Loss, NakRestartsGoBackNWithoutWaiting) {
  make();
  warm_up();
  const uint32_t base = qa->qp->req.max_psn_sent;
  for (uint32_t i = 0; i < 16; ++i) write(i * 1024, 1024);
  const uint32_t lost = wire::psn_add(base, 4);
  int dropped = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    return ab && p.f.bth.psn == lost && dropped++ == 0;
  };
  const uint64_t elapsed = run_timed();
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 16 * 1024), 0);
  EXPECT_EQ(qa->qp->stats.naks_received, 1u);
  EXPECT_EQ(qa->qp->stats.timeouts, 0u);
  EXPECT_LE(elapsed, 5'000u) << "a few 1 µs rounds: the NAK's round trip and the resend";
}

// The link loses 50 frames in a row, both directions, including the tail of the stream (so no
// NAK can come): recovery costs a few RTOs, every byte arrives once.
TEST_F(Loss, BurstOf50LostFramesRecoversInAFewRtos) {
  make();
  warm_up();
  for (uint32_t i = 0; i < 40; ++i) write(i * 2048, 2048);  // 80 packets
  uint64_t seen_ab = 0;
  bool outage = false;
  const uint64_t dropped0 = w.dropped;
  w.drop_if = [&](bool ab, const wire::ParsedPacket&) {
    if (ab && ++seen_ab == 35) outage = true;  // 80 A-to-B frames: the tail is in the burst
    if (outage && w.dropped - dropped0 == 50) outage = false;
    return outage;
  };
  const uint64_t elapsed = run_timed();
  EXPECT_EQ(w.dropped - dropped0, 50u);
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 40 * 2048), 0);
  // The burst also swallows the first probes (one frame each), and every lost probe doubles the
  // timer: 0.1 + 0.2 + 0.4 + 0.8 ms, still ~40x less than one local ACK timeout.
  EXPECT_LT(elapsed, 3'000'000u);
  EXPECT_GE(qa->qp->stats.timeouts, 2u);
  EXPECT_EQ(qa->qp->comp.retry_left, o.retry);
}

// Frames delayed far beyond the window (requests, ACKs, READ responses, an atomic) arrive after
// the requester has resent them and moved on by several windows. None is executed or completed
// twice: the stale WRITE does not overwrite newer data, the stale fetch-add is not applied again,
// stale responses match nothing.
TEST_F(Loss, ReorderingBeyondTheWindowExecutesNothingTwice) {
  constexpr uint32_t kWindow = 16;
  make(kWindow);
  warm_up();
  Buffer& counter = b.buffer(8, kMrAll, 0);
  Buffer& result = a.buffer(8 * 200, kMrAll, 0);
  Buffer& rsrc = b.buffer(4096, kMrAll, 0);
  fill_pattern(rsrc.ptr(), 4096, 11);
  Buffer& rdst = a.buffer(4096, kMrAll, 0);
  // Park the first transmission of each: a WRITE of version 1 to dst[0..1024), a fetch-add,
  // and B's answers to a READ.
  std::memset(src->ptr(), 0x11, 1024);
  write(0, 1024);
  ASSERT_EQ(qa->sq->post(fetch_add_wqe(tag(posted), result, counter, 5)), STATUS_SUCCESS);
  ++posted;
  ASSERT_EQ(qa->sq->post(read_wqe(tag(posted), rdst, rsrc, 4096)), STATUS_SUCCESS);
  ++posted;
  int parked_req = 0, parked_resp = 0;
  w.park_if = [&](bool ab, const wire::ParsedPacket& p) {
    if (ab)
      return (p.f.bth.opcode == kRcWriteOnly || p.f.bth.opcode == kRcFetchAdd) && parked_req++ < 2;
    return (p.f.bth.opcode >= kRcReadRespFirst && p.f.bth.opcode <= kRcReadRespOnly) &&
           parked_resp++ < 4;
  };
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  w.park_if = nullptr;
  ASSERT_EQ(w.parked_ab.size(), 2u);
  ASSERT_EQ(w.parked_ba.size(), 4u);
  // Version 2 of the same bytes, and 10 windows of other traffic.
  std::memset(src->ptr(), 0x22, 1024);
  write(0, 1024);
  for (uint32_t i = 0; i < 10 * kWindow; ++i) write(4096 + (i % 64) * 1024, 1024);
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  const uint64_t dup0 = qb->qp->stats.duplicates;
  w.release_parked();
  w.settle(200);
  EXPECT_TRUE(all_done());
  expect_in_order_success();
  EXPECT_EQ(done.size(), posted) << "no completion twice";
  for (int i = 0; i < 1024; ++i)
    ASSERT_EQ(dst->ptr()[i], 0x22) << "the stale WRITE was not applied again";
  uint64_t c;
  std::memcpy(&c, counter.ptr(), 8);
  EXPECT_EQ(c, 5u) << "the stale fetch-add was not applied again";
  EXPECT_EQ(std::memcmp(rdst.ptr(), rsrc.ptr(), 4096), 0);
  EXPECT_EQ(qb->qp->stats.duplicates - dup0, 2u) << "both stale requests were seen as duplicates";
  EXPECT_EQ(qa->qp->state(), QpState::kRts);
  EXPECT_EQ(qb->qp->state(), QpState::kRts);
}

// A pipeline of small READs with WRITEs between them, whose responses are lost, duplicated and
// delivered again long after the go-back-N that replaced them: the completer's scans start past
// the WQEs already finished (CompleterState::scan_from), and every READ still completes once,
// in order, with its own bytes.
TEST_F(Loss, SmallReadResponsesLostDuplicatedAndStaleCompleteTheirOwnWqeOnce) {
  constexpr uint32_t kWindow = 16;
  constexpr uint32_t kOps = 96;
  make(kWindow);
  warm_up();
  Buffer& rsrc = b.buffer(kOps * 64, kMrAll, 0);
  fill_pattern(rsrc.ptr(), kOps * 64, 13);
  Buffer& rdst = a.buffer(kOps * 64, kMrAll, 0);
  for (uint32_t i = 0; i < kOps; ++i) {
    if (i % 3 == 2) {
      write(i * 64, 64);
      continue;
    }
    SendWqe rd = send_wqe(SendOpcode::kRead, tag(posted), {rdst.sge(i * 64, 64)});
    rd.remote_address = rsrc.va() + i * 64;
    rd.remote_token = rsrc.tokens.remote;
    ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
    ++posted;
  }
  // The first copies of a few READ responses are held back (lost, as far as A knows) and
  // delivered later; every frame may also be duplicated on the way.
  Faults f;
  f.duplicate = 0.3;
  w.faults = &f;
  int responses = 0;
  w.park_if = [&](bool ab, const wire::ParsedPacket& p) {
    if (ab || p.f.bth.opcode != kRcReadRespOnly) return false;
    ++responses;
    return responses == 3 || responses == 11 || responses == 12 || responses == 30;
  };
  const uint64_t ghosts0 = a.eng->counters().get(RcCounter::kRxGhostResponse);
  const uint64_t gobacks0 = a.eng->counters().get(RcCounter::kGoBackN);
  bool released = false;
  for (int round = 0; round < 200000 && !all_done(); ++round) {
    if (!w.step()) w.now += 100'000;
    if (!released && responses > 40) {
      w.release_parked();  // stale copies of responses already resent (or still awaited)
      released = true;
    }
  }
  w.park_if = nullptr;
  w.release_parked();
  w.settle(200);
  w.faults = nullptr;
  w.settle(50);
  EXPECT_TRUE(released);
  EXPECT_TRUE(all_done());
  expect_in_order_success();
  EXPECT_EQ(done.size(), posted) << "no completion twice";
  for (uint32_t i = 0; i < kOps; ++i) {
    const uint8_t* got = i % 3 == 2 ? dst->ptr() + i * 64 : rdst.ptr() + i * 64;
    const uint8_t* want = i % 3 == 2 ? src->ptr() + i * 64 : rsrc.ptr() + i * 64;
    ASSERT_EQ(std::memcmp(got, want, 64), 0) << i;
  }
  // Copies of responses to finished READs match no unfinished WQE.
  EXPECT_GT(a.eng->counters().get(RcCounter::kRxGhostResponse), ghosts0);
  EXPECT_GT(a.eng->counters().get(RcCounter::kGoBackN), gobacks0);
  EXPECT_EQ(qa->qp->comp.unacked_psn, qa->qp->req.max_psn_sent);
  EXPECT_EQ(qa->qp->req.rd_atomic_outstanding, 0u);
  EXPECT_EQ(qa->qp->state(), QpState::kRts);
  EXPECT_EQ(qb->qp->state(), QpState::kRts);
}

// One READ may ask for far more response packets than the window holds PSNs: at MTU 256 a
// 17 MiB READ reserves 69,632 PSNs. Its early responses are far behind the last PSN sent and
// must not be taken for stale ones (ghosts); the READ completes byte-exact without a resend.
TEST_F(Loss, AReadOfMorePsnsThanTheWindowAndItsMarginCompletes) {
  o.mtu = 256;
  make();
  constexpr uint32_t kLen = 17u << 20;
  Buffer& rsrc = b.buffer(kLen, kMrAll, 0);
  fill_pattern(rsrc.ptr(), kLen, 21);
  Buffer& rdst = a.buffer(kLen, kMrAll, 0);
  ASSERT_EQ(qa->sq->post(read_wqe(tag(posted), rdst, rsrc, kLen)), STATUS_SUCCESS);
  ++posted;
  a.log.clear();
  b.log.clear();
  ASSERT_TRUE(w.run_until([&] {
    a.log.clear();  // 69,632 responses: keep the harness's copies small
    b.log.clear();
    return all_done();
  }));
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(rdst.ptr(), rsrc.ptr(), kLen), 0);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRxGhostResponse), 0u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kGoBackN), 0u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), 0u);
}

// A READ asking for more than 2^22 response packets (1 GiB at MTU 256) would put its PSNs past
// half the PSN space: it fails locally (length error) and sends nothing.
TEST_F(Loss, AReadOfMoreThanTwoToThe22PacketsFailsLocally) {
  o.mtu = 256;
  make();
  Buffer& rdst = a.buffer(4096, kMrAll, 0);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(posted), {rdst.sge(0, 4096)});
  rd.sge[0].length = (1u << 30) + 1;  // never touched: the length is refused first
  rd.remote_address = dst->va();
  rd.remote_token = dst->tokens.remote;
  ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
  ++posted;
  a.eng->poll_st(w.now);
  EXPECT_TRUE(a.tx.empty()) << "nothing may be sent";
  ASSERT_TRUE(all_done());
  EXPECT_EQ(done[0].status, STATUS_DATA_OVERRUN);
  EXPECT_EQ(done[0].provider_error_code, 1u) << "local length";
}

// A timeout whose probe is a READ: the probe's answer is its last response. The responses
// before it (here four receive bursts of them) are progress, not the answer: the requester must
// not ask again for the rest of the READ while they arrive.
TEST_F(Loss, AReadProbesResponsesBeforeItsLastAskForNothingMore) {
  make();
  warm_up();
  constexpr uint32_t kLen = 256 * 1024;  // 256 responses at MTU 1024: 4 polls of the responder
  Buffer& rsrc = b.buffer(kLen, kMrAll, 0);
  fill_pattern(rsrc.ptr(), kLen, 5);
  Buffer& rdst = a.buffer(kLen, kMrAll, 0);
  int requests = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    if (!ab || p.f.bth.opcode != kRcReadRequest) return false;
    return ++requests == 1;  // the first request is lost: the timer's probe sends it again
  };
  ASSERT_EQ(qa->sq->post(read_wqe(tag(posted), rdst, rsrc, kLen)), STATUS_SUCCESS);
  ++posted;
  const uint64_t timeouts0 = a.eng->counters().get(RcCounter::kAckTimeouts);
  run_timed();
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(rdst.ptr(), rsrc.ptr(), kLen), 0);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), timeouts0 + 1);
  EXPECT_EQ(requests, 2) << "the lost request and the probe, no request for the rest";
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDuplicate), 0u);
}

// A response past an unfinished atomic means the atomic's answer was lost (the responder answers
// in PSN order): the requester asks again at once, as for an ACK past it, not after a timeout.
TEST_F(Loss, AResponsePastALostAtomicAckAsksAgainAtOnce) {
  make();
  warm_up();
  Buffer& word = b.buffer(8);
  Buffer& orig = a.buffer(8);
  Buffer& rsrc = b.buffer(64, kMrAll, 0);
  fill_pattern(rsrc.ptr(), 64, 9);
  Buffer& rdst = a.buffer(64, kMrAll, 0);
  ASSERT_EQ(qa->sq->post(fetch_add_wqe(tag(posted), orig, word, 5)), STATUS_SUCCESS);
  ++posted;
  ASSERT_EQ(qa->sq->post(read_wqe(tag(posted), rdst, rsrc, 64)), STATUS_SUCCESS);
  ++posted;
  int acks = 0;
  w.drop_if = [&](bool ab, const wire::ParsedPacket& p) {
    return !ab && p.f.bth.opcode == kRcAtomicAck && ++acks == 1;
  };
  const uint64_t timeouts0 = a.eng->counters().get(RcCounter::kAckTimeouts);
  const uint64_t ghosts0 = a.eng->counters().get(RcCounter::kRxGhostResponse);
  // No idle time jumps: everything must finish on the responses alone, before any timer.
  for (int i = 0; i < 20 && !all_done(); ++i) w.step();
  ASSERT_TRUE(all_done());
  expect_in_order_success();
  EXPECT_EQ(acks, 2) << "the lost ATOMIC ACK and the replayed one";
  uint64_t v = 0;
  std::memcpy(&v, word.ptr(), 8);
  EXPECT_EQ(v, 5u) << "executed once";
  EXPECT_EQ(done[done.size() - 2].type_specific_completion_output, 0u)
      << "the original value, replayed";
  EXPECT_EQ(std::memcmp(rdst.ptr(), rsrc.ptr(), 64), 0);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), timeouts0);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRxGhostResponse), ghosts0);
}

// Sustained random loss (10% of frames, both directions) with a small retry count: each
// recovery that makes progress restores the budget, and the adaptive timer's early expiries are
// free, so thousands of loss events never exhaust three retries.
TEST_F(Loss, SustainedRandomLossNeverExhaustsTheRetryBudget) {
  make(kDefaultMaxUnackedPsns, /*retry=*/3);
  Faults f;
  f.drop = 0.10;
  w.faults = &f;
  for (int round = 0; round < 20; ++round) {
    for (uint32_t i = 0; i < 100; ++i) write(i * 4096, 4096);
    ASSERT_TRUE(w.run_until([&] { return all_done() || qa->qp->state() != QpState::kRts; }));
    ASSERT_EQ(qa->qp->state(), QpState::kRts) << "round " << round;
  }
  expect_in_order_success();
  EXPECT_EQ(std::memcmp(src->ptr(), dst->ptr(), 100 * 4096), 0);
  EXPECT_GT(qa->qp->stats.timeouts, 20u);
  EXPECT_GT(qa->qp->stats.naks_received, 20u);
}

// The peer vanishes mid-stream: the retry budget still runs out, after at least retry_count + 1
// expiries of the full local ACK timeout, with the documented status (STATUS_IO_TIMEOUT, provider
// code 12 RETRY_EXC_ERR) for the oldest request and STATUS_CANCELLED for the rest, in order.
TEST_F(Loss, RetryExhaustionAfterTrafficEndsInIoTimeout) {
  make(kDefaultMaxUnackedPsns, /*retry=*/2);
  warm_up();
  const size_t before = done.size();
  for (uint32_t i = 0; i < 8; ++i) write(i * 1024, 1024);
  w.drop_all = true;
  const uint64_t t0 = w.now;
  ASSERT_TRUE(w.run_until([&] { return all_done(); }, 100'000));
  const uint64_t elapsed = w.now - t0;
  ASSERT_EQ(done.size(), before + 8);
  EXPECT_EQ(done[before].status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(done[before].provider_error_code, 12u);
  EXPECT_EQ(done[before].request_context, tag(before));
  for (size_t i = before + 1; i < done.size(); ++i) {
    EXPECT_EQ(done[i].status, STATUS_CANCELLED);
    EXPECT_EQ(done[i].request_context, tag(i));
  }
  EXPECT_EQ(qa->qp->state(), QpState::kError);
  EXPECT_GE(elapsed, 3 * kFullTimeoutNs) << "retry_count + 1 full local ACK timeouts";
  EXPECT_LT(elapsed, 5 * kFullTimeoutNs + 10'000'000)
      << "plus the probes before the timer reached its cap";
  EXPECT_EQ(
      a.eng->counters().get(RcCounter::kAckTimeouts) - a.eng->counters().get(RcCounter::kRtoProbes),
      3u);
}

}  // namespace
}  // namespace rocedp::rc::test

namespace rocedp::rc::test {
namespace {

// A requester that asks for an ACK only at message ends and every 64 packets (Linux rxe) may
// pause in mid-message (a busy host). The responder coalesces ACKs but does not hold them: the
// packets it executed are acknowledged kDelayedAckNs after the first one, not when the
// requester's ACK timer (tens of ms) runs out and it resends them.
class DelayedAck : public ::testing::Test {
 protected:
  void SetUp() override {
    connect(a, qa, b, qb, ConnectOptions{});
    fill_pattern(src.ptr(), 8192, 3);
  }
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Qp& qa = a.qp(64, 64, 8192);
  Qp& qb = b.qp(64, 64, 8192);
  Buffer& src = a.buffer(8192);
  Buffer& dst = b.buffer(8192, kMrAll, 0);
};

TEST_F(DelayedAck, PacketsWithoutAckReqAreAcknowledgedWithinTheDelay) {
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(1), {src.sge(0, 4096)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa.sq->post(wr), STATUS_SUCCESS);
  uint64_t now = 1'000'000;
  a.eng->poll_st(now);
  ASSERT_EQ(a.tx.size(), 4u) << "FIRST, MIDDLE, MIDDLE, LAST at MTU 1024";
  // The first two packets arrive (no AckReq on either); the rest is late.
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(parse_frame(a.tx[i]).f.bth.ack_req);
  std::vector<wire::Bytes> in = {wire::Bytes(a.tx[0]), wire::Bytes(a.tx[1])};
  ASSERT_EQ(b.eng->rx_burst_st(in, now), 2u);
  b.eng->poll_st(now);
  EXPECT_TRUE(b.tx.empty()) << "coalescing: no ACK at once";
  b.eng->poll_st(now + kDelayedAckNs / 2);
  EXPECT_TRUE(b.tx.empty());
  b.eng->poll_st(now + kDelayedAckNs + 1);
  ASSERT_EQ(b.tx.size(), 1u) << "the delayed ACK is due";
  const wire::ParsedPacket ack = parse_frame(b.tx[0]);
  EXPECT_EQ(ack.f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(ack.f.bth.psn, parse_frame(a.tx[1]).f.bth.psn) << "covers what executed, no more";
  EXPECT_EQ(ack.f.aeth.syndrome & wire::kAethTypeMask, wire::kAethAck);
  b.tx.clear();
  b.eng->poll_st(now + 10 * kDelayedAckNs);
  EXPECT_TRUE(b.tx.empty()) << "one ACK per delay, not one per poll";
  // The rest arrives: LAST carries AckReq and is acknowledged at once.
  in = {wire::Bytes(a.tx[2]), wire::Bytes(a.tx[3])};
  ASSERT_EQ(b.eng->rx_burst_st(in, now + 10 * kDelayedAckNs), 2u);
  b.eng->poll_st(now + 10 * kDelayedAckNs);  // a burst of two: the ACK waits one poll (AckHold)
  b.eng->poll_st(now + 10 * kDelayedAckNs);
  ASSERT_EQ(b.tx.size(), 1u);
  EXPECT_EQ(parse_frame(b.tx[0]).f.bth.psn, parse_frame(a.tx[3]).f.bth.psn);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 4096), 0);
}

// Packets without AckReq that follow, in the same burst, one that asked for an ACK: that ACK
// covers only its own PSN, and the ones after it still get their delayed ACK (a requester that
// pauses mid-message must not time out on them).
TEST_F(DelayedAck, PacketsAfterAnAcknowledgedOneInTheSameBurstStillGetTheirDelayedAck) {
  ASSERT_EQ(qa.sq->post(write_wqe(tag(1), src, dst, 0, 1024)), STATUS_SUCCESS);
  ASSERT_EQ(qa.sq->post(write_wqe(tag(2), src, dst, 1024, 4096)), STATUS_SUCCESS);
  uint64_t now = 1'000'000;
  a.eng->poll_st(now);
  ASSERT_EQ(a.tx.size(), 5u) << "ONLY, then FIRST, MIDDLE, MIDDLE, LAST at MTU 1024";
  ASSERT_TRUE(parse_frame(a.tx[0]).f.bth.ack_req);
  // The WRITE ONLY and the next message's first two packets arrive in one burst; the rest is late.
  std::vector<wire::Bytes> in = {wire::Bytes(a.tx[0]), wire::Bytes(a.tx[1]), wire::Bytes(a.tx[2])};
  ASSERT_EQ(b.eng->rx_burst_st(in, now), 3u);
  b.eng->poll_st(now);
  ASSERT_EQ(b.tx.size(), 1u);
  EXPECT_EQ(parse_frame(b.tx[0]).f.bth.psn, parse_frame(a.tx[0]).f.bth.psn) << "asked for";
  b.tx.clear();
  b.eng->poll_st(now + kDelayedAckNs + 1);
  ASSERT_EQ(b.tx.size(), 1u) << "the delayed ACK of the two after it is due";
  const wire::ParsedPacket ack = parse_frame(b.tx[0]);
  EXPECT_EQ(ack.f.bth.psn, parse_frame(a.tx[2]).f.bth.psn);
  EXPECT_EQ(ack.f.aeth.syndrome & wire::kAethTypeMask, wire::kAethAck);
}

}  // namespace
}  // namespace rocedp::rc::test

namespace rocedp::rc::test {
namespace {

// A receive burst of one or two frames is a request-response exchange: the ACK a request asked
// for waits one poll, so that the answer the consumer posts on seeing it leaves first and the
// ACK's frame is off the round trip. A larger burst (load) is acknowledged at once, and a NAK
// never waits.
class AckHold : public ::testing::Test {
 protected:
  void SetUp() override { connect(a, qa, b, qb, ConnectOptions{}); }
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Qp& qa = a.qp();
  Qp& qb = b.qp();
};

TEST_F(AckHold, ALoneRequestsAckLeavesAfterTheConsumersAnswer) {
  Buffer& abuf = a.buffer(128);
  Buffer& bbuf = b.buffer(128);
  ASSERT_EQ(qb.rq->post(recv_wqe(tag(1), {bbuf.sge(0, 64)})), STATUS_SUCCESS);
  ASSERT_EQ(qa.rq->post(recv_wqe(tag(2), {abuf.sge(64, 64)})), STATUS_SUCCESS);
  ASSERT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(3), {abuf.sge(0, 64)})), STATUS_SUCCESS);
  uint64_t now = 1'000'000;
  a.eng->poll_st(now);
  ASSERT_EQ(a.tx.size(), 1u);
  const uint32_t request_psn = parse_frame(a.tx[0]).f.bth.psn;
  Wire::deliver(b, a.tx, now);
  a.tx.clear();
  b.eng->poll_st(now);
  EXPECT_TRUE(b.tx.empty()) << "the ACK waits one poll";
  ASSERT_EQ(qb.recv_cqes().size(), 1u) << "the receive completed at once";
  // The consumer answers, and the next poll sends the answer, then the ACK.
  ASSERT_EQ(qb.sq->post(send_wqe(SendOpcode::kSend, tag(4), {bbuf.sge(64, 64)})), STATUS_SUCCESS);
  b.eng->poll_st(now + 1000);
  ASSERT_EQ(b.tx.size(), 2u);
  EXPECT_EQ(parse_frame(b.tx[0]).f.bth.opcode, wire::opcode::kRcSendOnly);
  const wire::ParsedPacket ack = parse_frame(b.tx[1]);
  EXPECT_EQ(ack.f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(ack.f.bth.psn, request_psn);
  Wire::deliver(a, b.tx, now + 2000);
  b.tx.clear();
  a.eng->poll_st(now + 2000);
  EXPECT_EQ(qa.send_cqes().size(), 1u);
  EXPECT_EQ(qa.recv_cqes().size(), 1u);
  // With nothing to answer, the held ACK still leaves on the next poll.
  a.eng->poll_st(now + 3000);
  ASSERT_EQ(a.tx.size(), 1u);
  EXPECT_EQ(parse_frame(a.tx[0]).f.bth.opcode, wire::opcode::kRcAck);
  Wire::deliver(b, a.tx, now + 4000);
  b.eng->poll_st(now + 4000);
  EXPECT_EQ(qb.send_cqes().size(), 1u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kAckTimeouts), 0u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kAckTimeouts), 0u);
}

// An answer posted before the poll's visit (rocedpd's echo posts from the CQ notification that
// the receive burst fires) leaves in that poll, and the ACK right after it.
TEST_F(AckHold, AnAnswerPostedDuringTheBurstLeavesFirstInTheSamePoll) {
  Buffer& abuf = a.buffer(64);
  Buffer& bbuf = b.buffer(128);
  ASSERT_EQ(qb.rq->post(recv_wqe(tag(1), {bbuf.sge(0, 64)})), STATUS_SUCCESS);
  ASSERT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(2), {abuf.sge(0, 64)})), STATUS_SUCCESS);
  uint64_t now = 1'000'000;
  a.eng->poll_st(now);
  ASSERT_EQ(a.tx.size(), 1u);
  Wire::deliver(b, a.tx, now);
  ASSERT_EQ(qb.recv_cqes().size(), 1u);
  ASSERT_EQ(qb.sq->post(send_wqe(SendOpcode::kSend, tag(3), {bbuf.sge(64, 64)})), STATUS_SUCCESS);
  b.eng->poll_st(now);
  ASSERT_EQ(b.tx.size(), 2u) << "the answer and the ACK in the poll of the request";
  EXPECT_EQ(parse_frame(b.tx[0]).f.bth.opcode, wire::opcode::kRcSendOnly);
  EXPECT_EQ(parse_frame(b.tx[1]).f.bth.opcode, wire::opcode::kRcAck);
  EXPECT_EQ(parse_frame(b.tx[1]).f.bth.psn, parse_frame(a.tx[0]).f.bth.psn);
}

TEST_F(AckHold, ABurstOfThreeIsAcknowledgedAtOnceAndANakNeverWaits) {
  Buffer& src = a.buffer(64 * 5);
  Buffer& dst = b.buffer(64 * 5);
  for (uint32_t i = 0; i < 5; ++i) {
    SendWqe w = send_wqe(SendOpcode::kWrite, tag(10 + i), {src.sge(64 * i, 64)});
    w.remote_address = dst.va() + 64 * i;
    w.remote_token = dst.tokens.remote;
    ASSERT_EQ(qa.sq->post(w), STATUS_SUCCESS);
  }
  uint64_t now = 1'000'000;
  a.eng->poll_st(now);
  ASSERT_EQ(a.tx.size(), 5u);
  std::vector<wire::Bytes> in = {wire::Bytes(a.tx[0]), wire::Bytes(a.tx[1]), wire::Bytes(a.tx[2])};
  ASSERT_EQ(b.eng->rx_burst_st(in, now), 3u);
  b.eng->poll_st(now);
  ASSERT_EQ(b.tx.size(), 1u) << "a burst of three: the ACK leaves in the same poll";
  EXPECT_EQ(parse_frame(b.tx[0]).f.bth.psn, parse_frame(a.tx[2]).f.bth.psn);
  b.tx.clear();
  // The fifth alone, the fourth missing: the sequence NAK goes at once.
  in = {wire::Bytes(a.tx[4])};
  ASSERT_EQ(b.eng->rx_burst_st(in, now + 1000), 1u);
  b.eng->poll_st(now + 1000);
  ASSERT_EQ(b.tx.size(), 1u) << "a NAK never waits";
  const wire::ParsedPacket nak = parse_frame(b.tx[0]);
  EXPECT_EQ(nak.f.aeth.syndrome & wire::kAethTypeMask, wire::kAethNak);
  EXPECT_EQ(nak.f.bth.psn, parse_frame(a.tx[3]).f.bth.psn) << "the PSN it expects";
}

// The retransmission timer measures from the last progress (IBTA local ACK timeout; here its
// adaptive RTO): READ responses that keep coming, each a little less than one RTO after the one
// before, never let it expire, however long the READ takes in all; when they stop, it expires
// exactly one RTO after the last one.
TEST(RetransmitTimer, ReadResponsesRestartItAndItExpiresOneRtoAfterTheLast) {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Qp& qa = a.qp(64, 64, 8192);
  Qp& qb = b.qp(64, 64, 8192);
  ConnectOptions o;
  o.timeout = kTimeout14;
  connect(a, qa, b, qb, o);
  constexpr uint32_t kPackets = 8;
  constexpr uint32_t kLen = kPackets * 1024;
  Buffer& src = b.buffer(kLen, kMrAll, 0);
  fill_pattern(src.ptr(), kLen, 5);
  Buffer& dst = a.buffer(kLen, kMrAll, 0);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(1), {dst.sge(0, kLen)});
  rd.remote_address = src.va();
  rd.remote_token = src.tokens.remote;
  ASSERT_EQ(qa.sq->post(rd), STATUS_SUCCESS);

  uint64_t now = 1'000'000;
  a.eng->poll_st(now);
  ASSERT_EQ(a.tx.size(), 1u);
  const uint32_t first_psn = parse_frame(a.tx[0]).f.bth.psn;
  Wire::deliver(b, a.tx, now);
  a.tx.clear();
  b.eng->poll_st(now);
  ASSERT_EQ(b.tx.size(), kPackets);
  std::vector<Frame> responses = std::move(b.tx);
  b.tx.clear();

  // Every response but the last, each 0.9 RTO after the previous progress: the READ takes
  // several RTOs in all and the timer never fires.
  uint64_t progress = now;
  for (uint32_t i = 0; i + 1 < kPackets; ++i) {
    const uint64_t at = progress + current_rto_ns(*qa.qp) * 9 / 10;
    a.eng->poll_st(at - 1);
    std::vector<Frame> one = {responses[i]};
    Wire::deliver(a, one, at);
    a.eng->poll_st(at);
    progress = at;
    ASSERT_EQ(qa.qp->stats.timeouts, 0u) << "response " << i;
    ASSERT_TRUE(a.tx.empty()) << "response " << i;
  }
  EXPECT_GT(progress - now, 3 * kRtoInitialNs);
  // The last response is lost: the timer expires one RTO after the last progress.
  const uint64_t deadline = progress + current_rto_ns(*qa.qp);
  a.eng->poll_st(deadline - 1);
  EXPECT_EQ(qa.qp->stats.timeouts, 0u) << "not before one RTO";
  EXPECT_TRUE(a.tx.empty());
  a.eng->poll_st(deadline);
  EXPECT_EQ(qa.qp->stats.timeouts, 1u) << "at one RTO";
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRtoProbes), 1u);
  ASSERT_EQ(a.tx.size(), 1u) << "the probe";
  const wire::ParsedPacket probe = parse_frame(a.tx[0]);
  EXPECT_EQ(probe.f.bth.opcode, kRcReadRequest);
  EXPECT_EQ(probe.f.bth.psn, wire::psn_add(first_psn, kPackets - 1)) << "resumes at the missing";

  // The probe's answer completes the READ.
  Wire::deliver(b, a.tx, deadline);
  a.tx.clear();
  b.eng->poll_st(deadline);
  ASSERT_EQ(b.tx.size(), 1u);
  Wire::deliver(a, b.tx, deadline);
  a.eng->poll_st(deadline);
  const auto cqes = qa.send_cqes();
  ASSERT_EQ(cqes.size(), 1u);
  EXPECT_EQ(cqes[0].status, STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), kLen), 0);
}

// Two QP pairs between two engines, one path: the "slow" pair sets the path's RTT, the other
// (`own`) is timed against it.
class PathRto : public ::testing::Test {
 protected:
  void connect_pairs(uint8_t own_timeout) {
    ConnectOptions o;
    o.timeout = kTimeout14;
    connect(a, slow_a, b, slow_b, o);
    o.timeout = own_timeout;
    connect(a, own_a, b, own_b, o);
  }
  void write(Qp& q, Buffer& dst, uint64_t id) {
    SendWqe w = send_wqe(SendOpcode::kWrite, tag(id), {src.sge(0, 64)});
    w.remote_address = dst.va();
    w.remote_token = dst.tokens.remote;
    ASSERT_EQ(q.sq->post(w), STATUS_SUCCESS);
  }
  // One round trip of `rtt` ns for a WRITE on `q` to `peer` (b unless named), sent at `at`.
  void round_trip(Qp& q, Buffer& dst, uint64_t id, uint64_t at, uint64_t rtt) {
    round_trip(b, q, dst, id, at, rtt);
  }
  void round_trip(Host& peer, Qp& q, Buffer& dst, uint64_t id, uint64_t at, uint64_t rtt) {
    write(q, dst, id);
    a.eng->poll_st(at);
    ASSERT_EQ(a.tx.size(), 1u);
    Wire::deliver(peer, a.tx, at + rtt / 2);
    a.tx.clear();
    peer.eng->poll_st(at + rtt / 2);
    peer.eng->poll_st(at + rtt / 2);  // a lone request's ACK leaves on the next poll (AckHold)
    ASSERT_EQ(peer.tx.size(), 1u) << "the ACK";
    Wire::deliver(a, peer.tx, at + rtt);
    peer.tx.clear();
    a.eng->poll_st(at + rtt);
  }
  // A WRITE on `q` (the own QP unless named) that is lost: sent at `at`, never delivered.
  void lose_write(uint64_t id, uint64_t at) { lose_write(own_a, dst_own, id, at); }
  void lose_write(Qp& q, Buffer& dst, uint64_t id, uint64_t at) {
    write(q, dst, id);
    a.eng->poll_st(at);
    ASSERT_EQ(a.tx.size(), 1u);
    a.tx.clear();
  }

  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Qp& slow_a = a.qp(64, 64, 4096);
  Qp& slow_b = b.qp(64, 64, 4096);
  Qp& own_a = a.qp(64, 64, 4096);
  Qp& own_b = b.qp(64, 64, 4096);
  Buffer& src = a.buffer(64, kMrAll, 0);
  Buffer& dst_slow = b.buffer(64, kMrAll, 0);
  Buffer& dst_own = b.buffer(64, kMrAll, 0);
  // A second peer, near: its own path.
  Host c{0, 0xC6120003, 3};
  Qp& near_a = a.qp(64, 64, 4096);
  Qp& near_c = c.qp(64, 64, 4096);
  Buffer& dst_near = c.buffer(64, kMrAll, 0);
};

// The QPs to one peer share a path: a QP's retransmission timer never runs shorter than the RTO
// of that path, which every such QP's samples feed. A QP whose own sample says 10 µs, while another
// QP's says the path takes 5 ms, does not time out 100 µs after a send (at 100,000 QPs 9 % of
// the packets were resent by such timeouts); it still times out once the path's RTO has passed.
TEST_F(PathRto, AQpWaitsAtLeastThePathsRto) {
  connect_pairs(kTimeout14);
  uint64_t now = 1'000'000;
  round_trip(slow_a, dst_slow, 1, now, 5'000'000);  // the path: 5 ms
  now += 5'000'000;
  round_trip(own_a, dst_own, 2, now, 10'000);  // this QP's own sample: 10 µs
  now += 10'000;
  ASSERT_EQ(own_a.send_cqes().size(), 1u);
  EXPECT_LE(current_rto_ns(*own_a.qp), kRtoMinNs) << "its own estimate alone";
  EXPECT_GE(a.eng->path_rto_ns(*own_a.qp), 5'000'000u) << "the path's RTO";
  EXPECT_EQ(current_rto_ns(*own_a.qp, a.eng->path_rto_ns(*own_a.qp)), a.eng->path_rto_ns(*own_a.qp))
      << "what the timer waits (telemetry's rto_us)";

  // The next WRITE is lost. 1 ms later (10 of its own RTOs) nothing has timed out.
  lose_write(3, now);
  a.eng->poll_st(now + 1'000'000);
  EXPECT_EQ(own_a.qp->stats.timeouts, 0u) << "not within the path's round trip";
  EXPECT_TRUE(a.tx.empty());
  // The path's RTO (srtt + 4 x rttvar of both samples, about 17 ms) is below the local ACK
  // timeout (67 ms): by 30 ms the QP has timed out and probes.
  a.eng->poll_st(now + 30'000'000);
  EXPECT_EQ(own_a.qp->stats.timeouts, 1u) << "by the path's RTO";
  ASSERT_EQ(a.tx.size(), 1u) << "the probe";
  EXPECT_EQ(slow_a.qp->stats.timeouts, 0u);
}

// The path's RTO never lifts a QP's timer past the QP's own local ACK timeout: a QP whose peer
// agreed to 4.2 ms times out at 4.2 ms (a full timeout: it consumes a retry) although the path's
// RTO, which the other pair's 5 ms round trip set, is about 17 ms.
TEST_F(PathRto, ThePathsRtoStopsAtTheQpsAckTimeout) {
  connect_pairs(10);  // 4.096 µs × 2^10 = 4.19 ms
  const uint64_t full = *local_ack_timeout_ns(10);
  uint64_t now = 1'000'000;
  round_trip(slow_a, dst_slow, 1, now, 5'000'000);
  now += 5'000'000;
  ASSERT_EQ(slow_a.send_cqes().size(), 1u);
  ASSERT_GT(a.eng->path_rto_ns(*own_a.qp), full) << "the path's RTO is above the QP's timeout";
  EXPECT_EQ(current_rto_ns(*own_a.qp, a.eng->path_rto_ns(*own_a.qp)), full);

  // A WRITE on the QP is lost: it times out by its own 4.19 ms, not by the path's RTO.
  const uint8_t retries = own_a.qp->comp.retry_left;
  lose_write(2, now);
  a.eng->poll_st(now + full - 1'000);
  EXPECT_EQ(own_a.qp->stats.timeouts, 0u) << "not before its ACK timeout";
  a.eng->poll_st(now + full + 1'000);
  EXPECT_EQ(own_a.qp->stats.timeouts, 1u) << "at its ACK timeout, not the path's RTO";
  EXPECT_EQ(own_a.qp->comp.retry_left, retries - 1) << "a full timeout consumes a retry";
  EXPECT_EQ(a.tx.size(), 1u) << "the WRITE again";
}

// The path is the peer's: a QP to a near peer is not held back by another peer's slow path on
// the same engine. Its lost WRITE times out by its own path's RTO (100 µs), where one more QP to
// the slow peer would wait about 17 ms (AQpWaitsAtLeastThePathsRto).
TEST_F(PathRto, EachPeerHasItsOwnPath) {
  connect_pairs(kTimeout14);
  ConnectOptions o;
  o.timeout = kTimeout14;
  // Through the engine, as the polling cores connect: the QP has its path's slot at once.
  const QpConnectParams to_c = params_for(a, near_a, c, near_c, o.a_psn, o.b_psn, o);
  EXPECT_EQ(a.eng->connect_qp(near_c.qp->qpn() + 1000, to_c), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(a.eng->connect_qp(near_a.qp->qpn(), to_c), STATUS_SUCCESS);
  ASSERT_EQ(near_c.qp->connect(params_for(c, near_c, a, near_a, o.b_psn, o.a_psn, o)),
            STATUS_SUCCESS);
  EXPECT_EQ(near_a.qp->comp.path, a.eng->paths().find(c.ip));
  EXPECT_NE(near_a.qp->comp.path, 0u);
  uint64_t now = 1'000'000;
  round_trip(slow_a, dst_slow, 1, now, 5'000'000);  // the path to b: 5 ms
  now += 5'000'000;
  round_trip(c, near_a, dst_near, 2, now, 10'000);  // the path to c: 10 µs
  now += 10'000;
  ASSERT_EQ(near_a.send_cqes().size(), 1u);
  EXPECT_EQ(a.eng->paths().peers(), 2u);
  EXPECT_GE(a.eng->path_rto_ns(*slow_a.qp), 5'000'000u) << "b's path";
  EXPECT_GE(a.eng->path_rto_ns(*own_a.qp), 5'000'000u) << "b's path, before own_a sent anything";
  EXPECT_EQ(a.eng->path_of(*near_a.qp).srtt_ns, 10'000u) << "c's path: its one sample";
  EXPECT_EQ(a.eng->path_of(*slow_a.qp).srtt_ns, 5'000'000u) << "b's path: its one sample";
  EXPECT_EQ(a.eng->path_rto_ns(*near_a.qp), kRtoMinNs) << "c's path: its one 10 µs sample";
  EXPECT_EQ(current_rto_ns(*near_a.qp, a.eng->path_rto_ns(*near_a.qp)), kRtoMinNs);

  lose_write(near_a, dst_near, 3, now);
  a.eng->poll_st(now + kRtoMinNs - 1'000);
  EXPECT_EQ(near_a.qp->stats.timeouts, 0u);
  a.eng->poll_st(now + 1'000'000);
  EXPECT_EQ(near_a.qp->stats.timeouts, 1u) << "by c's path, not b's";
  EXPECT_EQ(a.tx.size(), 1u) << "the probe";
  EXPECT_EQ(slow_a.qp->stats.timeouts, 0u);

  // The last QP to c gives the slot back; b's QPs keep theirs.
  const uint32_t c_ip = near_a.qp->remote_ip();
  ASSERT_EQ(a.eng->destroy_qp(near_a.qp->qpn()), STATUS_SUCCESS);
  EXPECT_EQ(a.eng->paths().find(c_ip), 0u);
  EXPECT_EQ(a.eng->paths().peers(), 1u);
  EXPECT_GE(a.eng->path_rto_ns(*slow_a.qp), 5'000'000u);
}

}  // namespace
}  // namespace rocedp::rc::test
