// Congestion control of the RC engine (dataplane/rc/congestion.hpp) over the in-memory wire of
// rc_harness.hpp, with the wire as a congested switch that marks CE: the notification point's
// CNPs as a peer sees them on the wire, the reaction point's rate cut, pacing and recovery, and
// the bytes delivered exactly once throughout.

#include "dataplane/rc/congestion.hpp"
#include "dataplane/rc/transmit.hpp"
#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

constexpr uint32_t kMsg = 1024;
constexpr uint32_t kSlots = 512;  // WRITEs cycle over this many 1 KiB slots of the buffers
constexpr uint8_t kCnpTos = 48 << 2;
constexpr uint32_t kLineMbps = 10'000;

class Congestion : public ::testing::Test {
 protected:
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Buffer* src = nullptr;
  Buffer* dst = nullptr;
  uint64_t posted = 0;
  std::vector<NdkResultEx> done;

  void make(uint8_t a_tos, uint32_t window = kDefaultMaxUnackedPsns, uint8_t b_tos = 0,
            const config::DcqcnConfig* dcqcn = nullptr, bool ipv6 = false, bool vlan = false) {
    ConnectOptions o;
    o.ipv6 = ipv6;
    o.vlan_tag_bytes = vlan ? static_cast<uint8_t>(wire::kVlanTagLen) : 0;
    o.a_tos = a_tos;
    o.b_tos = b_tos;
    o.dcqcn = dcqcn;
    o.cnp_tos = kCnpTos;
    o.line_rate_mbps = kLineMbps;
    qa = &a.qp(kSlots, kSlots, 8192, window);
    qb = &b.qp(kSlots, kSlots, 8192, window);
    connect(a, *qa, b, *qb, o);
    src = &a.buffer(kSlots * kMsg);
    dst = &b.buffer(kSlots * kMsg, kMrAll, 0);
    fill_pattern(src->ptr(), kSlots * kMsg, 11);
  }
  // WRITEs of kMsg bytes, slot by slot, until `outstanding` are posted and not completed.
  void top_up(uint64_t outstanding) {
    collect();
    while (posted - done.size() < outstanding) {
      const uint32_t off = static_cast<uint32_t>(posted % kSlots) * kMsg;
      ASSERT_EQ(qa->sq->post(write_wqe(tag(posted), *src, *dst, off, kMsg)), STATUS_SUCCESS);
      ++posted;
    }
  }
  void collect() {
    auto s = qa->send_cqes();
    done.insert(done.end(), s.begin(), s.end());
  }
  bool all_done() {
    collect();
    return done.size() == posted;
  }
  // Every WRITE completed once, in order, and the destination holds the source's bytes.
  void expect_delivered() {
    ASSERT_EQ(done.size(), posted);
    for (size_t i = 0; i < done.size(); ++i) {
      ASSERT_EQ(done[i].status, STATUS_SUCCESS) << i;
      ASSERT_EQ(done[i].request_context, tag(i)) << "posting order, exactly once";
    }
    const size_t n = std::min<uint64_t>(posted, kSlots) * kMsg;
    EXPECT_EQ(std::memcmp(dst->ptr(), src->ptr(), n), 0);
  }
  // Bytes A sent while `rounds` rounds of the wire ran with its queue kept full, in Mbit/s.
  double run_loaded(int rounds) {
    uint64_t bytes = 0;
    const uint64_t t0 = w.now;
    for (int i = 0; i < rounds; ++i) {
      top_up(256);
      const size_t before = a.log.size();
      if (!w.step()) w.now += 1'000;  // paced and waiting: the time its clock asks for passes
      for (size_t f = before; f < a.log.size(); ++f) bytes += a.log[f].size();
    }
    return static_cast<double>(bytes) * 8 * 1000 / static_cast<double>(w.now - t0);
  }
  std::vector<wire::ParsedPacket> cnps_from(const Host& h) {
    std::vector<wire::ParsedPacket> out;
    for (const Frame& f : h.log) {
      wire::ParsedPacket p = parse_frame(f);
      if (p.f.bth.opcode == wire::opcode::kCnp) out.push_back(p);
    }
    return out;
  }
};

