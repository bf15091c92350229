#pragma once
// Responder (IBTA §9.7.5.1 "Responder: receiving request packets"; rxe_resp.c): executes inbound
// requests in PSN order and answers them.
//
//  * PSN check: the expected PSN executes. A duplicate (earlier PSN) is never re-applied:
//    SEND/WRITE are re-ACKed; a READ is re-executed from the responder's resources with the
//    duplicate's RETH (§9.7.5.1.3); an atomic replays the saved original value (§9.7.5.1.4).
//    A PSN ahead of the expected one gets ONE NAK PSN sequence error, then silence until the
//    expected PSN arrives (§9.7.5.1.2).
//  * Opcode sequence: MIDDLE/LAST need a FIRST of the same kind; FIRST/ONLY need no message in
//    progress. Violation: NAK invalid request (fatal).
//  * rkey / bounds / access (MR table) are checked BEFORE any byte is written or read;
//    failure: NAK remote access error (fatal), memory untouched.
//  * SEND (and WRITE with immediate) needs a receive WQE (RQ or SRQ): none -> RNR NAK carrying
//    the QP's min RNR timer code; nothing is consumed and the PSN does not advance.
//  * Receive buffer too small: the receive completes with STATUS_BUFFER_OVERFLOW and the
//    requester gets NAK invalid request (fatal).
//  * Inbound READ/atomics: a ring of IRL resources; a new request takes the oldest slot, and stops
//    its answer if a retry's replay of it is still going out (the requester, bound by its ORL,
//    already has that answer).
//  * ACKs are coalesced: one pending ACK/NAK per QP, sent at the end of the poll (after any
//    read responses), requested by AckReq, every kAckCoalesceMax packets, or kDelayedAckNs after
//    the first packet not yet covered; a newer one replaces an older one. ACKs carry credit code
//    0x1F ("unlimited", as rxe) and the MSN.

#include <cstdint>
#include <cstring>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/psn.hpp"
#include "dataplane/wire/rc_rx.hpp"

namespace rocedp::rc {

/// ACK at least every this many executed packets even without AckReq.
inline constexpr uint32_t kAckCoalesceMax = 32;
/// ... and at most this long after the first packet no ACK covers yet (IBTA lets a responder
/// coalesce, not hold ACKs: a requester such as rxe asks for one only every 64 packets and at
/// message ends, and times out if it pauses in between). Far below any peer's ACK timeout.
inline constexpr uint64_t kDelayedAckNs = 100'000;

/// Rocedp extension: a receive completion with immediate data carries the immediate in the low
/// 32 bits of TypeSpecificCompletionOutput and this flag above it (NDK has no immediate data).
inline constexpr uintptr_t kCqeImmediateValid = uintptr_t{1} << 32;

/// responder_receive_st for every packet but the WRITE ONLY of its short path.
void responder_receive_other_st(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                                uint64_t now_ns);

namespace responder_detail {

inline void set_ctl(ResponderState& r, uint8_t syndrome, uint32_t psn) {
  if (r.error_after_ctl) return;  // a fatal NAK is never replaced
  // A newer ACK/NAK covers an older one: ACK p says "all up to p", NAK p "all before p".
  if (!r.ctl_pending || wire::psn_ge(psn, r.ctl_psn)) {
    r.ctl_pending = true;
    r.ctl_syndrome = syndrome;
    r.ctl_psn = psn;
  }
}

// A SEND or WRITE packet executed: ACK it now (AckReq, or kAckCoalesceMax unacknowledged) or
// by the delayed-ACK deadline.
inline void ack_executed(ResponderState& r, const wire::RcRxPacket& pkt, uint64_t now_ns) {
  if (pkt.ack_req() || ++r.unacked_packets >= kAckCoalesceMax) {
    set_ctl(r, wire::kAethAck | wire::kAethAckUnlimitedCredits, pkt.psn);
    r.ack_fresh = true;
  } else if (r.ack_due_ns == 0) {
    r.ack_due_ns = now_ns + kDelayedAckNs;
  }
}

}  // namespace responder_detail

/// A visit at `now_ns`: queues the delayed ACK if it is due (its deadline is resp.ack_due_ns).
/// Inline: every visit asks, and most have nothing waiting.
inline void responder_ack_timer_st(QueuePair& qp, uint64_t now_ns) {
  ResponderState& r = qp.resp;
  if (r.ack_due_ns == 0 || r.ctl_pending) return;  // none waiting, or an ACK/NAK goes out anyway
  if (r.unacked_packets == 0) {
    r.ack_due_ns = 0;
    return;
  }
  if (now_ns >= r.ack_due_ns)
    responder_detail::set_ctl(r, wire::kAethAck | wire::kAethAckUnlimitedCredits,
                              wire::psn_sub(r.psn, 1));
}

/// A request packet addressed to `qp` (RTR or RTS). Inline (the engine's burst loop runs it):
/// the common case first, a WRITE ONLY at the expected PSN, no message in progress, its region
/// allowing it and its length the RETH's, at most one path MTU. Exactly what the general path does
/// for it (minus the WRITE state, which only a FIRST sets and MIDDLE/LAST read); anything else, a
/// failing check included, goes to responder_receive_other_st.
inline void responder_receive_st(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                                 uint64_t now_ns) {
  ResponderState& r = qp.resp;
  const uint32_t psn = pkt.psn;
  if (pkt.opcode() == wire::opcode::kRcWriteOnly && psn == r.psn && r.in_msg == InMessage::kNone &&
      !r.error_after_ctl && !r.report_writes) [[likely]] {
    const wire::RethFields reth = pkt.reth();
    const uint32_t len = pkt.payload_len;
    if (len == reth.dma_len && len <= qp.path_mtu() &&
        ctx.mrs->check_remote(r.remote_mr, reth.rkey, qp.params().pd, reth.va, len,
                              kMrAccessRemoteWrite) == STATUS_SUCCESS) [[likely]] {
      r.nak_outstanding = false;
      wire::copy_payload_bytes(reinterpret_cast<uint8_t*>(reth.va), pkt.payload(), len);
      r.psn = wire::psn_next(psn);
      r.msn = wire::psn_next(r.msn);
      responder_detail::ack_executed(r, pkt, now_ns);
      return;
    }
  }
  responder_receive_other_st(qp, ctx, pkt, now_ns);
}

/// Sends pending READ responses / atomic ACKs (oldest first; paced on a QP whose rate a CNP cut),
/// then the pending ACK/NAK. Returns packets sent.
uint32_t responder_tx_st(QueuePair& qp, RcContext& ctx, uint32_t budget, uint64_t now_ns);

/// A QP about to be flushed (NdkFlush, a disconnect, a close) sends the ACK/NAK it owes now: one
/// a visit holds for the consumer's answer, or the delayed ACK of packets no AckReq asked about.
/// The peer's requests executed here, whose effects the consumer may have seen already, then
/// complete at the peer instead of timing out. Returns packets sent (0 or 1).
uint32_t responder_settle_st(QueuePair& qp, RcContext& ctx);

/// ERROR: completes the held and every posted receive with STATUS_CANCELLED (RQ only; an SRQ is
/// shared and keeps its receives). Returns CQEs produced.
uint32_t responder_flush_st(QueuePair& qp, RcContext& ctx);

}  // namespace rocedp::rc
