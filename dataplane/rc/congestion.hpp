#pragma once
// RoCEv2 congestion control (IBTA Annex A17.9; DCQCN, Zhu et al., SIGCOMM 2015), both roles of a
// QP, on its owning core:
//   - Notification point. A packet for the QP arrives with ECN = CE (a switch queue marked it):
//     the QP sends a CNP to its peer's QP, at most one per CNP interval. Always on: a peer that
//     sends ECT expects CNPs, whatever this end sends.
//   - Reaction point. A CNP arrives for a QP whose frames are ECN-capable (its ToS carries ECT):
//     the QP's send rate Rc, unlimited until then, is cut, Rc *= 1 - alpha/2 (at most once per
//     rate-reduce period), after the target Rt = Rc. Every alpha period alpha moves towards 1 if a
//     CNP came in the period and towards 0 if none did. Every T (time_reset_us) and every B bytes
//     sent (byte_reset) the rate recovers: Rc = (Rt + Rc) / 2 (fast recovery, F steps), then Rt
//     grows by the additive step and, once both counters passed F, by the hyper step per step
//     beyond. At the line rate the QP is unlimited again.
//   - Pacing. A limited QP's request packets and its READ and atomic responses (the responder
//     sends a READ's data) are charged to a clock at Rc; ACKs are not. The QP sends only when the
//     clock is not ahead of now (with kPaceSlackNs of burst after a pause), and the engine's
//     timer wakes it when the clock comes due.
// The parameters are the port's (config::DcqcnConfig, `ports[].dcqcn`; QpConnectParams::dcqcn),
// their defaults NVIDIA's documented adapter defaults for alpha's update (every 1 µs, 1019/1024
// kept), the CNP interval and the rate-reduce period (4 µs), the paper's F (5), and T, B and the
// increase steps chosen for a software sender. A QP that neither receives CE nor CNPs pays a
// test per frame received (receive.hpp), one per poll for the CNPs owed (RcEngine::send_cnps)
// and one per requester visit for pacing (requester.cpp).

#include <cstdint>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/ipv4.hpp"

namespace rocedp::rc {

inline constexpr uint64_t kPaceSlackNs = 10'000;  ///< burst allowed after a pause
/// Line rate for a device that reports no link speed.
inline constexpr uint32_t kDefaultLineRateMbps = 10'000;
/// DCQCN's parameters of a QP connected without the port's (tests, a bare engine).
inline const config::DcqcnConfig kDefaultDcqcn{};

/// The QP's frames carry ECT: it is a reaction point (ToS from QpConnectParams::tos).
inline bool congestion_ecn_capable(const QueuePair& qp) {
  return (qp.conn().tos & wire::kEcnMask) != 0;
}

/// NP: a packet for `qp` (checked: RTR/RTS, from its peer; the engine schedules the QP) carried
/// CE. The CNP leaves at the start of the next poll (RcContext::cnps_due).
inline void congestion_on_ce_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  ++qp.cc.ce_received;
  if (qp.cc_flags.cnp_due) return;
  if (qp.cc.cnps_sent != 0 &&
      now_ns - qp.cc.last_cnp_ns < qp.conn().dcqcn->cnp_interval_us * 1000ull)
    return;
  qp.cc_flags.cnp_due = true;
  ++ctx.cnps_due;
}

/// NP: sends the CNP cc_flags.cnp_due asked for. False if the sink refused: then it is not sent,
/// as if lost on the wire (the next CE-marked packet asks again).
bool congestion_send_cnp_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns);

/// RP: a CNP for `qp` arrived from its peer. Returns whether the rate was cut.
bool congestion_on_cnp_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns);

/// RP, a limited QP's visit: applies the alpha decay and the rate increases due by `now_ns`, and
/// says whether the pacing clock lets a frame leave now. When it does not, the QP waits for the
/// clock (cc_flags.pace_wait: RcEngine::sync_timer wakes it then).
bool congestion_may_send_st(QueuePair& qp, uint64_t now_ns);

/// RP: a limited QP's frame of `bytes` left (frame_bytes(): the pacing clock adds what the line
/// takes beyond it, the port's VLAN tag included; the byte counter).
void congestion_charge_st(QueuePair& qp, uint32_t bytes);

}  // namespace rocedp::rc