// B's responder sees A's WRITEs marked CE and answers with CNPs: BECN set, to A's QP, PSN 0, 16
// zero bytes, a valid ICRC (parse checks it), the CNP DSCP, and at most one per 4 µs. A's QP is not
// ECN-capable, so it counts them and keeps its rate.
TEST_F(Congestion, CeMarkedRequestsAreAnsweredWithCnpsAtMostOnePerInterval) {
  make(0);
  w.mark_ce_if = [](bool ab) { return ab; };
  const uint64_t t0 = w.now;
  top_up(300);
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  expect_delivered();

  const auto cnps = cnps_from(b);
  ASSERT_GE(cnps.size(), 1u);
  for (const wire::ParsedPacket& p : cnps) {
    EXPECT_TRUE(p.f.bth.becn);
    EXPECT_FALSE(p.f.bth.fecn);
    EXPECT_EQ(p.f.bth.dqpn, qa->qp->qpn());
    EXPECT_EQ(p.f.bth.psn, 0u);
    EXPECT_FALSE(p.f.bth.ack_req);
    EXPECT_EQ(p.payload_len, wire::kCnpReservedLen);
    EXPECT_EQ(p.f.ip.tos, kCnpTos) << "the CNP DSCP, not ECN-capable";
    EXPECT_EQ(p.f.ip.src, b.ip);
    EXPECT_EQ(p.f.ip.dst, a.ip);
  }
  const RcCounters& bc = b.eng->counters();
  EXPECT_EQ(bc.get(RcCounter::kRxCe), w.marked) << "every marked frame arrived and was counted";
  EXPECT_EQ(bc.get(RcCounter::kTxCnp), cnps.size());
  EXPECT_EQ(qb->qp->cc.cnps_sent, cnps.size());
  EXPECT_EQ(qb->qp->cc.ce_received, w.marked);
  EXPECT_LT(cnps.size(), w.marked) << "rate-limited: not one CNP per marked frame";
  EXPECT_LE(cnps.size(), (w.now - t0) / (kDefaultDcqcn.cnp_interval_us * 1000) + 1);
  // A: counted, not acted on (its frames are Not-ECT).
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRxCnp), cnps.size());
  EXPECT_EQ(qa->qp->cc.cnps_received, cnps.size());
  EXPECT_EQ(qa->qp->cc.rate_cuts, 0u);
  EXPECT_FALSE(qa->qp->cc_flags.paced);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRateCuts), 0u);
  for (const Frame& f : a.log) EXPECT_EQ(parse_frame(f).f.ip.tos & wire::kEcnMask, 0);
}

// No mark, no CNP: a clean run sends none and cuts nothing.
TEST_F(Congestion, UnmarkedTrafficSendsNoCnp) {
  make(wire::kEcnEct0);
  top_up(300);
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  expect_delivered();
  EXPECT_TRUE(cnps_from(a).empty());
  EXPECT_TRUE(cnps_from(b).empty());
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxCe), 0u);
  EXPECT_FALSE(qa->qp->cc_flags.paced);
}

