// CM connection state machine (control/cm_connection.*): two machines talk
// through an in-memory pipe that encodes and decodes every MAD (so the wire
// codec is on the path), with injected time and losses. Each test asserts the
// messages on the wire, the NTSTATUS of consumer calls and the events the NDK
// layer would turn into callbacks.
#include "control/cm_connection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <vector>

#include "tests/cm/cm_pair_params.hpp"

namespace rocedp::control {
namespace {

using namespace rocedp::wire;

constexpr std::uint64_t kSec = 1'000'000'000;

struct Sink : CmSink {
  std::deque<CmMad> out;    // sent, not yet delivered
  std::vector<CmMad> sent;  // everything ever sent
  std::vector<CmEvent> events;
  void cm_send(const CmMad& m) override {
    const auto bytes = encode_cm_mad(m);
    CmMad d;
    EXPECT_EQ(decode_cm_mad(bytes, d), CmDecodeStatus::kOk);
    out.push_back(d);
    sent.push_back(d);
  }
  void cm_event(const CmEvent& e) override { events.push_back(e); }
  std::size_t count_sent(std::uint16_t attr) const {
    return std::count_if(sent.begin(), sent.end(),
                         [attr](const CmMad& m) { return m.hdr.attr_id == attr; });
  }
  std::size_t count_events(CmEventType t) const {
    return std::count_if(events.begin(), events.end(),
                         [t](const CmEvent& e) { return e.type == t; });
  }
  const CmEvent* last(CmEventType t) const {
    auto it =
        std::find_if(events.rbegin(), events.rend(), [t](const CmEvent& e) { return e.type == t; });
    return it == events.rend() ? nullptr : &*it;
  }
};

// Active side A (10.0.0.1) connects to passive side B (10.0.0.2, port 445).
struct Pair {
  CmConfig cfg_a{.tid_hi = 7, .mra_service_timeout = 22, .timewait_ns = 3 * kSec};
  CmConfig cfg_b{.tid_hi = 9, .mra_service_timeout = 22, .timewait_ns = 3 * kSec};
  Sink sa, sb;
  CmConnection a{sa, cfg_a};
  CmConnection b{sb, cfg_b};
  bool listening = true;
  std::uint64_t now = 1000;
  std::function<bool(const CmMad&, bool a_to_b)> drop = [](const CmMad&, bool) { return false; };
  std::vector<std::uint8_t> caller_pd = std::vector<std::uint8_t>(kMaxCallerData, 0xC1);

  CmConnectParams connect_params() const { return test::pair_connect_params(caller_pd); }

  // Delivers queued messages both ways until the pipe is quiet. B's owner
  // routes a REQ to a new passive connection when B is idle and listening,
  // and answers it with REJ "invalid service ID" when nobody listens.
  void pump() {
    for (int guard = 0; guard < 1000 && (!sa.out.empty() || !sb.out.empty()); ++guard) {
      while (!sa.out.empty()) {
        const CmMad m = sa.out.front();
        sa.out.pop_front();
        if (drop(m, true)) continue;
        if (std::holds_alternative<CmReq>(m.body) && b.state() == CmState::kIdle) {
          if (listening) {
            EXPECT_EQ(b.on_request(m, test::kPassiveCommId, test::passive_ca_guid(), now),
                      STATUS_SUCCESS);
          } else {
            sb.cm_send(CmConnection::rej_for(m, CmRejReason::kInvalidServiceId));
          }
          continue;
        }
        b.on_message(m, now);
      }
      while (!sb.out.empty()) {
        const CmMad m = sb.out.front();
        sb.out.pop_front();
        if (drop(m, false)) continue;
        a.on_message(m, now);
      }
    }
  }

  // Advances time to the earliest deadline and fires it.
  bool tick() {
    const std::uint64_t t = std::min(a.next_timeout_ns(), b.next_timeout_ns());
    if (t == CmConnection::kNoTimeout) return false;
    now = std::max(now, t);
    a.on_timer(now);
    b.on_timer(now);
    pump();
    return true;
  }

  void establish() {
    ASSERT_EQ(a.connect(connect_params(), now), STATUS_PENDING);
    pump();
    ASSERT_EQ(b.state(), CmState::kReqRcvd);
    ASSERT_EQ(b.accept(accept_params(), now), STATUS_PENDING);
    pump();
    ASSERT_EQ(a.state(), CmState::kRepRcvd);
    ASSERT_EQ(a.complete_connect(now), STATUS_SUCCESS);
    pump();
    ASSERT_EQ(a.state(), CmState::kEstablished);
    ASSERT_EQ(b.state(), CmState::kEstablished);
  }

