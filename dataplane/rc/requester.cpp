#include "dataplane/rc/requester.hpp"

#include <bit>

#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/congestion.hpp"
#include "dataplane/rc/ib_timers.hpp"
#include "dataplane/rc/transmit.hpp"
#include "dataplane/wire/psn.hpp"

namespace rocedp::rc {
namespace {

using namespace wire::opcode;
namespace psn = wire;

enum class Admit : uint8_t { kGo, kWait, kLocalDone, kError };

// AckReq cadence: PSNs whose low bits are all ones, about a quarter window apart (1..32).
uint32_t ack_req_mask(uint32_t window) {
  uint32_t q = std::bit_floor(window / 4 == 0 ? 1u : window / 4);
  if (q > kAckReqInterval) q = kAckReqInterval;
  return q - 1;
}

bool is_rd_atomic(SendOpcode op) {
  return op == SendOpcode::kRead || op == SendOpcode::kCompareSwap || op == SendOpcode::kFetchAdd;
}
bool is_local(SendOpcode op) {
  return op == SendOpcode::kFastRegister || op == SendOpcode::kInvalidate ||
         op == SendOpcode::kBind;
}

WcError from_mr_status(NTSTATUS s) {
  return s == STATUS_ACCESS_VIOLATION ? WcError::kLocalProtection : WcError::kLocalOp;
}

// Local work requests run when the requester reaches them, so they take effect in send-queue
// order relative to the requests around them (NDK FastRegister / Invalidate / Bind).
[[gnu::noinline, gnu::cold]] WcError run_local(const SendWqe& w, RcContext& ctx, uint32_t pd) {
  NTSTATUS s = STATUS_SUCCESS;
  switch (w.opcode) {
    case SendOpcode::kFastRegister:
      s = ctx.mrs->fast_register(w.local_token, w.fr_address, w.fr_length, w.fr_access);
      break;
    case SendOpcode::kInvalidate:
      s = ctx.mrs->invalidate(w.local_token);
      break;
    case SendOpcode::kBind:  // the window's token in local_token, the region's in bind_mr_token
      s = ctx.mrs->bind_window(w.local_token, w.bind_mr_token, pd, w.fr_address, w.fr_length,
                               w.fr_access);
      break;
    default:
      return WcError::kLocalOp;
  }
  return s == STATUS_SUCCESS ? WcError::kSuccess : from_mr_status(s);
}

// First look at a WQE: checks that need no packet, then PSNs. kWait leaves it untouched.
Admit admit(QueuePair& qp, RcContext& ctx, const SendWqe& w, WqeMeta& m, WcError* err) {
  const QpConnectParams& c = qp.conn();
  const bool rd_atomic = is_rd_atomic(w.opcode);
  // IBTA §10.8.3.3 fence: wait until every earlier READ / atomic has completed.
  if ((w.flags & NDK_OP_FLAG_READ_FENCE) != 0 && qp.req.rd_atomic_outstanding != 0)
    return Admit::kWait;
  if (rd_atomic && c.outbound_read_limit != 0 &&
      qp.req.rd_atomic_outstanding >= c.outbound_read_limit) {
    return Admit::kWait;
  }
  m = WqeMeta{};
  m.started = true;
  if (is_local(w.opcode)) {
    m.local = true;
    m.done = true;
    *err = run_local(w, ctx, qp.params().pd);
    m.error = *err;
    return *err == WcError::kSuccess ? Admit::kLocalDone : Admit::kError;
  }
  const bool inl =
      (w.flags & NDK_OP_FLAG_INLINE) != 0 && w.opcode != SendOpcode::kRead && !rd_atomic;
  const uint64_t len = inl ? w.inline_length : sge_bytes(w);
  *err = WcError::kSuccess;
  if (len > kMaxMessageBytes ||
      (w.opcode == SendOpcode::kRead && len > uint64_t{qp.path_mtu()} * kMaxReadPackets)) {
    *err = WcError::kLocalLength;
  }
  if (rd_atomic && c.outbound_read_limit == 0) *err = WcError::kLocalOp;
  if (w.opcode == SendOpcode::kCompareSwap || w.opcode == SendOpcode::kFetchAdd) {
    // IBTA §9.4.5: atomics operate on naturally aligned 8-byte words.
    if ((w.remote_address & 7) != 0 || len != 8) *err = WcError::kLocalOp;
  }
  if (*err == WcError::kSuccess && !inl) {
    // Sinks (READ data, atomic result) need local write; sources only local read.
    const uint32_t access = rd_atomic ? kMrAccessLocalWrite : kMrAccessLocalRead;
    for (uint32_t i = 0; i < w.sge_count; ++i) {
      const NdkSge& s = w.sge[i];
      if (s.length == 0) continue;
      if (ctx.mrs->check_local(qp.req.local_mr, s.memory_region_token, qp.params().pd,
                               reinterpret_cast<uint64_t>(s.virtual_address), s.length,
                               access) != STATUS_SUCCESS) {
        *err = WcError::kLocalProtection;
        break;
      }
    }
  }
  if (*err != WcError::kSuccess) {
    m.error = *err;
    m.done = true;
    return Admit::kError;
  }
  const uint32_t npkts =
      rd_atomic && w.opcode != SendOpcode::kRead ? 1 : packets_for(len, qp.path_mtu());
  m.first_psn = qp.req.cur.psn;
  m.last_psn = psn::psn_add(m.first_psn, npkts - 1);
  m.length = static_cast<uint32_t>(len);
  m.rd_atomic = rd_atomic;
  if (rd_atomic) ++qp.req.rd_atomic_outstanding;
  qp.req.cur.offset = 0;
  return Admit::kGo;
}

uint8_t send_opcode(const SendWqe& w, bool first, bool last) {
  const bool imm = w.has_immediate;
  if (w.opcode == SendOpcode::kWrite) {
    if (first && last) return imm ? kRcWriteOnlyImm : kRcWriteOnly;
    if (first) return kRcWriteFirst;
    if (!last) return kRcWriteMiddle;
    return imm ? kRcWriteLastImm : kRcWriteLast;
  }
  const bool inv = w.opcode == SendOpcode::kSendAndInvalidate;
  if (first && last) return inv ? kRcSendOnlyInv : (imm ? kRcSendOnlyImm : kRcSendOnly);
  if (first) return kRcSendFirst;
  if (!last) return kRcSendMiddle;
  return inv ? kRcSendLastInv : (imm ? kRcSendLastImm : kRcSendLast);
}

// Builds and transmits the packet at the cursor. False (cursor restored) if the sink refused.
bool send_one(QueuePair& qp, RcContext& ctx, const SendWqe& w, const WqeMeta& m, uint64_t now_ns) {
  const RequesterCursor saved = qp.req.cur;  // item 10: snapshot before building
  RequesterCursor& cur = qp.req.cur;
  const uint32_t mtu = qp.path_mtu();
  TxPacket pkt;
  pkt.psn = cur.psn;
  TxPayload pl;
  RequesterCursor next = cur;
  switch (w.opcode) {
    case SendOpcode::kRead: {
      // A retried READ may start mid-message: ask only for the bytes still missing.
      const uint32_t skip = psn::psn_forward(m.first_psn, cur.psn) * mtu;
      pkt.opcode = kRcReadRequest;
      pkt.ack_req = true;
      pkt.set_reth(w.remote_address + skip, w.remote_token, m.length - skip);
      next.psn = psn::psn_next(m.last_psn);
      next.wqe = cur.wqe + 1;
      break;
    }
    case SendOpcode::kCompareSwap:
    case SendOpcode::kFetchAdd: {
      const bool cas = w.opcode == SendOpcode::kCompareSwap;
      pkt.opcode = cas ? kRcCompareSwap : kRcFetchAdd;
      pkt.ack_req = true;
      pkt.set_atomic_eth(w.remote_address, w.remote_token, w.swap_or_add, cas ? w.compare : 0);
      next.psn = psn::psn_next(cur.psn);
      next.wqe = cur.wqe + 1;
      break;
    }
    default: {
      const uint32_t remaining = m.length - cur.offset;
      const uint32_t seg = remaining < mtu ? remaining : mtu;
      const bool first = cur.offset == 0;
      const bool last = remaining <= mtu;
      pkt.opcode = send_opcode(w, first, last);
      // AckReq (IBTA §9.7.2): at the end of each message, about every quarter window (so one lost
      // ACK never stalls the window), and on the last PSN the window allows.
      if (last) {
        pkt.ack_req = true;
      } else {
        const uint32_t mask = ack_req_mask(qp.comp.window);
        const uint32_t window_left =
            qp.comp.window - psn::psn_forward(qp.comp.unacked_psn, cur.psn);
        pkt.ack_req = (cur.psn & mask) == mask || window_left <= 1;
      }
      const bool solicit = (w.flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0;
      const bool write = w.opcode == SendOpcode::kWrite;
      pkt.se = last && solicit && (!write || w.has_immediate);
      // Extension headers of the opcode, in wire order (IBTA §9.2): RETH on the first packet of
      // a WRITE, then ImmDt or IETH on the last packet of the message.
      if (write && first) pkt.set_reth(w.remote_address, w.remote_token, m.length);
      if (last) {
        if (w.opcode == SendOpcode::kSendAndInvalidate) {
          pkt.add_be32(w.invalidate_token);
        } else if (w.has_immediate) {
          pkt.add_be32(w.immediate);
        }
      }
      pl.length = seg;
      if ((w.flags & NDK_OP_FLAG_INLINE) != 0) {
        pl.flat = w.inline_data + cur.offset;
      } else {
        pl.sges = w.sge;
        pl.sge_count = w.sge_count;
        pl.offset = cur.offset;
      }
      next.psn = psn::psn_next(cur.psn);
      next.offset = cur.offset + seg;
      if (last) {
        next.wqe = cur.wqe + 1;
        next.offset = 0;
      }
      break;
    }
  }
  const bool retransmit = psn::psn_lt(cur.psn, qp.req.max_psn_sent);
  // The first packet resent after a go-back asks for an ACK: after a timeout it is the tail-loss
  // probe whose answer says at once how much arrived (LOSS.md).
  if (retransmit && cur.psn == qp.comp.unacked_psn) pkt.ack_req = true;
  if (!transmit(qp, ctx, pkt, pl)) {
    cur = saved;
    return false;
  }
  qp.comp.last_tx_ns = now_ns;
  if (retransmit) {
    ctx.counters->add(RcCounter::kTxRetransmit);
    ++qp.stats.retransmits;
  } else if (pkt.ack_req && !qp.comp.rtt_timing) {
    // RTT sample (Karn: a packet sent once, answered at once because it asks for an ACK).
    qp.comp.rtt_timing = true;
    qp.comp.rtt_psn = cur.psn;
    qp.comp.rtt_start_ns = now_ns;
  }
  cur = next;
  if (psn::psn_gt(cur.psn, qp.req.max_psn_sent)) qp.req.max_psn_sent = cur.psn;
  return true;
}

enum class Single : uint8_t { kGeneral, kSent, kStop };

// Bookkeeping of a packet sent for the first time that asks for an ACK (send_one's, for the
// single-packet case): RTT sample (Karn), cursor past it.
void sent_first(QueuePair& qp, uint32_t psn, uint32_t next_psn, uint64_t now_ns) {
  qp.comp.last_tx_ns = now_ns;
  if (!qp.comp.rtt_timing) {
    qp.comp.rtt_timing = true;
    qp.comp.rtt_psn = psn;
    qp.comp.rtt_start_ns = now_ns;
  }
  qp.req.cur.psn = qp.req.max_psn_sent = next_psn;
  ++qp.req.cur.wqe;
}

// send_single's READ: one request for the whole message, its response PSNs reserved.
template <TxIp kIp>
Single send_read(QueuePair& qp, RcContext& ctx, const SendWqe& w, WqeMeta& m, uint64_t now_ns,
                 uint32_t len) {
  const uint32_t psn = qp.req.cur.psn;
  TxBth h;
  h.opcode = kRcReadRequest;
  h.ack_req = true;
  h.ext_len = wire::kRethLen;
  h.psn = psn;
  const bool sent = transmit_frame<kIp>(qp, ctx, h, 0, [&](uint8_t* ext, uint8_t*) {
    write_reth(ext, w.remote_address, w.remote_token, len);
  });
  if (!sent) return Single::kStop;
  m = WqeMeta{};
  m.started = true;
  m.rd_atomic = true;
  m.first_psn = psn;
  m.last_psn = psn::psn_add(psn, packets_for(len, qp.path_mtu()) - 1);
  m.length = len;
  ++qp.req.rd_atomic_outstanding;
  sent_first(qp, psn, psn::psn_next(m.last_psn), now_ns);
  return Single::kSent;
}

// The common case in one pass: a WRITE or SEND of one packet, or a READ, reached for the first
// time, with the checks admit() and send_one() make for it, for QPs of IP version kIp (kV4 or kV6).
// kGeneral (nothing changed) for anything else, or for a check that fails, so that the general path
// decides it and reports it.
template <TxIp kIp>
Single send_single(QueuePair& qp, RcContext& ctx, const SendWqe& w, WqeMeta& m, uint64_t now_ns) {
  const bool write = w.opcode == SendOpcode::kWrite;
  const bool read = w.opcode == SendOpcode::kRead;
  if (!write && !read && w.opcode != SendOpcode::kSend) return Single::kGeneral;
  const bool inl = !read && (w.flags & NDK_OP_FLAG_INLINE) != 0;
  if (!inl && w.sge_count != 1) return Single::kGeneral;
  const uint32_t len = inl ? w.inline_length : w.sge[0].length;
  RequesterCursor& cur = qp.req.cur;
  const QpConnectParams& c = qp.conn();
  // A WQE not started yet follows everything sent, so this is never a retransmission.
  // A READ of more than kMaxReadPackets packets, without a division.
  if ((read ? len > kMaxMessageBytes || len > uint64_t{qp.path_mtu()} * kMaxReadPackets
            : len > qp.path_mtu()) ||
      cur.psn != qp.req.max_psn_sent)
    return Single::kGeneral;
  // The general path waits for the fence and the outbound READ limit, or fails a READ without one.
  const uint32_t outstanding = qp.req.rd_atomic_outstanding;
  if (outstanding != 0 &&
      ((w.flags & NDK_OP_FLAG_READ_FENCE) != 0 || (read && outstanding >= c.outbound_read_limit))) {
    return Single::kGeneral;
  }
  if (read && c.outbound_read_limit == 0) return Single::kGeneral;
  if (!inl &&
      ctx.mrs->check_local(qp.req.local_mr, w.sge[0].memory_region_token, qp.params().pd,
                           reinterpret_cast<uint64_t>(w.sge[0].virtual_address), len,
                           read ? kMrAccessLocalWrite : kMrAccessLocalRead) != STATUS_SUCCESS) {
    return Single::kGeneral;
  }
  const uint32_t psn = cur.psn;
  if (psn::psn_forward(qp.comp.unacked_psn, psn) >= qp.comp.window) return Single::kStop;
  if (qp.comp.probing && psn != qp.comp.unacked_psn) [[unlikely]]
    return Single::kStop;
  if (read) return send_read<kIp>(qp, ctx, w, m, now_ns, len);
  const bool imm = w.has_immediate;
  TxBth h;
  h.opcode = send_opcode(w, true, true);
  h.se = (w.flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0 && (!write || imm);
  h.ack_req = true;
  h.ext_len = static_cast<uint8_t>((write ? wire::kRethLen : 0) + (imm ? 4 : 0));
  h.psn = psn;
  const uint8_t* src = inl ? w.inline_data : static_cast<const uint8_t*>(w.sge[0].virtual_address);
  // The RETH, the immediate and the payload go straight into the frame.
  const bool sent = transmit_frame<kIp>(qp, ctx, h, len, [&](uint8_t* ext, uint8_t* pl) {
    if (write) {
      write_reth(ext, w.remote_address, w.remote_token, len);
      ext += wire::kRethLen;
    }
    if (imm) wire::store_be32(ext, w.immediate);
    wire::copy_payload_bytes(pl, src, len);
  });
  if (!sent) return Single::kStop;
  m = WqeMeta{};
  m.started = true;
  m.first_psn = m.last_psn = psn;
  m.length = len;
  sent_first(qp, psn, psn::psn_next(psn), now_ns);
  return Single::kSent;
}

// An IPv6 QP's send_single, out of line: the IPv4 loop keeps its registers.
[[gnu::noinline]] Single send_single_ipv6(QueuePair& qp, RcContext& ctx, const SendWqe& w,
                                          WqeMeta& m, uint64_t now_ns) {
  return send_single<TxIp::kV6>(qp, ctx, w, m, now_ns);
}

}  // namespace

namespace {
[[gnu::noinline]] uint32_t requester_send_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns,
                                             uint32_t budget, uint32_t avail) {
  uint32_t sent = 0;
  // send_single is instantiated per IP version (transmit_frame<TxIp::kV4>: testing for IPv6 per
  // frame cost its loop 6 instructions per 64-byte WRITE, and an instance of this loop per IP
  // version 8); the IPv6 one is a call out of line.
  const bool v4 = !qp.ipv6();
  while (sent < budget && qp.req.cur.wqe < avail) {
    const SendWqe& w = qp.sq_at(qp.req.cur.wqe);
    WqeMeta& m = qp.meta_at(qp.req.cur.wqe);
    if (!m.started) {
      const Single r = v4 ? send_single<TxIp::kV4>(qp, ctx, w, m, now_ns)
                          : send_single_ipv6(qp, ctx, w, m, now_ns);
      if (r == Single::kSent) {
        ++sent;
        continue;
      }
      if (r == Single::kStop) break;
      WcError err = WcError::kSuccess;
      const Admit a = admit(qp, ctx, w, m, &err);
      if (a == Admit::kWait) break;
      if (a == Admit::kError) {
        enter_error(qp, ctx, err);
        return sent;
      }
    }
    if (m.local) {
      ++qp.req.cur.wqe;
      continue;
    }
    if (psn::psn_forward(qp.comp.unacked_psn, qp.req.cur.psn) >= qp.comp.window) break;
    // After a timeout only the probe (the oldest PSN) goes until an answer comes.
    if (qp.comp.probing && qp.req.cur.psn != qp.comp.unacked_psn) [[unlikely]]
      break;
    if (!send_one(qp, ctx, w, m, now_ns)) break;
    ++sent;
  }
  if (sent != 0 && !qp.comp.timer_armed) arm_retransmit_timer_st(qp, ctx, now_ns);
  return sent;
}

// The frame the packet at the requester's cursor puts on the wire (frame_bytes(): its opcode's
// extension headers, its payload and pad); 0 for a local operation, which sends none.
uint32_t next_packet_bytes(QueuePair& qp) {
  const SendWqe& w = qp.sq_at(qp.req.cur.wqe);
  if (is_local(w.opcode)) return 0;
  if (w.opcode == SendOpcode::kRead) return frame_bytes(qp, wire::kRethLen, 0);
  if (is_rd_atomic(w.opcode)) return frame_bytes(qp, wire::kAtomicEthLen, 0);
  const uint64_t len = (w.flags & NDK_OP_FLAG_INLINE) != 0 ? w.inline_length : sge_bytes(w);
  const uint64_t offset = qp.meta_at(qp.req.cur.wqe).started ? qp.req.cur.offset : 0;
  const uint64_t left = len > offset ? len - offset : 0;
  const uint32_t mtu = qp.path_mtu();
  const uint8_t op = send_opcode(w, offset == 0, left <= mtu);
  return frame_bytes(qp, wire::kOpcodeTable[op].length - wire::kBthLen,
                     static_cast<uint32_t>(left < mtu ? left : mtu));
}

// A QP whose rate a CNP cut (congestion.hpp): one packet at a time while its pacing clock allows,
// each charged to the clock; the rest of the budget at full speed once the rate has recovered.
[[gnu::noinline, gnu::cold]] uint32_t requester_send_paced_st(QueuePair& qp, RcContext& ctx,
                                                              uint64_t now_ns, uint32_t budget,
                                                              uint32_t avail) {
  uint32_t sent = 0;
  while (sent < budget && qp.req.cur.wqe < avail) {
    if (!qp.cc_flags.paced) return sent + requester_send_st(qp, ctx, now_ns, budget - sent, avail);
    if (!congestion_may_send_st(qp, now_ns)) break;
    const uint32_t bytes = next_packet_bytes(qp);
    const uint32_t n = requester_send_st(qp, ctx, now_ns, 1, avail);
    if (n == 0) break;
    if (qp.cc_flags.paced && bytes != 0) congestion_charge_st(qp, bytes);
    sent += n;
  }
  return sent;
}
}  // namespace

// Most visits find nothing to send (the QP is visited for an ACK, a completion, a receive): that
// answer costs a few loads here, not the prologue of the sending loop.
uint32_t requester_run_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns, uint32_t budget) {
  if (qp.state() != QpState::kRts || qp.comp.rnr_wait) return 0;
  const uint32_t avail = qp.sq_readable();
  if (avail == 0 || qp.req.cur.wqe >= avail || budget == 0) return 0;  // a responder: no req line
  if (qp.cc_flags.paced) [[unlikely]]
    return requester_send_paced_st(qp, ctx, now_ns, budget, avail);
  return requester_send_st(qp, ctx, now_ns, budget, avail);
}

bool requester_seek_st(QueuePair& qp, uint32_t psn) {
  const uint32_t mtu = qp.path_mtu();
  const uint32_t avail = qp.sq_readable();
  uint32_t i = 0;
  for (; i < avail; ++i) {
    WqeMeta& m = qp.meta_at(i);
    if (!m.started) break;
    if (m.local || m.done || psn::psn_lt(m.last_psn, psn)) continue;
    // The first unfinished WQE at or after `psn`; PSNs before it are already confirmed.
    const uint32_t p = psn::psn_lt(psn, m.first_psn) ? m.first_psn : psn;
    qp.req.cur.wqe = i;
    qp.req.cur.psn = p;
    const SendOpcode op = qp.sq_at(i).opcode;
    qp.req.cur.offset = is_rd_atomic(op) ? 0 : psn::psn_forward(m.first_psn, p) * mtu;
    return true;
  }
  // Everything started is finished: continue with the first WQE not started yet.
  qp.req.cur.wqe = i;
  qp.req.cur.psn = qp.req.max_psn_sent;
  qp.req.cur.offset = 0;
  return false;
}

void requester_go_back_st(QueuePair& qp, RcContext& ctx, uint32_t psn_from) {
  // Karn: the timed packet will be sent again, so its ACK would not say which copy it answers.
  if (qp.comp.rtt_timing && psn::psn_le(psn_from, qp.comp.rtt_psn)) qp.comp.rtt_timing = false;
  if (requester_seek_st(qp, psn_from)) ctx.counters->add(RcCounter::kGoBackN);
}

}  // namespace rocedp::rc
