#pragma once
// RoCEv2 congestion control (IBTA Annex A17.9; DCQCN, Zhu et al., SIGCOMM 2015), both roles of a
// QP, on its owning core:
//   - Notification point. A packet for the QP arrives with ECN = CE (a switch queue marked it):
//     the QP sends a CNP to its peer's QP, at most one per kCnpIntervalNs. Always on: a peer that
//     sends ECT expects CNPs, whatever this end sends.
//   - Reaction point. A CNP arrives for a QP whose frames are ECN-capable (its ToS carries ECT):
//     the QP's send rate Rc, unlimited until then, is cut, Rc *= 1 - alpha/2 (at most once per
//     kRateReducePeriodNs), after the target Rt = Rc. Every kAlphaPeriodNs alpha moves towards 1
//     if a CNP came in the period and towards 0 if none did. Every kIncreasePeriodNs and every
//     kIncreaseBytes sent the rate recovers: Rc = (Rt + Rc) / 2 (fast recovery, kFastRecovery
//     steps), then Rt grows by kAiRateMbps (additive) and, once both counters passed kFastRecovery,
//     by kHaiRateMbps per step beyond (hyper). At the line rate the QP is unlimited again.
//   - Pacing. A limited QP's request packets and its READ and atomic responses (the responder
//     sends a READ's data) are charged to a clock at Rc; ACKs are not. The QP sends only when the
//     clock is not ahead of now (with kPaceSlackNs of burst after a pause), and the engine's
//     timer wakes it when the clock comes due.
// Where the constants come from: alpha's update (every 1 µs, 1019/1024 kept), the CNP interval
// and the rate-reduce period (4 µs) are NVIDIA's documented adapter defaults (the paper updates
// alpha every 55 µs by 1/256, so under sparse CNPs it cuts harder); F (5) is the paper's; T, B and
// the increase steps are chosen for a software sender. A QP that neither receives CE nor
// CNPs pays a test per frame received (receive.hpp), one per poll for the CNPs owed
// (RcEngine::send_cnps) and one per requester visit for pacing (requester.cpp).

#include <cstdint>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/ipv4.hpp"

namespace rocedp::rc {

inline constexpr uint64_t kCnpIntervalNs = 4'000;       ///< NP: min time between CNPs of a QP
inline constexpr uint64_t kRateReducePeriodNs = 4'000;  ///< RP: min time between cuts
inline constexpr uint64_t kAlphaPeriodNs = 1'000;       ///< alpha moves once per period
inline constexpr uint64_t kIncreasePeriodNs = 300'000;  ///< rate-increase timer (T)
inline constexpr uint32_t kIncreaseBytes = 32'768;      ///< rate-increase byte counter (B)
inline constexpr uint32_t kFastRecovery = 5;            ///< F
inline constexpr uint32_t kAiRateMbps = 5;              ///< additive increase
inline constexpr uint32_t kHaiRateMbps = 50;            ///< hyper increase
inline constexpr uint32_t kMinRateMbps = 1;             ///< no cut goes below it
inline constexpr uint32_t kAlphaKeep = 1019;            ///< of 1024: alpha's share kept each period
inline constexpr uint64_t kPaceSlackNs = 10'000;        ///< burst allowed after a pause
/// Line rate for a device that reports no link speed.
inline constexpr uint32_t kDefaultLineRateMbps = 10'000;

/// The QP's frames carry ECT: it is a reaction point (ToS from QpConnectParams::tos).
inline bool congestion_ecn_capable(const QueuePair& qp) {
  return (qp.conn().tos & wire::kEcnMask) != 0;
}

/// NP: a packet for `qp` (checked: RTR/RTS, from its peer; the engine schedules the QP) carried
/// CE. The CNP leaves at the start of the next poll (RcContext::cnps_due).
inline void congestion_on_ce_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  ++qp.cc.ce_received;
  if (qp.cc_flags.cnp_due) return;
  if (qp.cc.cnps_sent != 0 && now_ns - qp.cc.last_cnp_ns < kCnpIntervalNs) return;
  qp.cc_flags.cnp_due = true;
  ++ctx.cnps_due;
}

/// NP: sends the CNP cc_flags.cnp_due asked for. False if the sink refused: then it is not sent,
/// as if lost on the wire (the next CE-marked packet asks again).
bool congestion_send_cnp_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns);

/// RP: a CNP for `qp` arrived from its peer. Returns whether the rate was cut.
bool congestion_on_cnp_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns);

/// RP, a limited QP's visit: applies the alpha decay and the rate increases due by `now_ns`, and
/// says whether the pacing clock lets a frame leave now.
bool congestion_may_send_st(QueuePair& qp, uint64_t now_ns);

/// RP: `bytes` of a limited QP's frame left (the pacing clock and the byte counter).
void congestion_charge_st(QueuePair& qp, uint32_t bytes);

}  // namespace rocedp::rc