  std::vector<std::uint8_t> callee_pd = std::vector<std::uint8_t>(kMaxCalleeData, 0xB2);
  CmAcceptParams accept_params() const { return test::pair_accept_params(callee_pd); }
};

bool is(const CmMad& m, std::uint16_t attr) {
  return m.hdr.attr_id == attr;
}

TEST(CmConnection, StateNamesComeFromOneTable) {
  EXPECT_EQ(cm_state_name(CmState::kIdle), "IDLE");
  EXPECT_EQ(cm_state_name(CmState::kMraRcvd), "MRA_RCVD");
  EXPECT_EQ(cm_state_name(CmState::kRepSent), "REP_SENT");
  EXPECT_EQ(cm_state_name(CmState::kTimeWait), "TIMEWAIT");
  EXPECT_EQ(cm_state_name(CmState::kClosed), "CLOSED");
  EXPECT_EQ(cm_state_name(CmState::kCount), "?");
  EXPECT_EQ(cm_event_name(CmEventType::kAborted), "aborted");
}

TEST(CmConnection, EstablishesAndBothSidesLearnEachOther) {
  Pair p;
  EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_INVALID) << "idle";
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  EXPECT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_CONNECTION_INVALID) << "twice";
  EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_INVALID) << "no REP yet";
  EXPECT_EQ(p.a.state(), CmState::kReqSent);
  ASSERT_EQ(p.sa.out.size(), 1u);
  const auto& req = std::get<CmReq>(p.sa.out.front().body);
  EXPECT_EQ(req.service_id, 0x00000000010601BDull);  // rdma_cm TCP port space, port 445
  EXPECT_EQ(req.primary.local_gid, gid_from_ipv4(0x0A000001));
  EXPECT_EQ(req.primary.local_lid, 0xFFFF);
  EXPECT_EQ(p.sa.out.front().hdr.tid, (7ull << 32) | 0xA0000001);
  p.pump();

  // B: the connect event's data.
  ASSERT_EQ(p.b.state(), CmState::kReqRcvd);
  EXPECT_EQ(p.b.remote_qpn(), 0x11u);
  EXPECT_EQ(p.b.remote_starting_psn(), 0xAAAAAAu);
  EXPECT_EQ(p.b.peer_responder_resources(), 4);
  EXPECT_EQ(p.b.peer_initiator_depth(), 8);
  EXPECT_EQ(p.b.path_mtu(), 3);
  EXPECT_EQ(p.b.peer_addresses().src_ip, 0x0A000001u);
  EXPECT_EQ(p.b.peer_addresses().src_port, 50000);
  EXPECT_EQ(p.b.peer_addresses().dst_ip, 0x0A000002u);
  ASSERT_EQ(p.b.peer_private_data().size(), 56u);
  EXPECT_TRUE(std::ranges::equal(p.b.peer_private_data(), p.caller_pd));
  EXPECT_TRUE(p.sb.events.empty());

  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  EXPECT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_CONNECTION_INVALID) << "twice";
  p.pump();
  ASSERT_EQ(p.sa.count_events(CmEventType::kConnectComplete), 1u);
  EXPECT_EQ(p.sa.events[0].status, STATUS_SUCCESS);
  EXPECT_EQ(p.a.remote_qpn(), 0x22u);
  EXPECT_EQ(p.a.remote_starting_psn(), 0xBBBBBBu);
  EXPECT_EQ(p.a.peer_responder_resources(), 2);
  EXPECT_EQ(p.a.peer_initiator_depth(), 3);
  ASSERT_EQ(p.a.peer_private_data().size(), kCmRepPrivateLen);
  EXPECT_EQ(p.a.peer_private_data()[147], 0xB2);
  EXPECT_EQ(p.a.peer_private_data()[148], 0) << "beyond what B gave";
  EXPECT_TRUE(p.sb.events.empty()) << "Accept completes on the RTU";

  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_INVALID) << "already connected";
  p.pump();
  EXPECT_EQ(p.a.state(), CmState::kEstablished);
  EXPECT_EQ(p.b.state(), CmState::kEstablished);
  ASSERT_EQ(p.sb.events.size(), 1u);
  EXPECT_EQ(p.sb.events[0].type, CmEventType::kAcceptComplete);
  EXPECT_EQ(p.sb.events[0].status, STATUS_SUCCESS);
  // REQ, REP, RTU share the REQ's transaction ID, as in the Linux capture.
  ASSERT_EQ(p.sa.sent.size(), 2u);
  ASSERT_EQ(p.sb.sent.size(), 1u);
  EXPECT_TRUE(is(p.sb.sent[0], cm_attr::kRep));
  EXPECT_TRUE(is(p.sa.sent[1], cm_attr::kRtu));
  EXPECT_EQ(p.sb.sent[0].hdr.tid, p.sa.sent[0].hdr.tid);
  EXPECT_EQ(p.sa.sent[1].hdr.tid, p.sa.sent[0].hdr.tid);
  EXPECT_EQ(p.a.next_timeout_ns(), CmConnection::kNoTimeout);
  EXPECT_EQ(p.b.next_timeout_ns(), CmConnection::kNoTimeout);
}

