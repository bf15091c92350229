#pragma once
// Completer (IBTA §9.7.5.2 "Requester: receiving responses"; rxe_comp.c): consumes ACK/NAK,
// READ responses and atomic ACKs, retires send-queue WQEs into the send CQ in posting order,
// and runs the retransmission timers.
//
//  * ACK (cumulative, by PSN): every SEND/WRITE whose last PSN is covered is done. An ACK that
//    covers a READ/atomic whose response never arrived is an implicit NAK: go back to it.
//  * NAK PSN sequence error: go-back-N from the NAK'd PSN (once per PSN until progress).
//  * RNR NAK: pause the requester for the AETH timer (ib_timers.hpp), then resend from the
//    NAK'd PSN; rnr_retry times (7 = forever), then STATUS_IO_TIMEOUT.
//  * NAK invalid request / remote access / remote operational: the WQE fails (queue_pair.hpp
//    table), the QP moves to ERROR, the rest is flushed.
//  * Retransmission timer with PSNs outstanding (NVIDIA ConnectX "adaptive retransmission";
//    shared/reference/LOSS.md): it fires after RTO = max(kRtoMinNs, 3·sRTT, sRTT + 4·RTTVAR),
//    measured from one timed AckReq packet at a time (never a retransmitted one, Karn), and
//    doubles with each timeout without progress up to the local ACK timeout (4.096 µs ×
//    2^timeout), which caps it. On expiry: go-back-N from the oldest unacknowledged PSN, whose
//    packet carries AckReq (a tail-loss probe: a lost tail packet or a lost ACK costs an RTO, not
//    the local ACK timeout). Early expiries are probes and consume no retry; only expiries of the
//    full local ACK timeout and sequence NAKs do, so a peer that is gone still fails after at least
//    retry_count × the local ACK timeout (IBTA C9-140..142 bound that timer), with IO_TIMEOUT.
//    Any progress restores the retry budget and the shortest timer, so sustained random loss
//    never exhausts it.
//  * READ responses are accepted strictly in PSN order and scattered into the WQE's SGEs; an
//    atomic ACK writes the original value into the 8-byte sink (and the CQE's
//    TypeSpecificCompletionOutput).
// SILENT_SUCCESS suppresses successful completions only; errors always complete.

#include <cstdint>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/rc_rx.hpp"

namespace rocedp::rc {

/// Floor of the adaptive retransmission timeout, as LOSS.md and IRN suggest (50-100 µs). An expiry
/// resends one packet (the probe), but a probe that is a READ request makes the responder replay
/// the whole READ: below ~100 µs, scheduling noise of a software path made spurious READ replays
/// (ghost responses) common on a clean link.
inline constexpr uint64_t kRtoMinNs = 100'000;
/// Timeout before the first RTT sample of a QP.
inline constexpr uint64_t kRtoInitialNs = 1'000'000;

/// Arms (or re-arms) the retransmission timer at now + the current RTO, or disarms it when
/// nothing is outstanding or the local ACK timeout is 0 (infinite).
void arm_retransmit_timer_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns);
/// The RTO the next arming would use (telemetry, tests), given the RTO of the path to the QP's
/// peer (RcEngine::path_rto_ns; 0: the QP's own estimate alone).
uint64_t current_rto_ns(const QueuePair& qp, uint64_t path_rto_ns = 0);

/// A response packet (ACK, ATOMIC_ACK, READ_RESPONSE_*) addressed to `qp`.
void completer_receive_st(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                          uint64_t now_ns);

/// ACK timeout and RNR wait expiry.
void completer_timers_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns);
/// Whether completer_timers_st has anything to do at `now_ns` (every visit asks; most have not).
inline bool completer_timer_due(const QueuePair& qp, uint64_t now_ns) {
  const CompleterState& c = qp.comp;
  return (c.rnr_wait && now_ns >= c.rnr_deadline_ns) ||
         (c.timer_armed && now_ns >= c.ack_deadline_ns);
}

/// Produces the completions of finished WQEs, oldest first; in ERROR, completes every WQE
/// (the failed one with its status, the others STATUS_CANCELLED). Returns CQEs produced.
uint32_t completer_retire_st(QueuePair& qp, RcContext& ctx);

}  // namespace rocedp::rc
