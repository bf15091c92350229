#include "dataplane/rc/responder.hpp"

#include <cstring>

#include "dataplane/rc/congestion.hpp"
#include "dataplane/rc/transmit.hpp"
#include "dataplane/wire/psn.hpp"

namespace rocedp::rc {
namespace {

using namespace wire::opcode;
using responder_detail::ack_executed;
using responder_detail::set_ctl;
using wire::Position;

// Keeps QueuePair::resources_pending equal to the number of resources with responses to send,
// so the transmit path skips the resource scan when there are none (the common case).
void set_pending(QueuePair& qp, ReadResource& r, bool pending) {
  if (r.pending == pending) return;
  r.pending = pending;
  if (pending) {
    ++qp.resources_pending;
  } else {
    --qp.resources_pending;
  }
}

[[gnu::noinline, gnu::cold]] void nak_fatal(QueuePair& qp, uint8_t syndrome, uint32_t psn) {
  ResponderState& r = qp.resp;
  r.ctl_pending = true;
  r.ctl_syndrome = syndrome;
  r.ctl_psn = psn;
  r.error_after_ctl = true;
}

[[gnu::noinline, gnu::cold]] void nak_rnr(QueuePair& qp, RcContext& ctx, uint32_t psn) {
  set_ctl(qp.resp, static_cast<uint8_t>(wire::kAethRnrNak | (qp.conn().min_rnr_timer & 0x1F)), psn);
  qp.resp.nak_outstanding = true;  // drop what follows until the requester resends `psn`
  (void)ctx;
}

// Takes the next receive WQE (RQ head, kept until it completes, or an SRQ entry) and checks its
// buffers. False: none posted (RNR).
bool get_recv(QueuePair& qp) {
  ResponderState& r = qp.resp;
  if (r.have_recv) return true;
  const QpCreateParams& p = qp.params();
  if (p.srq != nullptr) {
    if (!p.srq->take_st(&r.recv)) return false;
    r.recv_from_srq = true;
  } else {
    if (p.rq->ring().readable_st() == 0) return false;
    r.recv = p.rq->ring().at_st(0);
    r.recv_from_srq = false;
  }
  r.have_recv = true;
  r.recv_offset = 0;
  return true;
}

bool recv_buffers_ok(QueuePair& qp, RcContext& ctx) {
  const RecvWqe& w = qp.resp.recv;
  for (uint32_t i = 0; i < w.sge_count; ++i) {
    const NdkSge& s = w.sge[i];
    if (s.length == 0) continue;
    if (ctx.mrs->check_local(s.memory_region_token, qp.params().pd,
                             reinterpret_cast<uint64_t>(s.virtual_address), s.length,
                             kMrAccessLocalWrite) != STATUS_SUCCESS) {
      return false;
    }
  }
  return true;
}

// The receive completion of the WQE whose context is `request_context`, staged (the engine
// publishes the burst's at once); a CQ overrun kills the QP.
void stage_recv_cqe(QueuePair& qp, RcContext& ctx, void* request_context, WcError err,
                    uint32_t bytes, NdkOperationType type, uintptr_t output, bool solicited) {
  ++ctx.completions;
  CompletionQueue* cq = qp.params().recv_cq;
  stage_on_st(ctx, cq);
  NdkResultEx* res = cq->claim_st();
  if (res == nullptr) [[unlikely]] {
    enter_error(qp, ctx, WcError::kFlushed, QpErrorReason::kCqFull);
    return;
  }
  const WcErrorInfo& info = wc_error_info(err);
  res->status = info.status;
  res->bytes_transferred = bytes;
  res->qp_context = qp.params().qp_context;
  res->request_context = request_context;
  res->type = type;
  res->provider_error_code = info.provider_code;
  res->type_specific_completion_output = output;
  cq->stage_st(err != WcError::kSuccess, solicited);
}

void complete_recv(QueuePair& qp, RcContext& ctx, WcError err, uint32_t bytes,
                   NdkOperationType type, uintptr_t output, bool solicited) {
  ResponderState& r = qp.resp;
  if (!r.recv_from_srq) qp.params().rq->ring().release_st(1);
  r.have_recv = false;
  stage_recv_cqe(qp, ctx, r.recv.request_context, err, bytes, type, output, solicited);
}

// Qp::report_remote_writes: the WRITE that just ended, its first byte's address and its length,
// a receive completion that took no receive. Flattened: with stage_recv_cqe inlined here as at
// its other callers, the compiler still inlines it into the SEND's completion (a call of it left
// out of line cost a SEND 38 instructions, callgrind).
[[gnu::noinline, gnu::flatten]] void report_write(QueuePair& qp, RcContext& ctx) {
  const ResponderState& r = qp.resp;
  stage_recv_cqe(qp, ctx, nullptr, WcError::kSuccess, r.write_total, NdkOperationType::kRemoteWrite,
                 static_cast<uintptr_t>(r.write_va - r.write_total), false);
}

void finish_message(QueuePair& qp) {
  qp.resp.msn = wire::psn_next(qp.resp.msn);  // MSN is 24 bits like a PSN
  qp.resp.in_msg = InMessage::kNone;
}

// Takes a resource slot for a READ/atomic. The ring holds the last IRL reads/atomics. A
// requester keeps at most IRL of them outstanding (its ORL), so a new one that needs the oldest
// slot means the requester already has that one's answer: if the slot is still pending, it is a
// replay a (spurious) retry asked for, whose answer would only be a ghost now. Stop it and take the
// slot.
ReadResource* take_resource(QueuePair& qp) {
  ReadResource& r = qp.resource(qp.resp.res_next);
  if (r.valid && r.pending) set_pending(qp, r, false);
  qp.resp.res_next = (qp.resp.res_next + 1) % qp.irl_capacity();
  r = ReadResource{};
  return &r;
}

// ---- per-opcode execution (expected PSN) ----

// IBTA §9.7.1 (and rxe's check_length): FIRST and MIDDLE carry exactly one path MTU, LAST and
// ONLY at most one (a LAST of none the parser refuses). Anything else is an invalid request.
bool payload_len_ok(const QueuePair& qp, Position pos, uint32_t len) {
  const bool ends = pos == Position::kLast || pos == Position::kOnly;
  return ends ? len <= qp.path_mtu() : len == qp.path_mtu();
}

// IBTA §9.7.5.1 (rxe: RESPST_ERR_TOO_MANY_RDMA_ATM_REQ): a responder that grants no READ or atomic
// resources (IRL 0) answers such a request with NAK Invalid Request.
bool refuse_rd_atomic(QueuePair& qp, uint32_t psn) {
  if (qp.conn().inbound_read_limit != 0) return false;
  nak_fatal(qp, wire::kAethNakInvalidRequest, psn);
  return true;
}

void exec_send(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt) {
  ResponderState& r = qp.resp;
  const uint32_t psn = pkt.psn;
  const Position pos = pkt.op->position;
  const bool starts = pos == Position::kFirst || pos == Position::kOnly;
  if (starts) {
    if (!get_recv(qp)) {
      nak_rnr(qp, ctx, psn);
      return;
    }
  }
  // Every packet: a receive buffer's region deregistered or invalidated meanwhile is not
  // written any more (DeregisterMr takes effect at once).
  if (!recv_buffers_ok(qp, ctx)) [[unlikely]] {
    complete_recv(qp, ctx, WcError::kLocalProtection, r.recv_offset, NdkOperationType::kReceive, 0,
                  false);
    nak_fatal(qp, wire::kAethNakRemoteOperational, psn);
    return;
  }
  const uint32_t len = pkt.payload_len;
  const bool ends = pos == Position::kLast || pos == Position::kOnly;
  if (!payload_len_ok(qp, pos, len) || uint64_t{r.recv_offset} + len > sge_bytes(r.recv)) {
    complete_recv(qp, ctx, WcError::kRecvTooSmall, r.recv_offset, NdkOperationType::kReceive, 0,
                  false);
    nak_fatal(qp, wire::kAethNakInvalidRequest, psn);
    return;
  }
  scatter_to_sges(r.recv.sge, r.recv.sge_count, r.recv_offset, pkt.payload(), len);
  r.recv_offset += len;
  r.psn = wire::psn_next(psn);
  if (!ends) {
    r.in_msg = InMessage::kSend;
    return;
  }
  NdkOperationType type = NdkOperationType::kReceive;
  uintptr_t out = 0;
  WcError err = WcError::kSuccess;
  if ((pkt.op->flags & wire::op_flag::kInvalidate) != 0) {
    // SEND with Invalidate (IBTA §9.4.4.1): the IETH names one of OUR regions to invalidate.
    type = NdkOperationType::kReceiveAndInvalidate;
    out = pkt.ieth_rkey();
    if (ctx.mrs->invalidate(pkt.ieth_rkey()) != STATUS_SUCCESS) err = WcError::kLocalProtection;
  } else if ((pkt.op->flags & wire::op_flag::kImm) != 0) {
    out = kCqeImmediateValid | pkt.imm();
  }
  complete_recv(qp, ctx, err, r.recv_offset, type, out, pkt.se());
  finish_message(qp);
  if (err != WcError::kSuccess) nak_fatal(qp, wire::kAethNakRemoteOperational, psn);
}

void exec_write(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt) {
  ResponderState& r = qp.resp;
  const uint32_t psn = pkt.psn;
  const Position pos = pkt.op->position;
  const bool starts = pos == Position::kFirst || pos == Position::kOnly;
  const bool ends = pos == Position::kLast || pos == Position::kOnly;
  const bool imm = (pkt.op->flags & wire::op_flag::kImm) != 0;
  // The receive WQE an immediate needs is checked before anything is written, so an RNR NAK
  // leaves the target memory and the responder state exactly as they were.
  if (imm && !get_recv(qp)) {
    nak_rnr(qp, ctx, psn);
    return;
  }
  if (starts) {
    const wire::RethFields reth = pkt.reth();
    if (ctx.mrs->check_remote(qp.resp.remote_mr, reth.rkey, qp.params().pd, reth.va, reth.dma_len,
                              kMrAccessRemoteWrite) != STATUS_SUCCESS) {
      nak_fatal(qp, wire::kAethNakRemoteAccess, psn);
      return;
    }
    r.write_va = reth.va;
    r.write_remaining = reth.dma_len;
    r.write_total = reth.dma_len;
    r.write_rkey = reth.rkey;
  } else if (pkt.payload_len != 0 &&
             ctx.mrs->check_remote(qp.resp.remote_mr, r.write_rkey, qp.params().pd, r.write_va,
                                   pkt.payload_len, kMrAccessRemoteWrite) != STATUS_SUCCESS)
      [[unlikely]] {
    // The region was deregistered or invalidated while the WRITE was in flight: its middle and
    // last packets are NAKed (remote access error) and write nothing.
    nak_fatal(qp, wire::kAethNakRemoteAccess, psn);
    return;
  }
  const uint32_t len = pkt.payload_len;
  if (!payload_len_ok(qp, pos, len) || len > r.write_remaining ||
      (ends && len != r.write_remaining)) {
    nak_fatal(qp, wire::kAethNakInvalidRequest, psn);
    return;
  }
  wire::copy_payload_bytes(reinterpret_cast<uint8_t*>(r.write_va), pkt.payload(), len);
  r.write_va += len;
  r.write_remaining -= len;
  r.psn = wire::psn_next(psn);
  if (!ends) {
    r.in_msg = InMessage::kWrite;
    return;
  }
  if (imm) {
    complete_recv(qp, ctx, WcError::kSuccess, r.write_total, NdkOperationType::kReceive,
                  kCqeImmediateValid | pkt.imm(), pkt.se());
  } else if (r.report_writes) [[unlikely]] {
    report_write(qp, ctx);
  }
  finish_message(qp);
}

[[gnu::noinline]] void exec_read(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt) {
  const uint32_t psn = pkt.psn;
  if (refuse_rd_atomic(qp, psn)) return;
  const wire::RethFields reth = pkt.reth();
  if (ctx.mrs->check_remote(qp.resp.remote_mr, reth.rkey, qp.params().pd, reth.va, reth.dma_len,
                            kMrAccessRemoteRead) != STATUS_SUCCESS) {
    nak_fatal(qp, wire::kAethNakRemoteAccess, psn);
    return;
  }
  ReadResource* res = take_resource(qp);
  const uint32_t npkts = packets_for(reth.dma_len, qp.path_mtu());
  res->valid = true;
  set_pending(qp, *res, true);
  res->first_psn = psn;
  res->last_psn = wire::psn_add(psn, npkts - 1);
  res->exec_psn = psn;
  res->tx_psn = psn;
  res->va = reth.va;
  res->remaining = reth.dma_len;
  res->rkey = reth.rkey;
  qp.resp.psn = wire::psn_add(psn, npkts);
  finish_message(qp);
}

[[gnu::noinline]] void exec_atomic(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt) {
  const uint32_t psn = pkt.psn;
  if (refuse_rd_atomic(qp, psn)) return;
  const wire::AtomicEthFields a = pkt.atomic_eth();
  if ((a.va & 7) != 0) {  // IBTA §9.4.5: misaligned atomic is an invalid request
    nak_fatal(qp, wire::kAethNakInvalidRequest, psn);
    return;
  }
  if (ctx.mrs->check_remote(a.rkey, qp.params().pd, a.va, 8, kMrAccessRemoteAtomic) !=
      STATUS_SUCCESS) {
    nak_fatal(qp, wire::kAethNakRemoteAccess, psn);
    return;
  }
  ReadResource* res = take_resource(qp);
  // Executed exactly once; duplicates replay res->atomic_orig (IBTA §9.7.5.1.4). Other cores may
  // touch the same word, so the operation itself is atomic.
  auto* word = reinterpret_cast<uint64_t*>(a.va);
  uint64_t orig;
  if (pkt.opcode() == kRcCompareSwap) {
    orig = a.compare;
    __atomic_compare_exchange_n(word, &orig, a.swap_add, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  } else {
    orig = __atomic_fetch_add(word, a.swap_add, __ATOMIC_SEQ_CST);
  }
  res->valid = true;
  res->atomic = true;
  set_pending(qp, *res, true);
  res->first_psn = res->last_psn = res->exec_psn = res->tx_psn = psn;
  res->atomic_orig = orig;
  qp.resp.psn = wire::psn_next(psn);
  finish_message(qp);
}

[[gnu::noinline, gnu::cold]] void duplicate(QueuePair& qp, RcContext& ctx,
                                            const wire::RcRxPacket& pkt) {
  ctx.counters->add(RcCounter::kRxDuplicate);
  ++qp.stats.duplicates;
  const uint32_t psn = pkt.psn;
  const uint8_t op = pkt.opcode();
  if (op == kRcReadRequest || op == kRcCompareSwap || op == kRcFetchAdd) {
    const bool atomic = op != kRcReadRequest;
    // Newest first: after the PSN space wraps, an old slot may hold the same PSNs as a new one.
    const uint32_t cap = qp.irl_capacity();
    for (uint32_t k = 1; k <= cap; ++k) {
      ReadResource& r = qp.resource(qp.resp.res_next + cap - k);
      if (!r.valid || r.atomic != atomic) continue;
      if (!wire::psn_le(r.first_psn, psn) || !wire::psn_le(psn, r.last_psn)) continue;
      if (atomic) {
        set_pending(qp, r, psn == r.first_psn);  // replay the saved result, never re-apply
        return;
      }
      // Re-execute with the duplicate's RETH: a retried READ may ask only for the tail, but for
      // no more responses than the original's PSNs from here hold (rxe drops one that asks for
      // more): its responses must not run into the PSNs of the requests after it.
      const wire::RethFields reth = pkt.reth();
      if (packets_for(reth.dma_len, qp.path_mtu()) > wire::psn_forward(psn, r.last_psn) + 1 ||
          ctx.mrs->check_remote(qp.resp.remote_mr, reth.rkey, qp.params().pd, reth.va, reth.dma_len,
                                kMrAccessRemoteRead) != STATUS_SUCCESS) {
        return;
      }
      set_pending(qp, r, true);
      r.exec_psn = psn;
      r.tx_psn = psn;
      r.va = reth.va;
      r.remaining = reth.dma_len;
      r.rkey = reth.rkey;  // the key just checked is the one its responses check again
      return;
    }
    return;  // too old: the requester no longer waits for it
  }
  // SEND / WRITE: already executed; acknowledge again (IBTA C9-105), coalesced.
  set_ctl(qp.resp, wire::kAethAck | wire::kAethAckUnlimitedCredits, wire::psn_sub(qp.resp.psn, 1));
}

bool sequence_ok(InMessage in_msg, const wire::OpcodeInfo& op) {
  const bool starts = op.position == Position::kFirst || op.position == Position::kOnly;
  if (in_msg == InMessage::kNone) return starts;
  if (starts) return false;
  const bool is_send = (op.flags & wire::op_flag::kSend) != 0;
  const bool is_write = (op.flags & wire::op_flag::kWrite) != 0;
  return (in_msg == InMessage::kSend && is_send) || (in_msg == InMessage::kWrite && is_write);
}

// Every request the short paths of responder_receive_st and responder_receive_other_st do not
// take.
[[gnu::noinline]] void receive_request(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                                       uint64_t now_ns) {
  ResponderState& r = qp.resp;
  const uint32_t psn = pkt.psn;
  if (r.error_after_ctl) {
    ctx.counters->add(RcCounter::kRxDropState);
    return;
  }
  const int32_t diff = wire::psn_diff(psn, r.psn);
  if (diff < 0) {
    duplicate(qp, ctx, pkt);
    return;
  }
  if (diff > 0) {
    ctx.counters->add(RcCounter::kRxOutOfSequence);
    if (!r.nak_outstanding) {
      set_ctl(qp.resp, wire::kAethNakPsnSeqError, r.psn);
      r.nak_outstanding = true;
    }
    return;
  }
  r.nak_outstanding = false;
  const wire::OpcodeInfo& op = *pkt.op;
  if (!sequence_ok(r.in_msg, op)) {
    nak_fatal(qp, wire::kAethNakInvalidRequest, psn);
    return;
  }
  const uint16_t fl = op.flags;
  if ((fl & wire::op_flag::kRead) != 0) {
    exec_read(qp, ctx, pkt);
    return;
  }
  if ((fl & wire::op_flag::kAtomic) != 0) {
    exec_atomic(qp, ctx, pkt);
    return;
  }
  if ((fl & wire::op_flag::kSend) != 0) {
    exec_send(qp, ctx, pkt);
  } else {
    exec_write(qp, ctx, pkt);
  }
  if (r.error_after_ctl || r.nak_outstanding || r.psn != wire::psn_next(psn)) return;
  ack_executed(r, pkt, now_ns);
}

}  // namespace

namespace {
// The SEND ONLY of responder_receive_other_st into the receive queue's head WQE, read where it is
// posted (it completes here, so it is not copied into resp.recv first): one SGE, large enough,
// its region valid. False, with nothing changed: the general path decides.
bool send_only_in_place(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt) {
  WqeRing<RecvWqe>& ring = qp.params().rq->ring();
  if (ring.readable_st() == 0) return false;
  const RecvWqe& w = ring.at_st(0);
  const NdkSge& s = w.sge[0];
  const uint32_t len = pkt.payload_len;
  if (w.sge_count != 1 || len > s.length || len > qp.path_mtu()) return false;
  auto* dst = static_cast<uint8_t*>(s.virtual_address);
  if (s.length != 0 &&
      ctx.mrs->check_local(s.memory_region_token, qp.params().pd, reinterpret_cast<uint64_t>(dst),
                           s.length, kMrAccessLocalWrite) != STATUS_SUCCESS) {
    return false;
  }
  ResponderState& r = qp.resp;
  r.nak_outstanding = false;
  wire::copy_payload_bytes(dst, pkt.payload(), len);
  r.psn = wire::psn_next(pkt.psn);
  stage_recv_cqe(qp, ctx, w.request_context, WcError::kSuccess, len, NdkOperationType::kReceive, 0,
                 pkt.se());
  ring.release_st(1);  // after the last read of the slot
  finish_message(qp);
  return true;
}
}  // namespace

void responder_receive_other_st(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                                uint64_t now_ns) {
  ResponderState& r = qp.resp;
  const uint32_t psn = pkt.psn;
  // A SEND ONLY (no immediate, no invalidate) of at most one path MTU at the expected PSN, no
  // message in progress, into a receive WQE whose buffers are valid and large enough: exec_send's
  // steps for it, in its order. Anything else, a failing check included, goes to receive_request.
  // (The length checks are made where the length is read.)
  if (pkt.opcode() == kRcSendOnly && psn == r.psn && r.in_msg == InMessage::kNone &&
      !r.error_after_ctl) {
    if (!r.have_recv && qp.params().srq == nullptr) {
      if (send_only_in_place(qp, ctx, pkt)) {
        ack_executed(r, pkt, now_ns);
        return;
      }
    } else if (get_recv(qp) && recv_buffers_ok(qp, ctx)) {
      const uint32_t len = pkt.payload_len;
      const RecvWqe& w = r.recv;
      if (w.sge_count == 1 && uint64_t{r.recv_offset} + len <= w.sge[0].length &&
          len <= qp.path_mtu()) [[likely]] {
        r.nak_outstanding = false;
        wire::copy_payload_bytes(static_cast<uint8_t*>(w.sge[0].virtual_address) + r.recv_offset,
                                 pkt.payload(), len);
        r.recv_offset += len;
        r.psn = wire::psn_next(psn);
        complete_recv(qp, ctx, WcError::kSuccess, r.recv_offset, NdkOperationType::kReceive, 0,
                      pkt.se());
        finish_message(qp);
        ack_executed(r, pkt, now_ns);
        return;
      }
    }
  }
  receive_request(qp, ctx, pkt, now_ns);
}

namespace {
// Sends the pending ACK/NAK. 1 if it left, 0 if the sink refused a buffer (it stays pending).
[[gnu::noinline]] uint32_t send_ctl(QueuePair& qp, RcContext& ctx) {
  ResponderState& rs = qp.resp;
  TxPacket pkt;
  pkt.opcode = kRcAck;
  pkt.psn = rs.ctl_psn;
  pkt.set_aeth(rs.ctl_syndrome, rs.msn);
  if (!transmit(qp, ctx, pkt, TxPayload{})) return 0;
  rs.ctl_pending = false;
  const uint8_t type = rs.ctl_syndrome & wire::kAethTypeMask;
  // An ACK covers up to its PSN. Packets executed after the one that asked for it (without
  // AckReq, in the same burst) keep their count and their delayed-ACK deadline; a NAK covers
  // everything before the PSN it names, which is the next one expected.
  if (type != wire::kAethAck || rs.ctl_psn == wire::psn_sub(rs.psn, 1)) {
    rs.unacked_packets = 0;
    rs.ack_due_ns = 0;
  }
  if (type == wire::kAethNak) ++qp.stats.naks_sent;
  ctx.counters->add(type == wire::kAethAck ? RcCounter::kAcksSent
                                           : (type == wire::kAethRnrNak ? RcCounter::kRnrNaksSent
                                                                        : RcCounter::kNaksSent));
  if (rs.error_after_ctl) {
    rs.error_after_ctl = false;
    // The fatal NAK that left names what the peer asked for and was refused.
    const QpErrorReason why = rs.ctl_syndrome == wire::kAethNakRemoteAccess
                                  ? QpErrorReason::kRefusedAccess
                              : rs.ctl_syndrome == wire::kAethNakRemoteOperational
                                  ? QpErrorReason::kRefusedOperation
                                  : QpErrorReason::kRefusedInvalidRequest;
    enter_error(qp, ctx, WcError::kFlushed, why);
  }
  return 1;
}

[[gnu::noinline]] uint32_t responder_send_st(QueuePair& qp, RcContext& ctx, uint32_t budget,
                                             uint64_t now_ns) {
  ResponderState& rs = qp.resp;
  if (qp.state() != QpState::kRtr && qp.state() != QpState::kRts) return 0;
  const uint32_t mtu = qp.path_mtu();
  uint32_t sent = 0;
  bool blocked = false;
  // Where the scan for the first pending resource resumes: nothing here makes a resource pending,
  // so the slots before the one last found stay idle (a run of responses is not quadratic).
  uint32_t k = 0;
  // A fatal NAK waits for the responses owed to the requests before it (IBTA §9.7.5: in PSN
  // order); nothing after it is answered.
  bool nak_next = false;
  while (qp.resources_pending != 0 && sent < budget) {
    // Oldest pending resource first: responses leave in PSN order. The ring from res_next (its
    // oldest slot) holds requests in PSN order, and a resource's next response (tx_psn, even
    // when a duplicate restarts it) stays within its own PSN range, before the next request's:
    // the first pending resource in ring order is the one with the lowest tx_psn.
    ReadResource* r = nullptr;
    for (; k < qp.irl_capacity(); ++k) {
      ReadResource& c = qp.resource(rs.res_next + k);
      if (c.valid && c.pending) {
        r = &c;
        break;
      }
    }
    if (r == nullptr) break;
    if (rs.error_after_ctl && !wire::psn_lt(r->tx_psn, rs.ctl_psn)) [[unlikely]] {
      nak_next = true;
      break;
    }
    // A QP whose rate a CNP cut paces its responses as its requests (congestion.hpp): the
    // responder of READs is the data's sender, the one the receiver's CNPs must slow down.
    if (qp.cc_flags.paced && !congestion_may_send_st(qp, now_ns)) [[unlikely]]
      break;
    TxPacket pkt;
    TxPayload pl;
    if (r->atomic) {
      pkt.opcode = kRcAtomicAck;
      pkt.psn = r->first_psn;
      pkt.set_aeth(wire::kAethAck | wire::kAethAckUnlimitedCredits, rs.msn);
      pkt.add_atomic_ack(r->atomic_orig);
      if (!transmit(qp, ctx, pkt, pl)) {
        blocked = true;
        break;
      }
      set_pending(qp, *r, false);
      if (qp.cc_flags.paced) [[unlikely]]
        congestion_charge_st(qp, frame_bytes(qp, pkt.ext_len, 0));
    } else {
      const bool first = r->tx_psn == r->exec_psn;
      const bool last = r->remaining <= mtu;
      const uint32_t seg = last ? r->remaining : mtu;
      if (seg != 0 && ctx.mrs->check_remote(qp.resp.remote_mr, r->rkey, qp.params().pd, r->va, seg,
                                            kMrAccessRemoteRead) != STATUS_SUCCESS) [[unlikely]] {
        // The region was deregistered or invalidated after the READ request was checked: the
        // queued responses stop (not one more byte is read) and the requester gets a NAK
        // remote access error at the response it waits for.
        set_pending(qp, *r, false);
        nak_fatal(qp, wire::kAethNakRemoteAccess, r->tx_psn);
        nak_next = true;
        break;
      }
      pkt.opcode = first ? (last ? kRcReadRespOnly : kRcReadRespFirst)
                         : (last ? kRcReadRespLast : kRcReadRespMiddle);
      pkt.psn = r->tx_psn;
      // Every read response but MIDDLE carries an AETH (IBTA §9.3.5).
      if (pkt.opcode != kRcReadRespMiddle)
        pkt.set_aeth(wire::kAethAck | wire::kAethAckUnlimitedCredits, rs.msn);
      pl.flat = reinterpret_cast<const void*>(r->va);
      pl.length = seg;
      if (!transmit(qp, ctx, pkt, pl)) {  // nothing advanced: the same packet goes next time
        blocked = true;
        break;
      }
      if (qp.cc_flags.paced) [[unlikely]]
        congestion_charge_st(qp, frame_bytes(qp, pkt.ext_len, seg));
      r->va += seg;
      r->remaining -= seg;
      r->tx_psn = wire::psn_next(r->tx_psn);
      if (last) set_pending(qp, *r, false);
      ctx.counters->add(RcCounter::kReadResponsesSent);
    }
    ++sent;
  }
  if (blocked || !rs.ctl_pending) return sent;
  if (qp.resources_pending != 0 && !nak_next) return sent;  // responses first
  if (sent >= budget) return sent;
  return sent + send_ctl(qp, ctx);
}
}  // namespace

// The usual visit owes nothing, or only the ACK: answered here, without the prologue of the
// code that sends READ responses (what responder_send_st does when no resource is pending).
uint32_t responder_tx_st(QueuePair& qp, RcContext& ctx, uint32_t budget, uint64_t now_ns) {
  if (qp.resources_pending == 0) {
    if (!qp.resp.ctl_pending || budget == 0) return 0;
    if (qp.state() != QpState::kRtr && qp.state() != QpState::kRts) return 0;
    return send_ctl(qp, ctx);
  }
  return responder_send_st(qp, ctx, budget, now_ns);
}

uint32_t responder_settle_st(QueuePair& qp, RcContext& ctx) {
  if (qp.state() != QpState::kRtr && qp.state() != QpState::kRts) return 0;
  ResponderState& r = qp.resp;
  if (!r.ctl_pending && r.unacked_packets != 0)
    responder_detail::set_ctl(r, wire::kAethAck | wire::kAethAckUnlimitedCredits,
                              wire::psn_sub(r.psn, 1));
  return r.ctl_pending ? send_ctl(qp, ctx) : 0;
}

uint32_t responder_flush_st(QueuePair& qp, RcContext& ctx) {
  if (qp.state() != QpState::kError) return 0;
  uint32_t n = 0;
  ResponderState& r = qp.resp;
  if (r.have_recv) {
    complete_recv(qp, ctx, WcError::kFlushed, 0, NdkOperationType::kReceive, 0, false);
    ++n;
  }
  if (qp.params().rq != nullptr) {
    WqeRing<RecvWqe>& ring = qp.params().rq->ring();
    while (ring.readable_st() != 0) {
      r.recv = ring.at_st(0);
      r.recv_from_srq = false;
      r.have_recv = true;
      complete_recv(qp, ctx, WcError::kFlushed, 0, NdkOperationType::kReceive, 0, false);
      ++n;
    }
  }
  publish_staged_st(ctx);
  return n;
}

}  // namespace rocedp::rc