// A's QP sends ECT(0). While the switch marks its frames, B's CNPs cut its rate well below the
// line and the pacing clock holds it there; once marking stops, it recovers to the line rate and
// is unlimited again. Every byte arrives exactly once throughout.
TEST_F(Congestion, AnEctQpSlowsDownOnCnpsAndRecoversWhenMarkingStops) {
  make(wire::kEcnEct0);
  // Unlimited, the harness's wire moves far more than the line rate (its rounds are 1 µs).
  const double free_mbps = run_loaded(200);
  ASSERT_GT(free_mbps, 4.0 * kLineMbps);
  ASSERT_FALSE(qa->qp->cc_flags.paced);

  bool marking = true;
  w.mark_ce_if = [&](bool ab) { return ab && marking; };
  run_loaded(1000);  // the cuts
  const double congested_mbps = run_loaded(2000);
  const CongestionState& cc = qa->qp->cc;
  EXPECT_TRUE(qa->qp->cc_flags.paced);
  EXPECT_GE(cc.rate_cuts, 2u);
  EXPECT_LT(cc.rate_mbps, kLineMbps / 2);
  EXPECT_GT(cc.alpha, 0u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRateCuts), cc.rate_cuts);
  EXPECT_EQ(cc.cnps_received, b.eng->counters().get(RcCounter::kTxCnp));
  EXPECT_LT(congested_mbps, kLineMbps / 2.0) << "paced: " << congested_mbps << " Mbit/s";
  EXPECT_GT(congested_mbps, 0.0) << "slowed, not stopped";

  marking = false;
  uint64_t rounds = 0;
  while (qa->qp->cc_flags.paced && rounds < 2'000'000) {
    top_up(256);
    if (!w.step()) w.now += 1'000;
    ++rounds;
  }
  EXPECT_FALSE(qa->qp->cc_flags.paced) << "recovered to the line rate after " << rounds;
  EXPECT_GT(run_loaded(200), 4.0 * kLineMbps) << "unlimited again";

  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  expect_delivered();
  for (const Frame& f : a.log) {
    const wire::ParsedPacket p = parse_frame(f);
    EXPECT_EQ(p.f.ip.tos & wire::kEcnMask, wire::kEcnEct0) << "A's QP frames are ECT(0)";
  }
  for (const Frame& f : b.log) {
    const wire::ParsedPacket p = parse_frame(f);
    if (p.f.bth.opcode != wire::opcode::kCnp) {
      EXPECT_EQ(p.f.ip.tos & wire::kEcnMask, 0);
    }
  }
}