TEST(CmConnection, PrivateDataLimitsAreMaxCallerAndCalleeData) {
  Pair p;
  std::vector<std::uint8_t> big(57, 1);
  CmConnectParams cp = p.connect_params();
  cp.private_data = big;
  EXPECT_EQ(p.a.connect(cp, p.now), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(p.a.state(), CmState::kIdle);
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  std::vector<std::uint8_t> big_callee(149, 1);
  CmAcceptParams ap = p.accept_params();
  ap.private_data = big_callee;
  EXPECT_EQ(p.b.accept(ap, p.now), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(p.b.reject(big_callee, p.now), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(p.b.state(), CmState::kReqRcvd);
}

TEST(CmConnection, RejectWithConsumerReasonAndPrivateDataRefusesTheConnect) {
  Pair p;
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  const std::vector<std::uint8_t> why = {'b', 'u', 's', 'y'};
  ASSERT_EQ(p.b.reject(why, p.now), STATUS_SUCCESS);
  EXPECT_EQ(p.b.reject(why, p.now), STATUS_CONNECTION_INVALID) << "already rejected";
  p.pump();
  const auto& rej = std::get<CmRej>(p.sb.sent.back().body);
  EXPECT_EQ(rej.reason, 28);
  EXPECT_EQ(rej.local_comm_id, 0u) << "REJ of a REQ before accepting (cm.c)";
  EXPECT_EQ(rej.message_rejected, CmMsgResponse::kReq);
  const CmEvent* e = p.sa.last(CmEventType::kConnectComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_CONNECTION_REFUSED);
  EXPECT_EQ(e->rej_reason, 28);
  ASSERT_EQ(p.a.peer_private_data().size(), kCmRejPrivateLen);
  EXPECT_TRUE(std::equal(why.begin(), why.end(), p.a.peer_private_data().begin()));
  EXPECT_EQ(p.a.state(), CmState::kClosed);
  EXPECT_EQ(p.b.state(), CmState::kClosed);
  EXPECT_EQ(p.sa.count_events(CmEventType::kReleased), 1u);
  EXPECT_EQ(p.sb.count_events(CmEventType::kReleased), 1u);
  EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_INVALID);
}

TEST(CmConnection, NoListenerIsRefusedWithInvalidServiceId) {
  Pair p;
  p.listening = false;
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  const CmEvent* e = p.sa.last(CmEventType::kConnectComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_CONNECTION_REFUSED);
  EXPECT_EQ(e->rej_reason, 8);
  EXPECT_EQ(p.a.state(), CmState::kClosed);
}

TEST(CmConnection, SilentPeerTimesOutAfterMaxCmRetries) {
  Pair p;
  p.drop = [](const CmMad&, bool a_to_b) { return a_to_b; };
  CmConnectParams cp = p.connect_params();
  cp.max_cm_retries = 3;
  cp.cm_response_timeout = 10;  // 4.096 µs × 2^10 ≈ 4.19 ms per attempt
  const std::uint64_t t0 = p.now;
  ASSERT_EQ(p.a.connect(cp, p.now), STATUS_PENDING);
  EXPECT_EQ(p.a.next_timeout_ns(), t0 + ib_time_ns(10));
  for (int i = 1; i <= 3; ++i) {
    p.a.on_timer(p.a.next_timeout_ns() - 1);
    EXPECT_EQ(p.sa.count_sent(cm_attr::kReq), static_cast<std::size_t>(i))
        << "not before the deadline";
    ASSERT_TRUE(p.tick());
    EXPECT_EQ(p.sa.count_sent(cm_attr::kReq), static_cast<std::size_t>(i + 1));
    EXPECT_EQ(p.a.retries(), static_cast<std::uint32_t>(i));
    EXPECT_TRUE(p.sa.events.empty());
  }
  ASSERT_TRUE(p.tick());
  EXPECT_EQ(p.now, t0 + 4 * ib_time_ns(10)) << "4 attempts, each waiting the response timeout";
  const CmEvent* e = p.sa.last(CmEventType::kConnectComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(p.sa.count_sent(cm_attr::kReq), 4u);
  EXPECT_TRUE(is(p.sa.sent.back(), cm_attr::kRej)) << "IBTA: REJ Timeout after the last retry";
  EXPECT_EQ(std::get<CmRej>(p.sa.sent.back().body).reason, 4);
  for (const auto& m : p.sa.sent) {
    if (is(m, cm_attr::kReq)) {
      EXPECT_EQ(m, p.sa.sent.front()) << "retransmissions are identical";
    }
  }
  EXPECT_EQ(p.a.state(), CmState::kClosed);
  EXPECT_FALSE(p.tick());
}

TEST(CmConnection, MraFromTheListenerExtendsTheWait) {
  Pair p;
  CmConnectParams cp = p.connect_params();
  cp.max_cm_retries = 1;
  cp.cm_response_timeout = 10;
  ASSERT_EQ(p.a.connect(cp, p.now), STATUS_PENDING);
  p.pump();
  EXPECT_EQ(p.b.send_mra(p.now), STATUS_SUCCESS);
  p.pump();
  EXPECT_EQ(p.b.state(), CmState::kMraSent);
  EXPECT_EQ(p.a.state(), CmState::kMraRcvd);
  const auto& mra = std::get<CmMra>(p.sb.sent.back().body);
  EXPECT_EQ(mra.message_mraed, CmMsgResponse::kReq);
  EXPECT_EQ(mra.service_timeout, 22);
  EXPECT_EQ(p.a.next_timeout_ns(), p.now + ib_time_ns(22) + ib_time_ns(10));
  // Far past the REQ's own timeout × retries, the connect is still alive.
  p.a.on_timer(p.now + 2 * ib_time_ns(10));
  EXPECT_TRUE(p.sa.events.empty());
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_NE(p.sa.last(CmEventType::kConnectComplete), nullptr);
  EXPECT_EQ(p.sa.last(CmEventType::kConnectComplete)->status, STATUS_SUCCESS);
}

TEST(CmConnection, DuplicateReqBeforeAcceptIsAnsweredWithMra) {
  Pair p;
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_TRUE(p.tick());  // A resends the REQ; B has not decided yet
  EXPECT_EQ(p.sb.count_sent(cm_attr::kMra), 1u);
  EXPECT_EQ(p.a.state(), CmState::kMraRcvd);
  ASSERT_TRUE(p.tick());  // the MRA's wait ends: another REQ, the same MRA again
  EXPECT_EQ(p.sb.count_sent(cm_attr::kMra), 2u);
  EXPECT_EQ(p.sb.sent[0], p.sb.sent[1]);
  EXPECT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING) << "accept from MRA_SENT";
  p.pump();
  EXPECT_EQ(p.a.state(), CmState::kRepRcvd);
}

TEST(CmConnection, LostRepIsResentOnTheDuplicateReq) {
  Pair p;
  int dropped = 0;
  p.drop = [&](const CmMad& m, bool a_to_b) {
    return !a_to_b && is(m, cm_attr::kRep) && dropped++ == 0;
  };
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  EXPECT_EQ(p.a.state(), CmState::kReqSent);
  p.now = p.a.next_timeout_ns();  // A's REQ timer fires before B's REP timer
  p.a.on_timer(p.now);
  p.pump();
  EXPECT_EQ(p.sb.count_sent(cm_attr::kRep), 2u) << "REP resent for the duplicate REQ";
  EXPECT_EQ(p.a.state(), CmState::kRepRcvd);
  EXPECT_EQ(p.sa.count_events(CmEventType::kConnectComplete), 1u);
}

TEST(CmConnection, LostRtuIsResentOnTheDuplicateRepAndDuplicateRtuIsIgnored) {
  Pair p;
  int dropped = 0;
  p.drop = [&](const CmMad& m, bool a_to_b) {
    return a_to_b && is(m, cm_attr::kRtu) && dropped++ == 0;
  };
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  p.pump();
  EXPECT_EQ(p.b.state(), CmState::kRepSent);
  ASSERT_TRUE(p.tick());  // B resends the REP; A (ESTABLISHED) answers with the RTU again
  EXPECT_EQ(p.sb.count_sent(cm_attr::kRep), 2u);
  EXPECT_EQ(p.sa.count_sent(cm_attr::kRtu), 2u);
  EXPECT_EQ(p.b.state(), CmState::kEstablished);
  EXPECT_EQ(p.sa.count_events(CmEventType::kConnectComplete), 1u) << "no second completion";
  p.b.on_message(p.sa.sent.back(), p.now);  // the RTU once more
  EXPECT_EQ(p.sb.count_events(CmEventType::kAcceptComplete), 1u);
  EXPECT_EQ(p.b.state(), CmState::kEstablished);
}

TEST(CmConnection, RtuNeverArrivesAcceptTimesOutAndTheActiveSideIsDisconnected) {
  Pair p;
  p.drop = [](const CmMad& m, bool a_to_b) { return a_to_b && is(m, cm_attr::kRtu); };
  CmConnectParams cp = p.connect_params();
  cp.max_cm_retries = 2;
  ASSERT_EQ(p.a.connect(cp, p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  p.pump();
  while (p.b.state() == CmState::kRepSent) ASSERT_TRUE(p.tick());
  EXPECT_EQ(p.sb.count_sent(cm_attr::kRep), 3u) << "1 + max CM retries from the REQ";
  const CmEvent* e = p.sb.last(CmEventType::kAcceptComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(p.b.state(), CmState::kClosed);
  // B's REJ Timeout reaches A, which already sent its RTU: a disconnect.
  const CmEvent* d = p.sa.last(CmEventType::kDisconnected);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->status, STATUS_CONNECTION_ABORTED);
  EXPECT_EQ(p.a.state(), CmState::kTimeWait);
}

// Linux's rdma_cm answers every REP with an MRA (2^24 × 4.096 µs: 69 s) before its RTU. When
// that RTU is lost, the passive side does not wait the 69 s: it sends the REP again after at most
// 2 × 4.3 s, the active side (established) answers with the RTU again, and the accept completes.
TEST(CmConnection, AnMraForTheRepDoesNotHoldTheRepPastTheUsualWaitWhenTheRtuIsLost) {
  Pair p;
  int rtus = 0;
  p.drop = [&rtus](const CmMad& m, bool a_to_b) {
    return a_to_b && is(m, cm_attr::kRtu) && rtus++ == 0;
  };
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.state(), CmState::kRepRcvd);
  // A's consumer is slow: A's CM MRAs the REP, as rdma_cm does, then completes (its RTU lost).
  const CmRep& rep = std::get<CmRep>(p.sb.sent.back().body);
  p.sa.cm_send(
      make_cm_mad(p.sb.sent.back().hdr.tid,
                  CmMra{rep.remote_comm_id, rep.local_comm_id, CmMsgResponse::kRep, 24, {}}));
  p.pump();
  const std::uint64_t mra_at = p.now;
  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  p.pump();
  ASSERT_EQ(rtus, 1);
  ASSERT_EQ(p.b.state(), CmState::kRepSent);
  while (p.b.state() == CmState::kRepSent) ASSERT_TRUE(p.tick());
  EXPECT_EQ(p.b.state(), CmState::kEstablished);
  EXPECT_EQ(p.sb.count_sent(cm_attr::kRep), 2u) << "one REP sent again";
  EXPECT_LE(p.now - mra_at, 2 * (4096ull << 20)) << "not the MRA's 69 s";
  const CmEvent* e = p.sb.last(CmEventType::kAcceptComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_SUCCESS);
}

// A REQ asks for the longest response time (2^31 × 4.096 µs) and 15 retries: the passive side
// still gives up on a missing RTU after 4 REPs at most 4.3 s apart, so a storm of requests that
// never complete cannot hold a listener's connections for days.
TEST(CmConnection, PassiveWaitForTheRtuIsCappedWhateverTheReqAsks) {
  Pair p;
  p.drop = [](const CmMad& m, bool a_to_b) { return a_to_b && is(m, cm_attr::kRtu); };
  CmConnectParams cp = p.connect_params();
  cp.cm_response_timeout = 31;
  cp.max_cm_retries = 15;
  ASSERT_EQ(p.a.connect(cp, p.now), STATUS_PENDING);
  p.pump();
  const std::uint64_t accepted_at = p.now;
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  p.pump();
  while (p.b.state() == CmState::kRepSent) ASSERT_TRUE(p.tick());
  EXPECT_EQ(p.sb.count_sent(cm_attr::kRep), 4u) << "1 + at most 3 resends";
  EXPECT_LE(p.now - accepted_at, 4 * (4096ull << 20)) << "at most 4 waits of 4.096 µs × 2^20";
  const CmEvent* e = p.sb.last(CmEventType::kAcceptComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(p.b.state(), CmState::kClosed);
}

TEST(CmConnection, CompleteConnectTooLateIsIoTimeout) {
  Pair p;
  CmConnectParams cp = p.connect_params();
  cp.max_cm_retries = 1;
  cp.cm_response_timeout = 12;
  ASSERT_EQ(p.a.connect(cp, p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.state(), CmState::kRepRcvd);
  // The consumer sits on the REP; B resends it and A's own window closes.
  EXPECT_EQ(p.a.next_timeout_ns(), p.now + 2 * ib_time_ns(12));
  while (p.a.state() == CmState::kRepRcvd) ASSERT_TRUE(p.tick());
  EXPECT_EQ(p.a.complete_connect(p.now), STATUS_IO_TIMEOUT);
  ASSERT_NE(p.sa.last(CmEventType::kAborted), nullptr);
  // Whichever side gave up first, B's Accept ends with a timeout too.
  ASSERT_NE(p.sb.last(CmEventType::kAcceptComplete), nullptr);
  EXPECT_EQ(p.sb.last(CmEventType::kAcceptComplete)->status, STATUS_IO_TIMEOUT);
}

TEST(CmConnection, PeerRejectsOrDisconnectsBeforeRtuAbortsCompleteConnect) {
  {  // the listener side closes its connector after sending the REP
    Pair p;
    ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
    p.pump();
    ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
    p.pump();
    p.b.close(p.now);
    p.pump();
    EXPECT_EQ(std::get<CmRej>(p.sb.sent.back().body).reason, 28);
    EXPECT_EQ(p.sb.count_events(CmEventType::kAcceptComplete), 0u) << "nothing fires after close";
    EXPECT_EQ(p.sb.count_events(CmEventType::kReleased), 1u);
    ASSERT_NE(p.sa.last(CmEventType::kAborted), nullptr);
    EXPECT_EQ(p.sa.last(CmEventType::kAborted)->status, STATUS_CONNECTION_ABORTED);
    EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_ABORTED);
    EXPECT_EQ(p.a.state(), CmState::kClosed);
  }
  {  // a DREQ before the RTU
    Pair p;
    ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
    p.pump();
    ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
    p.pump();
    const CmMad dreq =
        make_cm_mad(0x55, CmDreq{p.b.local_comm_id(), p.a.local_comm_id(), 0x11, {}});
    p.a.on_message(dreq, p.now);
    EXPECT_TRUE(is(p.sa.sent.back(), cm_attr::kDrep));
    EXPECT_EQ(p.sa.sent.back().hdr.tid, 0x55u) << "DREP answers with the DREQ's TID";
    EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_ABORTED);
    EXPECT_EQ(p.a.state(), CmState::kTimeWait);
    // And B, still in REP_SENT, sees the same from its side.
    const CmMad dreq_b =
        make_cm_mad(0x56, CmDreq{p.a.local_comm_id(), p.b.local_comm_id(), 0x22, {}});
    p.b.on_message(dreq_b, p.now);
    ASSERT_NE(p.sb.last(CmEventType::kAcceptComplete), nullptr);
    EXPECT_EQ(p.sb.last(CmEventType::kAcceptComplete)->status, STATUS_CONNECTION_ABORTED);
  }
}

TEST(CmConnection, ActiveSideMayRejectAfterConnectCompletes) {
  Pair p;
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  const std::vector<std::uint8_t> why = {9, 9};
  ASSERT_EQ(p.a.reject(why, p.now), STATUS_SUCCESS);  // e.g. read limits unacceptable
  p.pump();
  const auto& rej = std::get<CmRej>(p.sa.sent.back().body);
  EXPECT_EQ(rej.message_rejected, CmMsgResponse::kRep);
  EXPECT_EQ(rej.local_comm_id, p.a.local_comm_id());
  const CmEvent* e = p.sb.last(CmEventType::kAcceptComplete);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, STATUS_CONNECTION_ABORTED);
  EXPECT_EQ(e->rej_reason, 28);
  EXPECT_EQ(p.b.peer_private_data()[1], 9);
  EXPECT_EQ(p.a.complete_connect(p.now), STATUS_CONNECTION_INVALID) << "closed";
}

TEST(CmConnection, ActiveSideGivingUpAbortsAPendingRequest) {
  Pair p;
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  p.a.close(p.now);  // the connector is closed while the REQ is outstanding
  p.pump();
  const auto& rej = std::get<CmRej>(p.sa.sent.back().body);
  EXPECT_EQ(rej.reason, 4);
  EXPECT_EQ(rej.remote_comm_id, 0u) << "A never learnt B's comm ID";
  EXPECT_EQ(rej.rejected_info_length, 8);
  EXPECT_EQ(load_be64(rej.ari.data()), p.connect_params().local_ca_guid) << "ARI: A's CA GUID";
  EXPECT_TRUE(p.sa.count_events(CmEventType::kConnectComplete) == 0) << "nothing fires after close";
  ASSERT_NE(p.sb.last(CmEventType::kAborted), nullptr);
  EXPECT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_CONNECTION_ABORTED);
  EXPECT_EQ(p.b.reject({}, p.now), STATUS_CONNECTION_ABORTED);
}

TEST(CmConnection, DisconnectFromEitherSideThenTimeWaitThenClosed) {
  for (bool active_disconnects : {true, false}) {
    Pair p;
    p.establish();
    CmConnection& x = active_disconnects ? p.a : p.b;
    CmConnection& y = active_disconnects ? p.b : p.a;
    Sink& sx = active_disconnects ? p.sa : p.sb;
    Sink& sy = active_disconnects ? p.sb : p.sa;
    EXPECT_EQ(y.complete_connect(p.now), STATUS_CONNECTION_INVALID);
    ASSERT_EQ(x.disconnect(p.now), STATUS_PENDING);
    EXPECT_EQ(x.state(), CmState::kDreqSent);
    EXPECT_EQ(x.disconnect(p.now), STATUS_CONNECTION_INVALID) << "one at a time";
    p.pump();
    const auto& dreq = std::get<CmDreq>(sx.sent.back().body);
    EXPECT_EQ(dreq.remote_qpn_eecn, active_disconnects ? 0x22u : 0x11u);
    ASSERT_NE(sy.last(CmEventType::kDisconnected), nullptr) << "the disconnect callback";
    ASSERT_NE(sx.last(CmEventType::kDisconnectComplete), nullptr);
    EXPECT_EQ(sx.last(CmEventType::kDisconnectComplete)->status, STATUS_SUCCESS);
    EXPECT_EQ(sx.count_events(CmEventType::kDisconnected), 0u);
    EXPECT_EQ(x.state(), CmState::kTimeWait);
    EXPECT_EQ(y.state(), CmState::kTimeWait);
    EXPECT_EQ(y.disconnect(p.now), STATUS_SUCCESS) << "the peer already disconnected";
    // TimeWait lasts exactly timewait_ns.
    const std::uint64_t t = p.now;
    p.a.on_timer(t + 3 * kSec - 1);
    p.b.on_timer(t + 3 * kSec - 1);
    EXPECT_EQ(x.state(), CmState::kTimeWait);
    p.a.on_timer(t + 3 * kSec);
    p.b.on_timer(t + 3 * kSec);
    EXPECT_EQ(x.state(), CmState::kClosed);
    EXPECT_EQ(y.state(), CmState::kClosed);
    EXPECT_EQ(sx.count_events(CmEventType::kReleased), 1u);
    EXPECT_EQ(sy.count_events(CmEventType::kReleased), 1u);
  }
}

TEST(CmConnection, CrossingDreqsBothComplete) {
  Pair p;
  p.establish();
  ASSERT_EQ(p.a.disconnect(p.now), STATUS_PENDING);
  ASSERT_EQ(p.b.disconnect(p.now), STATUS_PENDING);
  p.pump();
  EXPECT_EQ(p.sa.last(CmEventType::kDisconnectComplete)->status, STATUS_SUCCESS);
  EXPECT_EQ(p.sb.last(CmEventType::kDisconnectComplete)->status, STATUS_SUCCESS);
  EXPECT_EQ(p.a.state(), CmState::kTimeWait);
  EXPECT_EQ(p.b.state(), CmState::kTimeWait);
}

TEST(CmConnection, LostDrepIsResentForTheDuplicateDreq) {
  Pair p;
  p.establish();
  int dropped = 0;
  p.drop = [&](const CmMad& m, bool a_to_b) {
    return !a_to_b && is(m, cm_attr::kDrep) && dropped++ == 0;
  };
  ASSERT_EQ(p.a.disconnect(p.now), STATUS_PENDING);
  p.pump();
  EXPECT_EQ(p.a.state(), CmState::kDreqSent);
  p.now = p.a.next_timeout_ns();
  p.a.on_timer(p.now);
  p.pump();
  EXPECT_EQ(p.sa.count_sent(cm_attr::kDreq), 2u);
  EXPECT_EQ(p.sb.count_sent(cm_attr::kDrep), 2u);
  EXPECT_EQ(p.sb.sent.back().hdr.tid, p.sa.sent.back().hdr.tid);
  EXPECT_EQ(p.sb.count_events(CmEventType::kDisconnected), 1u) << "once";
  EXPECT_EQ(p.sa.last(CmEventType::kDisconnectComplete)->status, STATUS_SUCCESS);
}

TEST(CmConnection, DeadPeerDisconnectTimesOutIntoTimeWait) {
  Pair p;
  CmConnectParams cp = p.connect_params();
  cp.max_cm_retries = 2;
  ASSERT_EQ(p.a.connect(cp, p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  p.pump();
  p.drop = [](const CmMad&, bool) { return true; };
  ASSERT_EQ(p.a.disconnect(p.now), STATUS_PENDING);
  while (p.a.state() == CmState::kDreqSent) ASSERT_TRUE(p.tick());
  EXPECT_EQ(p.sa.count_sent(cm_attr::kDreq), 3u);
  EXPECT_EQ(p.sa.last(CmEventType::kDisconnectComplete)->status, STATUS_IO_TIMEOUT);
  EXPECT_EQ(p.a.state(), CmState::kTimeWait);
}

TEST(CmConnection, ReqForAConnectionInTimeWaitIsRejectedAsStale) {
  Pair p;
  p.establish();
  const CmMad original_req = p.sa.sent.front();
  ASSERT_EQ(p.a.disconnect(p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.state(), CmState::kTimeWait);
  p.b.on_message(original_req, p.now);
  const auto& rej = std::get<CmRej>(p.sb.sent.back().body);
  EXPECT_EQ(rej.reason, 10);
  EXPECT_EQ(rej.remote_comm_id, p.a.local_comm_id());
  EXPECT_EQ(p.sb.sent.back().hdr.tid, original_req.hdr.tid);
}

TEST(CmConnection, StaleEstablishedConnectionIsTornDown) {
  Pair p;
  p.establish();
  p.b.stale(p.now);  // the owner saw a new REQ from A's QP
  EXPECT_EQ(p.sb.last(CmEventType::kDisconnected)->status, STATUS_CONNECTION_RESET);
  EXPECT_EQ(p.b.state(), CmState::kDreqSent);
  p.pump();
  EXPECT_EQ(p.b.state(), CmState::kTimeWait);
  EXPECT_EQ(p.b.disconnect(p.now), STATUS_SUCCESS);
  // The owner's answer to the new REQ.
  const CmMad req = make_cm_mad(0x77, CmReq{.local_comm_id = 0xA0000099});
  const CmMad rej = CmConnection::rej_for(req, CmRejReason::kStaleConn);
  EXPECT_EQ(rej.hdr.tid, 0x77u);
  EXPECT_EQ(rej.hdr.attr_id, cm_attr::kRej);
  EXPECT_EQ(std::get<CmRej>(rej.body).remote_comm_id, 0xA0000099u);
  EXPECT_EQ(std::get<CmRej>(rej.body).reason, 10);
  EXPECT_EQ(std::get<CmRej>(rej.body).message_rejected, CmMsgResponse::kReq);
}

// A connection already ending (our DREQ unanswered: the peer died) when its peer's QP sends a new
// REQ: the DREQ goes again at once, and the answer ends it in TimeWait.
TEST(CmConnection, StaleConnectionAlreadyDisconnectingAsksAgainAtOnce) {
  Pair p;
  p.establish();
  p.drop = [](const CmMad&, bool) { return true; };  // the peer is gone
  ASSERT_EQ(p.b.disconnect(p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.state(), CmState::kDreqSent);
  auto dreqs = [&] {
    return std::count_if(p.sb.sent.begin(), p.sb.sent.end(),
                         [](const CmMad& m) { return is(m, cm_attr::kDreq); });
  };
  const auto before = dreqs();
  p.drop = [](const CmMad&, bool) { return false; };  // the peer is back
  p.b.stale(p.now);
  EXPECT_EQ(dreqs(), before + 1) << "a DREQ at once, not at the next retry";
  EXPECT_EQ(p.b.state(), CmState::kDreqSent);
  p.pump();
  EXPECT_EQ(p.b.state(), CmState::kTimeWait);
}

TEST(CmConnection, CommunicationEstablishedStandsInForALostRtu) {
  Pair p;
  p.drop = [](const CmMad& m, bool) { return is(m, cm_attr::kRtu); };
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.b.accept(p.accept_params(), p.now), STATUS_PENDING);
  p.pump();
  ASSERT_EQ(p.a.complete_connect(p.now), STATUS_SUCCESS);
  p.pump();
  p.b.communication_established(p.now);  // first RC packet on B's QP
  EXPECT_EQ(p.b.state(), CmState::kEstablished);
  EXPECT_EQ(p.sb.last(CmEventType::kAcceptComplete)->status, STATUS_SUCCESS);
  EXPECT_EQ(p.b.next_timeout_ns(), CmConnection::kNoTimeout);
}

TEST(CmConnection, MessagesOfOtherConnectionsAreIgnored) {
  Pair p;
  ASSERT_EQ(p.a.connect(p.connect_params(), p.now), STATUS_PENDING);
  p.pump();
  // A Timeout REJ with no remote comm ID must name B's peer by ID and CA GUID.
  CmRej tmo;
  tmo.local_comm_id = p.a.local_comm_id();
  tmo.reason = 4;
  tmo.rejected_info_length = 8;
  store_be64(tmo.ari.data(), 0x1234);  // another CA
  p.b.on_message(make_cm_mad(1, tmo), p.now);
  EXPECT_EQ(p.b.state(), CmState::kReqRcvd);
  tmo.local_comm_id = 0x999;  // another connection of the right CA
  store_be64(tmo.ari.data(), p.connect_params().local_ca_guid);
  p.b.on_message(make_cm_mad(1, tmo), p.now);
  EXPECT_EQ(p.b.state(), CmState::kReqRcvd);
  EXPECT_TRUE(p.sb.events.empty());
  CmRep rep;
  rep.local_comm_id = 0xB0000002;
  rep.remote_comm_id = 0xDEADBEEF;  // not A's
  p.a.on_message(make_cm_mad(1, rep), p.now);
  EXPECT_EQ(p.a.state(), CmState::kReqSent);
  CmRej rej;
  rej.remote_comm_id = 0xDEADBEEF;
  p.a.on_message(make_cm_mad(1, rej), p.now);
  EXPECT_EQ(p.a.state(), CmState::kReqSent);
  EXPECT_TRUE(p.sa.events.empty());
}

TEST(CmConnection, ClosingAnEstablishedConnectionSendsDreqAndFiresNothingButReleased) {
  Pair p;
  p.establish();
  const std::size_t before = p.sa.events.size();
  p.a.close(p.now);
  p.pump();
  EXPECT_EQ(p.sa.events.size(), before) << "no DisconnectComplete after close";
  EXPECT_NE(p.sb.last(CmEventType::kDisconnected), nullptr);
  while (p.tick()) {
  }
  EXPECT_EQ(p.a.state(), CmState::kClosed);
  EXPECT_EQ(p.sa.count_events(CmEventType::kReleased), 1u);
  EXPECT_EQ(p.sa.events.size(), before + 1);
}

TEST(CmConnection, PassiveRequestMustCarryTheRdmaCmHeader) {
  Sink s;
  CmConnection c(s, CmConfig{});
  CmReq req;
  req.local_comm_id = 5;
  EXPECT_EQ(c.on_request(make_cm_mad(1, CmRtu{}), 1, 1, 0), STATUS_INVALID_PARAMETER);
  req.private_data[1] = 0x50;  // neither IPv4 nor IPv6
  EXPECT_EQ(c.on_request(make_cm_mad(1, req), 1, 1, 0), STATUS_INVALID_PARAMETER);
  req.private_data[0] = 1;  // cma version 1
  req.private_data[1] = 0x40;
  EXPECT_EQ(c.on_request(make_cm_mad(1, req), 1, 1, 0), STATUS_INVALID_PARAMETER);
  req.private_data[0] = 0;
  req.private_data[1] = 0x40;
  req.transport_service_type = 1;  // UC
  EXPECT_EQ(c.on_request(make_cm_mad(1, req), 1, 1, 0), STATUS_INVALID_PARAMETER);
  req.transport_service_type = 0;
  EXPECT_EQ(c.on_request(make_cm_mad(1, req), 1, 1, 0), STATUS_SUCCESS);
  EXPECT_EQ(c.on_request(make_cm_mad(1, req), 1, 1, 0), STATUS_CONNECTION_INVALID);
  EXPECT_EQ(c.send_mra(0), STATUS_SUCCESS);
  EXPECT_EQ(c.send_mra(0), STATUS_SUCCESS) << "resent";
  EXPECT_EQ(s.count_sent(cm_attr::kMra), 2u);
  EXPECT_EQ(c.disconnect(0), STATUS_CONNECTION_INVALID) << "never established";
}

}  // namespace
}  // namespace rocedp::control
