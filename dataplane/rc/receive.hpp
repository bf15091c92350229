#pragma once
// Receive (rxe_recv.c): the first stop of every inbound frame on the owning core. The codec's
// receive view (wire::parse_rc: one pass, only what the RC roles read) parses it and verifies the
// IP checksum and ICRC (drop reasons counted per DropReason, as the general parser names them); the
// RC checks follow: RC transport only, destination QPN owned by this core, source IP = the
// connected peer, QP state. Requests go to the responder, responses to the completer.

#include <array>
#include <cstdint>

#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/congestion.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/responder.hpp"
#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/rc_rx.hpp"

namespace rocedp::rc {

using WireDropCounters = std::array<uint64_t, wire::kDropReasonCount>;

/// What receive_parse_st made of a frame.
enum class RxParse : uint8_t {
  kExecute,    ///< an RC packet: hand it to receive_dispatch_st
  kCodecDrop,  ///< the codec refused it: counted in `drops` (wire::DropReason)
  kNotRc,      ///< parsed, but not RC: counted by the engine (kRxDropNotRc)
  kCnp,        ///< a CNP (counted kRxCnp): hand it to receive_cnp_st
};

/// Parses `frame` into `out` (ICRC verified). Every frame ends in exactly one counter: the
/// codec's drops, the engine's non-RC counters, or (kExecute) whatever dispatch counts.
inline RxParse receive_parse_st(wire::Bytes frame, wire::RcRxPacket& out, RcCounters& counters,
                                uint64_t* drops) {
  const wire::DropReason why = wire::parse_rc(frame, out);
  if (why != wire::DropReason::kNone) [[unlikely]] {
    ++drops[static_cast<size_t>(why)];
    return RxParse::kCodecDrop;
  }
  if (out.op->transport == wire::Transport::kRc) [[likely]]
    return RxParse::kExecute;
  // An RC QP executes RC opcodes only: a UD SEND (0x64/0x65) or anything else must never run
  // as an RC request. A CNP (0x81) is congestion feedback for the QP it names.
  if (out.op->transport == wire::Transport::kCnp) {
    counters.add(RcCounter::kRxCnp);
    return RxParse::kCnp;
  }
  counters.add(RcCounter::kRxDropNotRc);
  return RxParse::kNotRc;
}

/// Whether `pkt` comes from `qp`'s peer to `qp`'s address: IPv4 addresses compared as words (an
/// IPv6 QP and an IPv6 frame have the same stand-ins there, wire::kIpv6DstTag), then an IPv6
/// QP's whole addresses.
[[gnu::always_inline]] inline bool receive_from_peer(const QueuePair& qp,
                                                     const wire::RcRxPacket& pkt) {
  if (pkt.src_ip != qp.remote_ip() || pkt.dst_ip != qp.local_ip()) [[unlikely]]
    return false;
  if (pkt.dst_ip == wire::kIpv6DstTag) [[unlikely]]
    return pkt.ipv6 != 0 && qp.ipv6() && qp.ipv6_matches(pkt.ip6);
  return true;
}

/// A CNP for `qp` (null: unknown QPN): the reaction point's, if it comes from the QP's peer
/// while the QP sends.
inline void receive_cnp_st(QueuePair* qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                           uint64_t now_ns) {
  if (qp == nullptr || qp->state() != QpState::kRts || !receive_from_peer(*qp, pkt)) return;
  congestion_on_cnp_st(*qp, ctx, now_ns);
}

/// Hands a parsed RC packet to `qp` (null: unknown QPN, counted). Owning core only. Inline: the
/// engine's burst loop calls the role directly.
inline void receive_dispatch_st(QueuePair* qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                                uint64_t now_ns) {
  if (qp == nullptr) [[unlikely]] {
    ctx.counters->add(RcCounter::kRxDropNoQp);
    return;
  }
  const QpState s = qp->state();
  if (s != QpState::kRtr && s != QpState::kRts) [[unlikely]] {
    ctx.counters->add(RcCounter::kRxDropState);
    return;
  }
  // RC has no source QPN on the wire: the peer is identified by its address (rxe_recv.c
  // check_addr).
  if (!receive_from_peer(*qp, pkt)) [[unlikely]] {
    ctx.counters->add(RcCounter::kRxDropSource);
    return;
  }
  ++ctx.rx_packets;
  if (pkt.ecn == wire::kEcnCe) [[unlikely]] {  // a switch on the way is congested: tell the sender
    ctx.counters->add(RcCounter::kRxCe);
    congestion_on_ce_st(*qp, ctx, now_ns);
  }
  if ((pkt.op->flags & wire::op_flag::kRequest) != 0) {
    responder_receive_st(*qp, ctx, pkt, now_ns);
  } else {
    completer_receive_st(*qp, ctx, pkt, now_ns);
  }
}

}  // namespace rocedp::rc