// The reaction point's arithmetic, CNP by CNP: the first halves the line rate (alpha 1); one within
// the rate-reduce period cuts nothing; after 1 ms without CNPs alpha has decayed (1019/1024 per
// µs: to about 0.7%), so the next cut takes about 0.35%, of the rate the timer's three steps of
// fast recovery (T = 300 µs) reached meanwhile, although the QP sent nothing; the cut restarts
// the byte counter.
TEST_F(Congestion, EachCnpCutsByHalfAlphaAndAlphaDecaysEveryMicrosecond) {
  make(wire::kEcnEct0);
  RcCounters counters;
  RcContext ctx;
  ctx.counters = &counters;
  QueuePair& qp = *qa->qp;
  const uint64_t t = 5'000'000;
  EXPECT_TRUE(congestion_on_cnp_st(qp, ctx, t));
  EXPECT_TRUE(qp.cc_flags.paced);
  EXPECT_EQ(qp.cc.rate_mbps, kLineMbps / 2);
  EXPECT_EQ(qp.cc.target_mbps, kLineMbps);
  EXPECT_FALSE(congestion_on_cnp_st(qp, ctx, t + 2'000)) << "within the rate-reduce period";
  EXPECT_EQ(qp.cc.rate_mbps, kLineMbps / 2);
  EXPECT_GT(qp.cc.alpha, CongestionState::kAlphaOne * 99 / 100);
  congestion_charge_st(qp, 1000);
  EXPECT_EQ(qp.cc.bytes, 1000u);
  EXPECT_TRUE(congestion_on_cnp_st(qp, ctx, t + 1'002'000));
  uint32_t recovered = kLineMbps / 2;  // three steps towards the target, the line rate
  for (int i = 0; i < 3; ++i) recovered = (kLineMbps + recovered + 1) / 2;
  EXPECT_EQ(qp.cc.target_mbps, recovered);
  EXPECT_GE(qp.cc.rate_mbps, recovered * 995 / 1000);
  EXPECT_LT(qp.cc.rate_mbps, recovered);
  EXPECT_EQ(qp.cc.timer_steps, 0u);
  EXPECT_EQ(qp.cc.bytes, 0u);
  EXPECT_EQ(qp.cc.rate_cuts, 2u);
  EXPECT_EQ(qp.cc.cnps_received, 3u);
  EXPECT_EQ(counters.get(RcCounter::kRateCuts), 2u);
}

// The pacing clock charges each frame with what it takes of the line: its bytes plus the Ethernet
// overhead the frame does not hold (FCS, preamble and delimiter, inter-frame gap: 24 bytes), to
// the picosecond. At Rc = 3,500 Mbit/s, 10,000 frames of a 64 B WRITE (138 bytes, 162 on the line)
// take 3,702,857 ns of the clock (charging 138 bytes in whole nanoseconds gave 3,150,000: 17%
// fast). Over IPv6 the frame (frame_bytes()) is 20 bytes longer; on a port that tags its frames
// (802.1Q) the line carries 4 bytes more than the engine built.
struct PacingCase {
  bool ipv6;
  bool vlan;
};
class PacingClock : public Congestion, public ::testing::WithParamInterface<PacingCase> {};
INSTANTIATE_TEST_SUITE_P(Frames, PacingClock,
                         ::testing::Values(PacingCase{false, false}, PacingCase{true, false},
                                           PacingCase{false, true}),
                         [](const auto& p) {
                           return std::string(p.param.ipv6 ? "Ipv6" : "Ipv4") +
                                  (p.param.vlan ? "Vlan" : "");
                         });

TEST_P(PacingClock, ChargesEachFrameWithItsTimeOnTheLine) {
  const bool ipv6 = GetParam().ipv6;
  const bool vlan = GetParam().vlan;
  config::DcqcnConfig d;
  d.first_cnp_rate_mbps = 7000;     // the cut (alpha 1) halves it: Rc = 3,500 Mbit/s
  d.byte_reset = 1u << 31;          // no increase by bytes while the frames are charged
  d.time_reset_us = 1'000'000'000;  // nor by the timer
  make(wire::kEcnEct0, kDefaultMaxUnackedPsns, 0, &d, ipv6, vlan);
  QueuePair& qp = *qa->qp;
  ASSERT_EQ(qp.ipv6(), ipv6);
  RcCounters counters;
  RcContext ctx;
  ctx.counters = &counters;
  const uint64_t t = w.now + 1'000'000;
  ASSERT_TRUE(congestion_on_cnp_st(qp, ctx, t));
  ASSERT_EQ(qp.cc.rate_mbps, 3500u);
  ASSERT_TRUE(congestion_may_send_st(qp, t));
  const uint64_t start = qp.cc.next_tx_ns;
  constexpr uint32_t kFrames = 10'000;
  constexpr uint32_t kFrameBytes = 138;  // over IPv4
  // What the requester and the responder charge for a 64 B WRITE ONLY of this QP.
  const uint32_t frame = frame_bytes(qp, wire::kRethLen, 64);
  for (uint32_t i = 0; i < kFrames; ++i) congestion_charge_st(qp, frame);
  const uint32_t on_line = kFrameBytes + 24 + (ipv6 ? 20 : 0) + (vlan ? 4 : 0);
  const double line_ns = kFrames * on_line * 8.0 * 1000 / 3500;
  EXPECT_NEAR(static_cast<double>(qp.cc.next_tx_ns - start), line_ns, 10.0);
  EXPECT_EQ(qp.cc.rate_mbps, 3500u);
  EXPECT_FALSE(congestion_may_send_st(qp, t + 1'000)) << "the clock is ahead: the QP waits";
}

// A paced requester charges each frame it sends as it is on the wire: a RETH only on a WRITE's
// first packet, an AtomicETH (28 bytes) on an atomic. 40 WRITEs of two packets and 10
// fetch-and-adds at Rc = 3,500 Mbit/s, the wire stepping 1 µs at a time: each frame takes longer
// than a step on the line, so the QP always waits for its clock and the clock advances by exactly
// the frames' time (no pause to forgive).
TEST_F(Congestion, APacedRequesterChargesEachFrameAsSent) {
  config::DcqcnConfig d;
  d.first_cnp_rate_mbps = 7000;
  d.byte_reset = 1u << 31;
  d.time_reset_us = 1'000'000'000;
  make(wire::kEcnEct0, kDefaultMaxUnackedPsns, 0, &d);
  QueuePair& qp = *qa->qp;
  RcCounters counters;
  RcContext ctx;
  ctx.counters = &counters;
  ASSERT_TRUE(congestion_on_cnp_st(qp, ctx, w.now));
  ASSERT_EQ(qp.cc.rate_mbps, 3500u);
  ASSERT_TRUE(congestion_may_send_st(qp, w.now));
  const uint64_t start = qp.cc.next_tx_ns;
  constexpr uint32_t kWrites = 40, kAtomics = 10;
  for (uint32_t i = 0; i < kWrites; ++i)
    ASSERT_EQ(qa->sq->post(write_wqe(tag(i), *src, *dst, i * 2 * kMsg, 2 * kMsg)), STATUS_SUCCESS);
  for (uint32_t i = 0; i < kAtomics; ++i)
    ASSERT_EQ(qa->sq->post(fetch_add_wqe(tag(kWrites + i), *src, *dst, 1)), STATUS_SUCCESS);
  for (int i = 0; i < 20'000 && done.size() < kWrites + kAtomics; ++i) {
    w.step();
    collect();
  }
  ASSERT_EQ(done.size(), kWrites + kAtomics);
  for (const NdkResultEx& r : done) ASSERT_EQ(r.status, STATUS_SUCCESS);
  ASSERT_TRUE(qp.cc_flags.paced);
  ASSERT_EQ(qp.cc.rate_mbps, 3500u);
  // IPv4: 42 bytes of Ethernet, IPv4 and UDP, the BTH, the ICRC; 24 more on the line.
  constexpr uint64_t kFirst = 42 + 12 + 16 + kMsg + 4 + 24, kLast = 42 + 12 + kMsg + 4 + 24,
                     kAtomic = 42 + 12 + 28 + 4 + 24;
  const uint64_t bytes = kWrites * (kFirst + kLast) + kAtomics * kAtomic;
  EXPECT_NEAR(static_cast<double>(qp.cc.next_tx_ns - start), bytes * 8.0 * 1000 / 3500, 2.0);
}

// The port's DCQCN parameters (ports[].dcqcn) replace the defaults on both roles: the CNP interval
// at the notification point; the first-CNP rate, the rate-reduce period, T and the rate floor at
// the reaction point. Each expectation below differs from what the defaults give.
TEST_F(Congestion, ThePortsParametersReplaceTheDefaults) {
  config::DcqcnConfig d;
  d.cnp_interval_us = 50;
  d.rate_reduce_period_us = 50;
  d.first_cnp_rate_mbps = 8000;
  d.min_rate_mbps = 4000;
  d.time_reset_us = 30;
  make(wire::kEcnEct0, kDefaultMaxUnackedPsns, 0, &d);
  EXPECT_EQ(qa->qp->conn().dcqcn, &d);

  // NP: B answers A's marked WRITEs with at most one CNP per 50 µs.
  w.mark_ce_if = [](bool ab) { return ab; };
  const uint64_t t0 = w.now;
  top_up(300);
  ASSERT_TRUE(w.run_until([&] { return all_done(); }));
  expect_delivered();
  const uint64_t cnps = b.eng->counters().get(RcCounter::kTxCnp);
  EXPECT_GE(cnps, 2u);
  EXPECT_LE(cnps, (w.now - t0) / 50'000 + 1) << "one per 50 µs at most";
  w.mark_ce_if = nullptr;

  // RP, CNP by CNP, on a fresh episode of A's QP.
  QueuePair& qp = *qa->qp;
  qp.cc_flags.paced = false;
  qp.cc = CongestionState{};
  RcCounters counters;
  RcContext ctx;
  ctx.counters = &counters;
  const uint64_t t = w.now + 1'000'000;
  EXPECT_TRUE(congestion_on_cnp_st(qp, ctx, t));
  EXPECT_EQ(qp.cc.target_mbps, 8000u) << "from the first-CNP rate, not the line rate";
  EXPECT_EQ(qp.cc.rate_mbps, 4000u);
  EXPECT_FALSE(congestion_on_cnp_st(qp, ctx, t + 10'000)) << "within the 50 µs period";
  EXPECT_EQ(qp.cc.rate_mbps, 4000u);
  congestion_may_send_st(qp, t + 35'000);  // one step of T = 30 µs: fast recovery
  EXPECT_EQ(qp.cc.timer_steps, 1u);
  EXPECT_EQ(qp.cc.rate_mbps, 6000u);
  EXPECT_TRUE(congestion_on_cnp_st(qp, ctx, t + 55'000));  // the next step is due at 60 µs
  EXPECT_EQ(qp.cc.target_mbps, 6000u);
  EXPECT_EQ(qp.cc.rate_mbps, 4000u) << "the cut stops at the floor";
  EXPECT_EQ(qp.cc.rate_cuts, 2u);
}

// A limited QP whose window is full waits for ACKs, not for its pacing clock: the timer wakes it
// only when it stopped for the clock, so while its ACKs are lost it is visited for its
// retransmission timer, not on every poll.
TEST_F(Congestion, APacedQpWaitingForAcksIsNotVisitedOnEveryPoll) {
  make(wire::kEcnEct0, kMinWindow);
  w.mark_ce_if = [](bool ab) { return ab; };
  top_up(64);
  ASSERT_TRUE(w.run_until([&] { return qa->qp->cc.rate_cuts != 0; }));
  ASSERT_TRUE(qa->qp->cc_flags.paced);
  w.mark_ce_if = nullptr;
  w.drop_if = [](bool ab, const wire::ParsedPacket&) { return !ab; };  // B's ACKs are lost
  const uint32_t psn0 = qa->qp->comp.unacked_psn;
  for (int i = 0; i < 20'000 && qa->qp->req.max_psn_sent != wire::psn_add(psn0, kMinWindow); ++i) {
    if (!w.step()) w.now += 1'000;
  }
  ASSERT_EQ(qa->qp->req.max_psn_sent, wire::psn_add(psn0, kMinWindow)) << "the window filled";
  const uint64_t visits0 = a.eng->qp_visits();
  const uint64_t polls0 = a.eng->polls();
  for (int i = 0; i < 2'000; ++i) w.step();
  const uint64_t visits = a.eng->qp_visits() - visits0;
  EXPECT_EQ(a.eng->polls() - polls0, 2'000u);
  EXPECT_LT(visits, 200u) << "visited on " << visits << " of 2,000 polls";
  EXPECT_TRUE(qa->qp->cc_flags.paced);

  w.drop_if = nullptr;
  ASSERT_TRUE(w.run_until([&] { return all_done(); }, 2'000'000));
  expect_delivered();
}

// A reads from B, whose QP sends ECT(0): the data B's READ responses carry is what a congested
// switch marks on the way to A. A's CNPs then cut B's rate, and B's responder paces its responses
// by the same clock as its requests (without that, a READ responder got CNPs and cut its rate
// while its responses went on at full speed). Once marking stops, B recovers; every READ
// completes once, in order, with the bytes B holds.
TEST_F(Congestion, AnEctReadResponderPacesItsResponses) {
  constexpr uint32_t kRead = 8 * kMsg;  // eight responses per READ
  constexpr uint32_t kReadSlots = 64;
  make(0, kDefaultMaxUnackedPsns, wire::kEcnEct0);
  Buffer& from = b.buffer(kReadSlots * kRead);
  Buffer& into = a.buffer(kReadSlots * kRead);
  fill_pattern(from.ptr(), kReadSlots * kRead, 23);
  uint64_t reads = 0;
  auto top_up_reads = [&] {
    collect();
    while (reads - done.size() < 16) {
      const uint32_t off = static_cast<uint32_t>(reads % kReadSlots) * kRead;
      SendWqe rd = send_wqe(SendOpcode::kRead, tag(reads), {into.sge(off, kRead)});
      rd.remote_address = from.va() + off;
      rd.remote_token = from.tokens.remote;
      ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
      ++reads;
    }
  };
  // What B sends in `rounds` rounds with A's READs outstanding, in Mbit/s.
  auto run_reads = [&](int rounds) {
    uint64_t bytes = 0;
    const uint64_t t0 = w.now;
    for (int i = 0; i < rounds; ++i) {
      top_up_reads();
      const size_t before = b.log.size();
      if (!w.step()) w.now += 1'000;
      for (size_t f = before; f < b.log.size(); ++f) bytes += b.log[f].size();
    }
    return static_cast<double>(bytes) * 8 * 1000 / static_cast<double>(w.now - t0);
  };
  const double free_mbps = run_reads(200);
  ASSERT_GT(free_mbps, 2.0 * kLineMbps);

  bool marking = true;
  w.mark_ce_if = [&](bool ab) { return !ab && marking; };
  run_reads(1000);
  const double congested_mbps = run_reads(2000);
  const CongestionState& cc = qb->qp->cc;
  EXPECT_TRUE(qb->qp->cc_flags.paced);
  EXPECT_GE(cc.rate_cuts, 2u);
  EXPECT_LT(cc.rate_mbps, kLineMbps / 2);
  EXPECT_EQ(cc.cnps_received, a.eng->counters().get(RcCounter::kTxCnp));
  EXPECT_GT(b.eng->counters().get(RcCounter::kReadResponsesSent), 0u);
  EXPECT_LT(congested_mbps, kLineMbps / 2.0) << "paced: " << congested_mbps << " Mbit/s";
  EXPECT_GT(congested_mbps, 0.0) << "slowed, not stopped";
  EXPECT_FALSE(qa->qp->cc_flags.paced) << "A sends Not-ECT: it only sends CNPs";

  marking = false;
  for (uint64_t rounds = 0; qb->qp->cc_flags.paced && rounds < 2'000'000; ++rounds) {
    top_up_reads();
    if (!w.step()) w.now += 1'000;
  }
  EXPECT_FALSE(qb->qp->cc_flags.paced) << "recovered to the line rate";
  EXPECT_GT(run_reads(200), 2.0 * kLineMbps) << "unlimited again";

  ASSERT_TRUE(w.run_until([&] { return collect(), done.size() == reads; }));
  for (size_t i = 0; i < done.size(); ++i) {
    ASSERT_EQ(done[i].status, STATUS_SUCCESS) << i;
    ASSERT_EQ(done[i].request_context, tag(i)) << "posting order, exactly once";
  }
  EXPECT_EQ(std::memcmp(into.ptr(), from.ptr(), std::min<uint64_t>(reads, kReadSlots) * kRead), 0);
}

// A paced READ responder that stopped for its clock is woken by the timer when the clock allows
// the next response, not visited on every poll in between.
TEST_F(Congestion, APacedReadResponderWaitsForItsClockWithoutBeingVisitedEveryPoll) {
  make(0, kDefaultMaxUnackedPsns, wire::kEcnEct0);
  constexpr uint32_t kRead = 64 * kMsg;
  Buffer& from = b.buffer(kRead);
  Buffer& into = a.buffer(kRead);
  fill_pattern(from.ptr(), kRead, 29);
  // CNPs cut B's rate below 100 Mbit/s.
  RcCounters counters;
  RcContext ctx;
  ctx.counters = &counters;
  do {
    congestion_on_cnp_st(*qb->qp, ctx, w.now);
    w.now += kDefaultDcqcn.rate_reduce_period_us * 1000;
  } while (qb->qp->cc.rate_mbps >= 100);  // ~80 µs a response: far below A's 1 ms timeout
  ASSERT_TRUE(qb->qp->cc_flags.paced);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(0), {into.sge(0, kRead)});
  rd.remote_address = from.va();
  rd.remote_token = from.tokens.remote;
  ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
  for (int i = 0; i < 50; ++i) w.step();
  const uint64_t visits0 = b.eng->qp_visits();
  const uint64_t sent0 = b.eng->counters().get(RcCounter::kReadResponsesSent);
  for (int i = 0; i < 2'000; ++i) w.step();  // 2 ms
  const uint64_t visits = b.eng->qp_visits() - visits0;
  const uint64_t sent = b.eng->counters().get(RcCounter::kReadResponsesSent) - sent0;
  EXPECT_GT(sent, 0u) << "the clock lets responses out";
  EXPECT_LT(sent, 64u) << "but not all at once";
  EXPECT_LE(visits, 2 * sent + 10) << "visited on " << visits << " of 2,000 polls";
  ASSERT_TRUE(w.run_until([&] { return collect(), !done.empty(); }, 2'000'000));
  ASSERT_EQ(done[0].status, STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(into.ptr(), from.ptr(), kRead), 0);
}

}  // namespace
}  // namespace rocedp::rc::test
