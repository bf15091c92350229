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
//  * Local ACK timeout (4.096 µs × 2^timeout) with PSNs outstanding: go-back-N from the oldest
//    unacknowledged PSN; retry_count consecutive timeouts/NAKs without progress -> IO_TIMEOUT.
//  * READ responses are accepted strictly in PSN order and scattered into the WQE's SGEs; an
//    atomic ACK writes the original value into the 8-byte sink (and the CQE's
//    TypeSpecificCompletionOutput).
// SILENT_SUCCESS suppresses successful completions only; errors always complete.

#include <cstdint>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocedp::rc {

/// A response packet (ACK, ATOMIC_ACK, READ_RESPONSE_*) addressed to `qp`.
void completer_receive_lc(QueuePair& qp, RcContext& ctx, const wire::ParsedPacket& pkt, uint64_t now_ns);

/// ACK timeout and RNR wait expiry.
void completer_timers_lc(QueuePair& qp, RcContext& ctx, uint64_t now_ns);

/// Produces the completions of finished WQEs, oldest first; in ERROR, completes every WQE
/// (the failed one with its status, the others STATUS_CANCELLED). Returns CQEs produced.
uint32_t completer_retire_lc(QueuePair& qp, RcContext& ctx);

}  // namespace rocedp::rc
